// Rank-ordered byte-pair merging over token ids: the pair with the lowest merge rank merges first,
// leftmost first among equal ranks (Hugging Face BPE without dropout).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace deepinfer {

class BpeMerges {
 public:
  // Sizes the table for n merges; call before Add.
  void Reserve(size_t n);
  // A later rule for the same pair replaces an earlier one (as the oracle's hash map does).
  void Add(int32_t left, int32_t right, uint32_t rank, int32_t merged);
  size_t size() const { return count_; }

  struct Rule {
    uint32_t rank;
    int32_t merged;
  };
  // The rule for (left, right), or rank == kNoRank.
  Rule Find(int32_t left, int32_t right) const {
    uint64_t key = Key(left, right);
    size_t i = Hash(key) & mask_;
    while (true) {
      const Slot& s = slots_[i];
      if (s.key == key) return {s.rank, s.merged};
      if (s.key == kEmptyKey) return {kNoRank, -1};
      i = (i + 1) & mask_;
    }
  }

  static constexpr uint32_t kNoRank = 0xFFFFFFFF;

 private:
  static constexpr uint64_t kEmptyKey = ~0ULL;
  struct Slot {
    uint64_t key = kEmptyKey;
    uint32_t rank = kNoRank;
    int32_t merged = -1;
  };
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static size_t Hash(uint64_t key) { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> 20); }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

// Appends the ids of one pre-tokenized piece: its bytes as byte tokens (byte_ids), then merged.
void BpeEncodePiece(const BpeMerges& merges, const int32_t* byte_ids, std::string_view piece,
                    std::vector<int32_t>* out);

}  // namespace deepinfer
