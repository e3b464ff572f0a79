// Items of arrays whose items must differ (JSON Schema uniqueItems) as the matcher keeps them at run
// time: a canonical form per finished item, so that equal JSON values compare equal whatever their
// spelling, and a quick test of whether an unfinished item may still become equal to one of them (the
// matcher uses it to find the few tokens whose mask bit a finished duplicate could change).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::grammar {

struct UniqueItem {
  // Equal JSON values have equal forms: object keys sorted, numbers by their double value (1, 1.0 and
  // 1e0 are one; two numbers that round to the same double count as equal, which only ever refuses
  // more), strings decoded; true and 1 differ, as JSON Schema says.
  std::string canonical;
  // The value's kind: '"' string, '{' object, '[' array, 't' true, 'f' false, 'n' null, '0' number.
  char kind = 0;
  // The decoded strings the value holds (object keys included), sorted and distinct.
  std::vector<std::string> strings;
};

// The item whose JSON text is `text` (whitespace around it allowed). A text the JSON parser refuses (a
// lone surrogate escape) keeps its raw text, without the whitespace, as its form.
UniqueItem CanonicalItem(std::string_view text);

// Whether the start of an item's text, `prefix`, may still grow into a value equal to `item`: false only
// where no completion can (strings are compared as decoded so far; numbers and the members' order in
// objects are not looked at).
bool MayEqual(std::string_view prefix, const UniqueItem& item);

}  // namespace deepinfer::grammar
