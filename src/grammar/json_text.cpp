#include "grammar/json_text.h"

#include <algorithm>

namespace deepinfer::grammar {

namespace {

std::string EscapeFor(uint32_t c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default: {
      static const char* kHex = "0123456789abcdef";
      std::string s = "\\u00";
      s.push_back(kHex[(c >> 4) & 15]);
      s.push_back(kHex[c & 15]);
      return s;
    }
  }
}

bool NeedsEscape(uint32_t c) { return c < 0x20 || c == '"' || c == '\\'; }

}  // namespace

ExprId JsonCanonicalChars(Grammar* g, std::vector<std::pair<uint32_t, uint32_t>> ranges) {
  NormalizeRanges(&ranges);
  std::vector<std::pair<uint32_t, uint32_t>> plain;
  std::vector<ExprId> alts;
  for (auto [lo, hi] : ranges) {
    uint32_t c = lo;
    while (c <= hi) {
      if (NeedsEscape(c)) {
        alts.push_back(g->Literal(EscapeFor(c)));
        if (c == hi) break;
        ++c;
        continue;
      }
      // The longest run from c without an escaped character.
      uint32_t end = hi;
      if (c < 0x20) end = std::min(end, 0x1Fu);
      else if (c <= '"') end = std::min(end, static_cast<uint32_t>('"') - 1);
      else if (c <= '\\') end = std::min(end, static_cast<uint32_t>('\\') - 1);
      plain.push_back({c, end});
      if (end == hi) break;
      c = end + 1;
    }
  }
  if (!plain.empty()) alts.push_back(g->Chars(std::move(plain)));
  return g->Alt(std::move(alts));
}

ExprId JsonAnyChar(Grammar* g) {
  std::vector<std::pair<uint32_t, uint32_t>> plain = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}};
  ExprId raw = g->Chars(plain);
  ExprId shorts = g->Seq({g->Literal("\\"), g->Chars({{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'}, {'f', 'f'},
                                                     {'n', 'n'}, {'r', 'r'}, {'t', 't'}})});
  ExprId hex = g->Chars({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
  ExprId hex_no_d = g->Chars({{'0', '9'}, {'a', 'c'}, {'A', 'C'}, {'e', 'f'}, {'E', 'F'}});
  ExprId d = g->Chars({{'d', 'd'}, {'D', 'D'}});
  ExprId u = g->Literal("\\u");
  // \uXXXX outside the surrogates, or a high surrogate escape followed by a low one.
  ExprId bmp = g->Seq({u, g->Alt({g->Seq({hex_no_d, hex, hex, hex}),
                                  g->Seq({d, g->Chars({{'0', '7'}}), hex, hex})})});
  ExprId high = g->Seq({u, d, g->Chars({{'8', '9'}, {'a', 'b'}, {'A', 'B'}}), hex, hex});
  ExprId low = g->Seq({u, d, g->Chars({{'c', 'f'}, {'C', 'F'}}), hex, hex});
  return g->Alt({raw, shorts, bmp, g->Seq({high, low})});
}

std::string JsonQuote(std::string_view utf8) {
  std::string out = "\"";
  for (unsigned char c : utf8) {
    if (NeedsEscape(c))
      out += EscapeFor(c);
    else
      out.push_back(static_cast<char>(c));
  }
  out.push_back('"');
  return out;
}

}  // namespace deepinfer::grammar
