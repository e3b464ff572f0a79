// How JSON text spells characters inside a string literal, shared by the regex and JSON Schema front ends.
//
// Canonical spelling (what `json.dumps(..., ensure_ascii=False)` writes): characters as raw UTF-8, except
// '"' and '\' (escaped with a backslash), \b \f \n \r \t for those controls, and \u00xx (lower-case hex)
// for the other controls below U+0020. Where a string is only limited in length, every spelling JSON
// allows is accepted (any short escape, \uXXXX in either case, surrogate pairs); where characters are
// constrained (pattern, format, enum), only the canonical spelling is.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "grammar/grammar.h"

namespace deepinfer::grammar {

// One character from `ranges` (code points), canonically spelled.
ExprId JsonCanonicalChars(Grammar* g, std::vector<std::pair<uint32_t, uint32_t>> ranges);
// One character of any kind in any spelling JSON allows (a surrogate pair counts as one character).
ExprId JsonAnyChar(Grammar* g);
// The canonical JSON text of a string value, with its quotes.
std::string JsonQuote(std::string_view utf8);

}  // namespace deepinfer::grammar
