#include "tokenizer/bpe.h"

#include <queue>

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
// megabyte of one letter costs O(n log n). Entries made stale by an earlier merge are skipped on pop.
void MergeLong(const BpeMerges& merges, std::vector<int32_t>& ids) {
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<int64_t> prev(n), next(n);
  for (int64_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  std::vector<bool> alive(n, true);
  struct Candidate {
    uint32_t rank;
    int64_t pos;
    int32_t left;
    int32_t right;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int64_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    BpeMerges::Rule r = merges.Find(ids[pos], ids[next[pos]]);
    if (r.rank != BpeMerges::kNoRank) heap.push({r.rank, pos, ids[pos], ids[next[pos]]});
  };
  for (int64_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    int64_t right = next[c.pos];
    if (!alive[c.pos] || right < 0 || ids[c.pos] != c.left || ids[right] != c.right) continue;
    ids[c.pos] = merges.MergedByRank(c.rank);
    alive[right] = false;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  size_t out = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (alive[i]) ids[out++] = ids[i];
  }
  ids.resize(out);
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
