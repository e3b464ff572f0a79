// The EBNF front end: llama.cpp's GBNF dialect and the W3C-style EBNF xgrammar accepts (the same core).
//
//   root   ::= "{" ws pair ("," ws pair)* "}"      # a comment
//   pair   ::= [a-z]+ ":" value
//   value  ::= 'yes' | "no" | [^"\\\x00-\x1f]{1,8} | .
//
// Rules `name ::= alternatives`; a definition runs until the next `name ::=`. Strings in double or
// single quotes with escapes \n \r \t \\ \" \' \xHH \uHHHH \UHHHHHHHH; character classes [...] with
// ranges, escapes and ^ negation; . for any character; grouping; the quantifiers * + ? {n} {n,} {n,m}.
// The start rule is `root` when defined, else the first rule. Left recursion is refused by the compiler
// (as llama.cpp does). Input is bounded in size and nesting.
#pragma once

#include <string_view>

#include "core/status.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

struct EbnfOptions {
  size_t max_length = 1u << 20;
  uint32_t max_depth = 100;
  size_t max_rules = 10000;
};

Result<Grammar> ParseEbnf(std::string_view text, const EbnfOptions& options = {});

}  // namespace deepinfer::grammar
