#include "router/recent_mix.h"

#include <algorithm>

namespace deepinfer::router {

void RecentMix::Add(int64_t arrival_ms, int64_t prompt_tokens, int64_t output_tokens) {
  MutexLock lock(&mu_);
  entries_.push_back({arrival_ms, std::max<int64_t>(1, prompt_tokens), std::max<int64_t>(1, output_tokens)});
  while (entries_.size() > max_requests_) entries_.pop_front();
}

TraceMix RecentMix::Mix(int64_t now_ms) const {
  TraceMix mix;
  int64_t oldest = now_ms;
  MutexLock lock(&mu_);
  for (const Entry& e : entries_) {
    if (e.arrival_ms < now_ms - window_ms_ || e.arrival_ms > now_ms) continue;
    MixRequest r;
    r.prompt_tokens = e.prompt_tokens;
    r.output_tokens = e.output_tokens;
    mix.requests.push_back(r);
    oldest = std::min(oldest, e.arrival_ms);
  }
  mix.duration_s = std::max(1.0, static_cast<double>(now_ms - oldest) / 1000);
  return mix;
}

}  // namespace deepinfer::router
