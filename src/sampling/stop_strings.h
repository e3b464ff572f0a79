// Stop strings on generated text: finds the earliest stop string as text arrives in pieces (a stop string
// may span several tokens), and releases only text that cannot be the start of one, so a streamed output
// never shows text that a later token turns into a stop.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::sampling {

class StopStringMatcher {
 public:
  // Empty strings are ignored. With include_stop, the released text ends with the stop string matched.
  StopStringMatcher(std::vector<std::string> stops, bool include_stop);

  struct Step {
    std::string release;  // text that can be emitted now
    bool stopped = false;
    std::string matched;  // the stop string found, when stopped
  };
  // Adds text (complete UTF-8 characters, as the streaming detokenizer emits it). After a stop, returns
  // nothing more.
  Step Feed(std::string_view text);
  // The end of generation without a stop: the text held back.
  std::string Flush();
  bool active() const { return !stops_.empty(); }
  size_t held_bytes() const { return held_.size(); }

 private:
  std::vector<std::string> stops_;
  bool include_stop_;
  bool stopped_ = false;
  std::string held_;  // not yet released: a suffix that is a proper prefix of some stop string
};

}  // namespace deepinfer::sampling
