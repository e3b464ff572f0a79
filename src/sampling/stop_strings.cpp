#include "sampling/stop_strings.h"

#include <algorithm>

namespace deepinfer::sampling {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops, bool include_stop) : include_stop_(include_stop) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

StopStringMatcher::Step StopStringMatcher::Feed(std::string_view text) {
  Step step;
  if (stopped_) return step;
  if (stops_.empty()) {
    step.release.assign(text);
    return step;
  }
  held_.append(text);
  // Earliest match wins; among matches starting at the same byte, the first listed. held_ never contains a
  // complete stop string before this call, so a match must end inside the new text.
  size_t best = std::string::npos;
  size_t best_stop = 0;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t at = held_.find(stops_[i]);
    if (at < best) {
      best = at;
      best_stop = i;
    }
  }
  if (best != std::string::npos) {
    stopped_ = true;
    step.stopped = true;
    step.matched = stops_[best_stop];
    step.release = held_.substr(0, include_stop_ ? best + step.matched.size() : best);
    held_.clear();
    return step;
  }
  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t keep = 0;
  for (const std::string& stop : stops_) {
    const size_t longest = std::min(stop.size() - 1, held_.size());
    for (size_t len = longest; len > keep; --len) {
      if (held_.compare(held_.size() - len, len, stop, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  size_t cut = held_.size() - keep;
  // Never split a character (a stop string that begins with a continuation byte could ask for it).
  while (cut > 0 && cut < held_.size() && (static_cast<unsigned char>(held_[cut]) & 0xC0) == 0x80) --cut;
  step.release = held_.substr(0, cut);
  held_.erase(0, cut);
  return step;
}

std::string StopStringMatcher::Flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace deepinfer::sampling
