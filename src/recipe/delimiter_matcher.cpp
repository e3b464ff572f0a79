#include "recipe/delimiter_matcher.h"

namespace deepinfer::recipe {

DelimiterMatcher::DelimiterMatcher(std::string_view delimiter, bool absorb_leading_newlines)
    : delimiter_(delimiter), failure_(delimiter.size(), 0), absorb_newlines_(absorb_leading_newlines) {
  uint32_t k = 0;
  for (size_t i = 1; i < delimiter_.size(); ++i) {
    while (k > 0 && delimiter_[i] != delimiter_[k]) k = failure_[k - 1];
    if (delimiter_[i] == delimiter_[k]) ++k;
    failure_[i] = k;
  }
}

bool DelimiterMatcher::Advance(uint8_t byte) {
  const char c = static_cast<char>(byte);
  const uint32_t previous = state_;
  while (state_ > 0 && delimiter_[state_] != c) state_ = failure_[state_ - 1];
  if (delimiter_[state_] == c) ++state_;
  if (absorb_newlines_) {
    if (state_ == 0) {
      // A '\n' extends the run before the delimiter. As in deepseek-recipe 0.2, a '\n' that breaks a
      // partial match does not start a new run (so "</thi\n\n</think>" absorbs one newline, not two).
      newlines_ = (c == '\n' && previous == 0) ? newlines_ + 1 : 0;
    } else if (previous > 0 && state_ != previous + 1) {
      newlines_ = 0;  // the partial match moved forward: the byte before it is not a newline
    }
  }
  if (state_ == delimiter_.size()) {
    matched_length_ = state_ + newlines_;
    state_ = 0;
    newlines_ = 0;
    return true;
  }
  return false;
}

}  // namespace deepinfer::recipe
