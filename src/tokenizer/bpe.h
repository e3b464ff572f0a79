// Rank-ordered byte-pair merging over token ids: the pair with the lowest merge rank merges first,
// leftmost first among equal ranks (Hugging Face BPE without dropout).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer {

class BpeMerges {
 public:
  // Ids and ranks are packed into 8-byte slots (a 127k-merge table is 2 MB and stays in cache better).
  static constexpr int32_t kMaxId = (1 << 21) - 1;
  static constexpr uint32_t kMaxRank = (1u << 22) - 2;

  // Sizes the table for n merges; call before Add.
  void Reserve(size_t n);
  // A later rule for the same pair replaces an earlier one (as the oracle's hash map does). Ids must be
  // in [0, kMaxId] and ranks at most kMaxRank (the loader checks).
  void Add(int32_t left, int32_t right, uint32_t rank, int32_t merged);
  size_t size() const { return count_; }

  struct Rule {
    uint32_t rank;
    int32_t merged;
  };
  // The rank of the rule for (left, right), or kNoRank.
  uint32_t Rank(int32_t left, int32_t right) const {
    uint64_t key = Key(left, right);
    size_t i = Hash(key) & mask_;
    while (true) {
      uint64_t slot = slots_[i];
      if ((slot >> kRankBits) == key) return static_cast<uint32_t>(slot & kRankMask);
      if (slot == kEmpty) return kNoRank;
      i = (i + 1) & mask_;
    }
  }
  // The token a rule of this rank produces.
  int32_t MergedByRank(uint32_t rank) const { return merged_by_rank_[rank]; }
  Rule Find(int32_t left, int32_t right) const {
    uint32_t rank = Rank(left, right);
    return {rank, rank == kNoRank ? -1 : merged_by_rank_[rank]};
  }

  static constexpr uint32_t kNoRank = 0xFFFFFFFF;

 private:
  static constexpr int kRankBits = 22;
  static constexpr uint64_t kRankMask = (uint64_t{1} << kRankBits) - 1;
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 21) | static_cast<uint32_t>(b);
  }
  static size_t Hash(uint64_t key) { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> 20); }
  void Insert(uint64_t key, uint32_t rank);

  std::vector<uint64_t> slots_;
  std::vector<int32_t> merged_by_rank_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

// Appends the ids of one pre-tokenized piece: its bytes as byte tokens (byte_ids), then merged.
void BpeEncodePiece(const BpeMerges& merges, const int32_t* byte_ids, std::string_view piece,
                    std::vector<int32_t>* out);

}  // namespace deepinfer::tokenizer
