// Incremental matching of one delimiter over a byte stream (Knuth-Morris-Pratt), optionally absorbing
// the run of '\n' bytes right before it, as deepseek-recipe's "newlines + string" patterns do. One byte
// at a time, so a delimiter split across chunks anywhere is found exactly as if it arrived whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::recipe {

class DelimiterMatcher {
 public:
  DelimiterMatcher(std::string_view delimiter, bool absorb_leading_newlines);

  // Consumes one byte. Returns true when the delimiter ends at this byte; matched_length() then gives
  // the bytes of the match (delimiter plus absorbed newlines), and the matcher starts over.
  bool Advance(uint8_t byte);
  void Reset() { state_ = 0; newlines_ = 0; matched_length_ = 0; }

  // Bytes at the end of the input that could still be the start of a match.
  size_t pending_length() const { return state_ + newlines_; }
  size_t matched_length() const { return matched_length_; }
  const std::string& delimiter() const { return delimiter_; }
  bool absorbs_newlines() const { return absorb_newlines_; }

 private:
  std::string delimiter_;
  std::vector<uint32_t> failure_;  // KMP failure function
  bool absorb_newlines_;
  uint32_t state_ = 0;     // delimiter bytes matched so far
  size_t newlines_ = 0;    // '\n' run right before the partial match
  size_t matched_length_ = 0;
};

}  // namespace deepinfer::recipe
