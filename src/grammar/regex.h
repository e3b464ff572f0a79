// The regex front end: the ECMAScript (ECMA-262) syntax used by JSON Schema `pattern`, `patternProperties`
// and the `regex` request field, lowered to grammar expressions over code points.
//
// Supported: alternation, groups (capturing, non-capturing, named), the quantifiers * + ? {n} {n,} {n,m}
// and their lazy forms (same language), classes with ranges and negation, . (any code point but line
// terminators), \d \D \w \W \s \S, character escapes (\n \t \r \f \v \0 \xHH \uHHHH \u{H..} \cX and
// escaped punctuation), ^ at the start of top-level alternatives, and $ anywhere (inside a group it ends
// the string there: what follows must match the empty string). Refused with an error naming the
// construct: look-ahead, look-behind, backreferences, word boundaries, Unicode property escapes, and ^
// elsewhere. Patterns are bounded in length and nesting.
#pragma once

#include <string_view>

#include "core/status.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

struct RegexOptions {
  // Full match (the `regex` request field). Otherwise JSON Schema semantics: the pattern may match
  // anywhere in the string unless anchored with ^ and $.
  bool full_match = true;
  // Match the JSON-encoded form of the string's characters (inside a JSON string literal, without the
  // quotes), each character in its canonical spelling (see json_text.h).
  bool json_string = false;
  size_t max_length = 16384;
  uint32_t max_depth = 100;
};

Result<ExprId> CompileRegex(std::string_view pattern, const RegexOptions& options, Grammar* g);

}  // namespace deepinfer::grammar
