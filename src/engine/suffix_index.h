// The suffix index of speculative decoding's `suffix` drafter: the token sequences (prompt and output) of
// recently finished requests, looked up by the last n tokens of a running output (n from the longest
// configured down to the shortest) to propose what followed the latest earlier occurrence. Shared by
// every request of an engine, bounded in memory (oldest sequences dropped first).
//
// Threads: every method takes the index's mutex, so one index may serve drafters on several threads
// (the executor calls it from its step thread only).
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/mutex.h"

namespace deepinfer::engine {

class SuffixIndex {
 public:
  // Index entries at most (one per indexed token and n-gram length, about 40 bytes each: 80 MiB), and
  // tokens per sequence (its last ones).
  static constexpr int64_t kMaxEntries = int64_t{1} << 21;
  static constexpr int64_t kMaxSequenceTokens = int64_t{1} << 15;

  SuffixIndex(int min_n, int max_n, int64_t max_entries = kMaxEntries)
      : min_n_(min_n), max_n_(max_n), max_entries_(max_entries) {}

  // Indexes a finished request's tokens (the last kMaxSequenceTokens), dropping the oldest sequences while
  // the index would hold more than kMaxEntries.
  void Add(std::span<const int32_t> tokens);
  // The tokens (at most max_tokens) that followed the latest indexed occurrence of the longest suffix of
  // `context` of min_n..max_n tokens; `matched` receives that suffix's length (0: none, nothing returned).
  std::vector<int32_t> Lookup(std::span<const int32_t> context, int max_tokens, int64_t* matched) const;

  int64_t tokens() const;
  int64_t sequences() const;

 private:
  struct Sequence {
    uint64_t serial = 0;
    std::vector<int32_t> tokens;
  };
  struct Occurrence {
    uint64_t serial = 0;
    int64_t next = 0;  // the position after the n-gram (it has a following token)
  };
  static uint64_t KeyOf(const int32_t* tokens, int n);
  const Sequence* Find(uint64_t serial) const REQUIRES(mu_);
  void Drop() REQUIRES(mu_);  // the oldest sequence and its occurrences

  const int min_n_, max_n_;
  const int64_t max_entries_;
  mutable Mutex mu_;
  std::deque<Sequence> sequences_ GUARDED_BY(mu_);  // oldest first; serials ascend
  std::unordered_map<uint64_t, Occurrence> latest_ GUARDED_BY(mu_);  // n-gram key -> its latest occurrence
  uint64_t next_serial_ GUARDED_BY(mu_) = 1;
  int64_t tokens_ GUARDED_BY(mu_) = 0;
};

}  // namespace deepinfer::engine
