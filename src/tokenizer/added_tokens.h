// Finding added-token spellings in text, the way the oracle's AddedVocabulary does: leftmost-longest
// matching, first of the tokens with normalized: false on the raw text, then of those with
// normalized: true on the gaps left (there is no normalizer, so both see the same bytes).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocabulary.h"

namespace deepinfer::tokenizer {

class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  struct Segment {
    size_t begin;
    size_t end;
    int32_t id;  // the added token, or -1 for plain text
  };
  // Splits text into plain segments and added-token matches, in order.
  std::vector<Segment> Split(std::string_view text) const;

 private:
  struct Pass {
    // Candidates by first byte, longest first.
    std::vector<std::vector<const AddedToken*>> by_first_byte = std::vector<std::vector<const AddedToken*>>(256);
    bool empty = true;
  };
  void SplitPass(const Pass& pass, std::string_view text, size_t begin, size_t end, std::vector<Segment>* out) const;

  Pass raw_;
  Pass normalized_;
};

}  // namespace deepinfer::tokenizer
