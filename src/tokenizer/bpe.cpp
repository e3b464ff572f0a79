#include "tokenizer/bpe.h"

#include <algorithm>
#include <functional>

namespace deepinfer::tokenizer {

void BpeMerges::Reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  slots_.assign(cap, kEmpty);
  mask_ = cap - 1;
  count_ = 0;
}

void BpeMerges::Insert(uint64_t key, uint32_t rank) {
  size_t i = Hash(key) & mask_;
  while (slots_[i] != kEmpty && (slots_[i] >> kRankBits) != key) i = (i + 1) & mask_;
  if (slots_[i] == kEmpty) ++count_;
  slots_[i] = (key << kRankBits) | rank;
}

void BpeMerges::Add(int32_t left, int32_t right, uint32_t rank, int32_t merged) {
  if ((count_ + 1) * 2 > slots_.size()) {
    std::vector<uint64_t> old = std::move(slots_);
    Reserve((count_ + 1) * 2);
    for (uint64_t s : old) {
      if (s != kEmpty) Insert(s >> kRankBits, static_cast<uint32_t>(s & kRankMask));
    }
  }
  if (merged_by_rank_.size() <= rank) merged_by_rank_.resize(rank + 1, -1);
  merged_by_rank_[rank] = merged;
  Insert(Key(left, right), rank);
}

namespace {

// Short pieces (nearly all): rescan for the lowest rank after every merge.
void MergeShort(const BpeMerges& merges, std::vector<int32_t>& ids, std::vector<uint32_t>& ranks) {
  size_t n = ids.size();
  ranks.resize(n);
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = merges.Rank(ids[i], ids[i + 1]);
  while (n > 1) {
    size_t best = 0;
    uint32_t best_rank = BpeMerges::kNoRank;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (ranks[i] < best_rank) {
        best_rank = ranks[i];
        best = i;
      }
    }
    if (best_rank == BpeMerges::kNoRank) break;
    ids[best] = merges.MergedByRank(best_rank);
    for (size_t i = best + 1; i + 1 < n; ++i) {
      ids[i] = ids[i + 1];
      ranks[i] = ranks[i + 1];
    }
    --n;
    if (best > 0) ranks[best - 1] = merges.Rank(ids[best - 1], ids[best]);
    ranks[best] = best + 1 < n ? merges.Rank(ids[best], ids[best + 1]) : BpeMerges::kNoRank;
  }
  ids.resize(n);
}

// Long pieces: a heap of candidate merges keyed by (rank, position) over a linked list of symbols, so a
// megabyte of one letter costs O(n log n). Memory is what bounds the tokenizer on hostile input (one piece
// can be the whole input: 20 MB of one letter), so it is kept to 12 bytes per byte of the piece for the
// list (32-bit ids and links; pieces are far below 2^31 bytes) plus 8 per candidate: a candidate is only
// (rank, position), and it is stale when the pair now at its position no longer has that rank (a rank
// names exactly one pair, so an equal rank means the same pair, which may be merged now just as well).
void MergeLong(const BpeMerges& merges, std::vector<int32_t>& ids) {
  const uint32_t n = static_cast<uint32_t>(ids.size());
  constexpr uint32_t kNone = 0xFFFFFFFF;
  constexpr uint32_t kDead = 0xFFFFFFFE;  // in prev[]: the symbol was merged into its left neighbour
  thread_local std::vector<uint32_t> prev, next;
  thread_local std::vector<uint64_t> heap;
  prev.resize(n);
  next.resize(n);
  heap.clear();
  for (uint32_t i = 0; i < n; ++i) {
    prev[i] = i == 0 ? kNone : i - 1;
    next[i] = i + 1 < n ? i + 1 : kNone;
  }
  auto rank_at = [&](uint32_t pos) -> uint32_t {
    return next[pos] == kNone ? BpeMerges::kNoRank : merges.Rank(ids[pos], ids[next[pos]]);
  };
  // Min-heap on rank, then position: (rank << 32 | pos) ordered as an integer.
  const auto greater = std::greater<uint64_t>();
  auto push = [&](uint32_t pos) {
    if (pos == kNone) return;
    const uint32_t rank = rank_at(pos);
    if (rank == BpeMerges::kNoRank) return;
    heap.push_back((static_cast<uint64_t>(rank) << 32) | pos);
    std::push_heap(heap.begin(), heap.end(), greater);
  };
  for (uint32_t i = 0; i + 1 < n; ++i) {
    const uint32_t rank = merges.Rank(ids[i], ids[i + 1]);
    if (rank != BpeMerges::kNoRank) heap.push_back((static_cast<uint64_t>(rank) << 32) | i);
  }
  std::make_heap(heap.begin(), heap.end(), greater);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), greater);
    const uint64_t top = heap.back();
    heap.pop_back();
    const uint32_t rank = static_cast<uint32_t>(top >> 32), pos = static_cast<uint32_t>(top);
    if (prev[pos] == kDead || rank_at(pos) != rank) continue;  // stale
    const uint32_t right = next[pos];
    ids[pos] = merges.MergedByRank(rank);
    prev[right] = kDead;
    next[pos] = next[right];
    if (next[pos] != kNone) prev[next[pos]] = pos;
    push(prev[pos]);
    push(pos);
  }
  size_t out = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (prev[i] != kDead) ids[out++] = ids[i];
  }
  ids.resize(out);
  // Do not keep a long piece's buffers alive on this thread.
  if (prev.capacity() > (size_t{1} << 20)) {
    std::vector<uint32_t>().swap(prev);
    std::vector<uint32_t>().swap(next);
    std::vector<uint64_t>().swap(heap);
  }
}

}  // namespace

void BpeEncodePiece(const BpeMerges& merges, const int32_t* byte_ids, std::string_view piece,
                    std::vector<int32_t>* out) {
  thread_local std::vector<int32_t> ids;
  thread_local std::vector<uint32_t> ranks;
  ids.clear();
  for (unsigned char b : piece) ids.push_back(byte_ids[b]);
  if (ids.size() <= 64) {
    MergeShort(merges, ids, ranks);
  } else {
    MergeLong(merges, ids);
  }
  out->insert(out->end(), ids.begin(), ids.end());
  if (ids.capacity() > (size_t{1} << 20)) std::vector<int32_t>().swap(ids);
}

}  // namespace deepinfer::tokenizer
