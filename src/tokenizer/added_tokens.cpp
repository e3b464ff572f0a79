#include "tokenizer/added_tokens.h"

#include <algorithm>

namespace deepinfer::tokenizer {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) {
  for (const AddedToken& t : tokens) {
    Pass& pass = t.normalized ? normalized_ : raw_;
    pass.by_first_byte[static_cast<unsigned char>(t.content[0])].push_back(&t);
    pass.empty = false;
  }
  for (Pass* pass : {&raw_, &normalized_}) {
    for (auto& list : pass->by_first_byte) {
      std::stable_sort(list.begin(), list.end(),
                       [](const AddedToken* a, const AddedToken* b) { return a->content.size() > b->content.size(); });
    }
  }
}

void AddedTokenMatcher::SplitPass(const Pass& pass, std::string_view text, size_t begin, size_t end,
                                  std::vector<Segment>* out) const {
  size_t plain = begin;
  size_t pos = begin;
  while (pos < end) {
    const AddedToken* match = nullptr;
    for (const AddedToken* t : pass.by_first_byte[static_cast<unsigned char>(text[pos])]) {
      if (t->content.size() <= end - pos && text.compare(pos, t->content.size(), t->content) == 0) {
        match = t;
        break;
      }
    }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    if (plain < pos) out->push_back({plain, pos, -1});
    out->push_back({pos, pos + match->content.size(), match->id});
    pos += match->content.size();
    plain = pos;
  }
  if (plain < end) out->push_back({plain, end, -1});
}

std::vector<AddedTokenMatcher::Segment> AddedTokenMatcher::Split(std::string_view text) const {
  std::vector<Segment> first;
  SplitPass(raw_, text, 0, text.size(), &first);
  if (normalized_.empty) return first;
  std::vector<Segment> out;
  for (const Segment& s : first) {
    if (s.id >= 0) {
      out.push_back(s);
    } else {
      SplitPass(normalized_, text, s.begin, s.end, &out);
    }
  }
  return out;
}

}  // namespace deepinfer::tokenizer
