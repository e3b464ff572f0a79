// A minimal JSON scanner for the two big arrays of a tokenizer.json (the vocab object and the merges list,
// ~250k strings): reading them straight from the text is several times faster than building a DOM. The
// rest of the file is small and goes through nlohmann::json.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace deepinfer::tokenizer {

class JsonScanner {
 public:
  explicit JsonScanner(std::string_view text) : text_(text) {}

  size_t pos() const { return pos_; }
  void set_pos(size_t pos) { pos_ = pos; }
  bool AtEnd() {
    SkipSpace();
    return pos_ >= text_.size();
  }

  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  // Consumes `c` (after whitespace) if it is next.
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  Status Expect(char c);
  // A JSON string, unescaped into *out.
  Status String(std::string* out);
  // A JSON integer.
  Status Integer(int64_t* out);
  // Skips one value of any kind (nesting is bounded).
  Status SkipValue();
  // The members of an object as (key, raw value text), in order.
  Status ObjectMembers(std::vector<std::pair<std::string, std::string_view>>* members);

  Status Error(const std::string& what) const;

 private:
  Status SkipValueAt(int depth);
  std::string_view text_;
  size_t pos_ = 0;
  std::string scratch_;
};

}  // namespace deepinfer::tokenizer
