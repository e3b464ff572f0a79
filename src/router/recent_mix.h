// The mix of requests a router has served lately, for the planner (planner.h) on its /metrics: each
// finished generation's prompt and output tokens and when it arrived, the newest ones within a window.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "core/mutex.h"
#include "router/planner.h"

namespace deepinfer::router {

class RecentMix {
 public:
  // Keeps at most `max_requests`, none older than `window_ms`.
  RecentMix(size_t max_requests, int64_t window_ms) : max_requests_(max_requests), window_ms_(window_ms) {}

  // Lengths below one token count as one (the planner's smallest request).
  void Add(int64_t arrival_ms, int64_t prompt_tokens, int64_t output_tokens);
  // The requests that arrived within the window before `now_ms`, over the time from the oldest of them to
  // now (at least one second). No prefix is taken as cached: the router does not see the units' hits.
  TraceMix Mix(int64_t now_ms) const;

 private:
  struct Entry {
    int64_t arrival_ms;
    int64_t prompt_tokens;
    int64_t output_tokens;
  };
  const size_t max_requests_;
  const int64_t window_ms_;
  mutable Mutex mu_;
  std::deque<Entry> entries_ GUARDED_BY(mu_);  // in the order they finished
};

}  // namespace deepinfer::router
