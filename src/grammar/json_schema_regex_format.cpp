// The `regex` format: ECMA-262 pattern syntax without the u flag, Annex B (what browsers accept), as
// grammar rules over a JSON string's canonical content. Groups nest, so the pattern is a rule that calls
// itself (as JSON values do); the matcher's stack bounds its depth as it bounds JSON nesting.
//
// Checks that a context-free grammar cannot make exact, or only with an automaton too large to compile
// per schema, are bounded, each on the side of refusing a valid pattern rather than accepting an invalid
// one, except where noted:
//  - {n,m} must have n <= m: exact when n has fewer significant digits than m (up to 9 of them) or both
//    have the same number of them, at most 2; larger equal-length bounds are refused.
//  - A literal `{` (Annex B) is accepted only where no digit follows it: `{1a` is refused although Annex B
//    reads it as three characters, because `{1}` there is an error and telling them apart needs the text
//    to the closing brace.
//  - Class ranges must be in order: exact when the left end is ASCII, spelled as a character or an escape
//    with a value (\xHH, \uHHHH, \t, \cX, \0, an identity escape); other left-end escapes (octal \1..\7)
//    are refused in a range. A non-ASCII left end is compared by its 4096-code-unit block only: the right
//    end must not lie in an earlier block (accepting a reversed range within one block).
//  - Inside a class, \x and \u take all their hex digits (`[\x]`, an identity escape in Annex B, is
//    refused). Modifier groups such as (?i:...), newer than the u-less syntax, are refused.
//  - Group names are ASCII identifiers; a name's duplicates and a \k<name> without its group are not
//    detected (a grammar cannot compare names).
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "grammar/json_schema_internal.h"
#include "grammar/json_text.h"

namespace deepinfer::grammar::json_schema_internal {

namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

class RegexSyntaxBuilder {
 public:
  explicit RegexSyntaxBuilder(Grammar* g) : g_(g) {}

  ExprId Build() {
    const uint32_t rule = g_->AddRule("regex_disjunction");
    g_->Define(rule, Disjunction(g_->Ref(rule)));
    return g_->Ref(rule);
  }

 private:
  ExprId Lit(std::string_view s) { return g_->Literal(s); }
  // One source character of the pattern, spelled as canonical JSON string content.
  ExprId Chars(Ranges r) { return JsonCanonicalChars(g_, std::move(r)); }
  ExprId Char(uint32_t c) { return Chars({{c, c}}); }
  ExprId Backslash() { return Lit("\\\\"); }  // one `\` of the pattern, escaped in JSON
  ExprId Escaped(ExprId after) { return g_->Seq({Backslash(), after}); }
  ExprId Digit() { return Chars({{'0', '9'}}); }
  ExprId Hex() { return Chars({{'0', '9'}, {'A', 'F'}, {'a', 'f'}}); }

  // All code points but the listed ASCII ones.
  Ranges AllBut(std::string_view excluded) {
    Ranges r;
    uint32_t from = 0;
    for (uint32_t c = 0; c < 0x80; ++c) {
      if (excluded.find(static_cast<char>(c)) == std::string_view::npos) continue;
      if (c > from) r.push_back({from, c - 1});
      from = c + 1;
    }
    r.push_back({from, 0x10FFFF});
    return r;
  }

  ExprId Disjunction(ExprId group_body) {
    ExprId alternative = Alternative(group_body);
    return g_->Seq({alternative, g_->Star(g_->Seq({Lit("|"), alternative}))});
  }

  // Terms in sequence: runs of terms without groups, each group between two. A run is a rule that calls
  // none (kept apart, so its mask entries are computed once, not walked at every mask).
  ExprId Alternative(ExprId group_body) {
    if (run_rule_ == kNone) {
      run_rule_ = g_->AddRule("regex_terms");
      g_->Define(run_rule_, TermsWithoutGroups());
      g_->Keep(run_rule_);
    }
    ExprId run = g_->Ref(run_rule_);
    ExprId group = g_->Alt({g_->Seq({Lit("("), group_body, Lit(")")}), g_->Seq({Lit("(?:"), group_body, Lit(")")}),
                            g_->Seq({Lit("(?<"), GroupName(), Lit(">"), group_body, Lit(")")})});
    ExprId lookahead = g_->Seq({g_->Alt({Lit("(?="), Lit("(?!")}), group_body, Lit(")")});
    ExprId lookbehind = g_->Seq({g_->Alt({Lit("(?<="), Lit("(?<!")}), group_body, Lit(")")});
    // Annex B: a lookahead may be quantified, a lookbehind may not.
    ExprId group_term = g_->Alt({g_->Seq({g_->Alt({group, lookahead}), g_->Optional(Quantifier())}), lookbehind});
    return g_->Seq({run, g_->Star(g_->Seq({group_term, run}))});
  }

  // A literal `{` must not be followed by a digit (see the header comment); one before a group is.
  ExprId TermsWithoutGroups() {
    ExprId quantifier = Quantifier();
    ExprId brace = Lit("{");
    ExprId term = Term(quantifier, true);
    ExprId term_no_digit = Term(quantifier, false);
    ExprId brace_run = g_->Seq({g_->Plus(brace), term_no_digit});
    return g_->Seq({g_->Star(g_->Alt({term, brace_run})), g_->Star(brace)});
  }

  ExprId Term(ExprId quantifier, bool may_start_with_digit) {
    ExprId pattern_char = Chars(AllBut(may_start_with_digit ? "^$\\.*+?()[|{" : "^$\\.*+?()[|{0123456789"));
    // Annex B: after `\` any character is an escape (\c without a control letter is a literal `\`).
    ExprId escape = Escaped(Chars(AllBut("bB")));
    ExprId atom = g_->Alt({Lit("."), pattern_char, escape, CharacterClass()});
    ExprId assertion = g_->Alt({Lit("^"), Lit("$"), Escaped(Chars({{'b', 'b'}, {'B', 'B'}}))});
    return g_->Alt({assertion, g_->Seq({atom, g_->Optional(quantifier)}), g_->Seq({Lit("{"), quantifier})});
  }

  ExprId GroupName() {
    return g_->Seq({Chars({{'$', '$'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}),
                    g_->Star(Chars({{'$', '$'}, {'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}))});
  }

  ExprId Quantifier() {
    if (quantifier_ != kNone) return quantifier_;
    ExprId digits = g_->Plus(Digit());
    ExprId prefix = g_->Alt({Lit("*"), Lit("+"), Lit("?"), g_->Seq({Lit("{"), digits, Lit("}")}),
                             g_->Seq({Lit("{"), digits, Lit(",}")}), g_->Seq({Lit("{"), OrderedBounds(), Lit("}")})});
    quantifier_ = g_->Seq({prefix, g_->Optional(Lit("?"))});
    return quantifier_;
  }

  // `n,m` with n <= m (leading zeros allowed on both).
  ExprId OrderedBounds() {
    ExprId zeros = g_->Star(Char('0'));
    ExprId nonzero = Chars({{'1', '9'}});
    std::vector<ExprId> alts;
    alts.push_back(g_->Seq({g_->Plus(Char('0')), Lit(","), g_->Plus(Digit())}));  // n = 0
    // Fewer significant digits in n than in m.
    for (uint32_t k = 1; k <= 9; ++k)
      alts.push_back(g_->Seq({zeros, nonzero, g_->Repeat(Digit(), k - 1, k - 1), Lit(","), zeros, nonzero,
                              g_->Repeat(Digit(), k, kUnbounded)}));
    // As many: m at least n, digit by digit.
    for (uint32_t n = 1; n <= 99; ++n) {
      const std::string s = std::to_string(n);
      alts.push_back(g_->Seq({zeros, Lit(s), Lit(","), zeros, DigitsAtLeast(s)}));
    }
    return g_->Alt(std::move(alts));
  }

  // Decimal digit strings as long as `s` (no leading zero) and at least its value.
  ExprId DigitsAtLeast(const std::string& s) {
    if (s.empty()) return g_->Empty();
    const char first = s[0];
    std::vector<ExprId> alts;
    if (first < '9')
      alts.push_back(g_->Seq({Chars({{static_cast<uint32_t>(first + 1), '9'}}),
                              g_->Repeat(Digit(), static_cast<uint32_t>(s.size() - 1), static_cast<uint32_t>(s.size() - 1))}));
    alts.push_back(g_->Seq({Char(static_cast<uint32_t>(first)), DigitsAtLeast(s.substr(1))}));
    return g_->Alt(std::move(alts));
  }

  // A hex digit equal to `d` in either case.
  ExprId HexDigitIs(uint32_t d) {
    const uint32_t lower = d < 10 ? '0' + d : 'a' + d - 10;
    return d < 10 ? Char(lower) : Chars({{lower, lower}, {lower - 32, lower - 32}});
  }
  // Hex digits greater than `d`.
  ExprId HexDigitAbove(uint32_t d) {
    Ranges r;
    for (uint32_t e = d + 1; e < 16; ++e) {
      const uint32_t lower = e < 10 ? '0' + e : 'a' + e - 10;
      r.push_back({lower, lower});
      if (e >= 10) r.push_back({lower - 32, lower - 32});
    }
    return Chars(std::move(r));
  }
  // `n` hex digits spelling exactly v.
  ExprId HexIs(uint32_t v, uint32_t n) {
    std::vector<ExprId> seq;
    for (uint32_t i = n; i-- > 0;) seq.push_back(HexDigitIs((v >> (4 * i)) & 15));
    return g_->Seq(std::move(seq));
  }
  // `n` hex digits whose value is at least v (v < 16^n).
  ExprId HexAtLeast(uint32_t v, uint32_t n) {
    std::vector<ExprId> alts;
    std::vector<ExprId> prefix;
    for (uint32_t i = n; i-- > 0;) {
      const uint32_t d = (v >> (4 * i)) & 15;
      if (d < 15) {
        std::vector<ExprId> seq = prefix;
        seq.push_back(HexDigitAbove(d));
        seq.push_back(g_->Repeat(Hex(), i, i));
        alts.push_back(g_->Seq(std::move(seq)));
      }
      prefix.push_back(HexDigitIs(d));
    }
    alts.push_back(g_->Seq(std::move(prefix)));
    return g_->Alt(std::move(alts));
  }

  // The escapes of a class atom that stand for one ASCII code unit, by the letter after `\`:
  // control escapes, \b (backspace inside a class).
  static int ControlEscapeValue(char c) {
    switch (c) {
      case 't': return 9;
      case 'n': return 10;
      case 'v': return 11;
      case 'f': return 12;
      case 'r': return 13;
      case 'b': return 8;
      default: return -1;
    }
  }
  // Characters that after `\` in a class stand for themselves whatever follows: not digits (octal), not
  // letters with other meanings (class escapes, control escapes, \c, \x, \u, \k).
  static bool IdentityEscapeAnywhere(uint32_t c) {
    if (c >= 0x80) return true;
    if (c >= '0' && c <= '7') return false;
    return std::string_view("bcdDsSwWfnrtvxuk").find(static_cast<char>(c)) == std::string_view::npos;
  }

  // Spellings of a class atom with the ASCII value v, as a range's left end (a `-` follows it).
  ExprId LeftEnd(uint32_t v) {
    std::vector<ExprId> alts;
    if (v != '\\' && v != ']' && v != '-') alts.push_back(Char(v));
    alts.push_back(Escaped(g_->Seq({Lit("x"), HexIs(v, 2)})));
    alts.push_back(Escaped(g_->Seq({Lit("u"), HexIs(v, 4)})));
    for (char c : std::string_view("tnvfrb"))
      if (ControlEscapeValue(c) == static_cast<int>(v)) alts.push_back(Escaped(Char(static_cast<uint32_t>(c))));
    if (v == 0) alts.push_back(Escaped(Lit("0")));
    if (v >= 1 && v <= 26) alts.push_back(Escaped(g_->Seq({Lit("c"), Chars({{'A' + v - 1, 'A' + v - 1}, {'a' + v - 1, 'a' + v - 1}})})));
    if (v >= 16 && v <= 25) alts.push_back(Escaped(g_->Seq({Lit("c"), Char('0' + v - 16)})));
    if (v == 31) alts.push_back(Escaped(Lit("c_")));
    if (IdentityEscapeAnywhere(v) || v == 'x' || v == 'u') alts.push_back(Escaped(Char(v)));
    return g_->Alt(std::move(alts));
  }

  // A class atom with a value of at least v, as a range's right end.
  ExprId RightEndAtLeast(uint32_t v) {
    if (auto it = at_least_.find(v); it != at_least_.end()) return it->second;
    std::vector<ExprId> alts;
    // A literal character; an astral one is two code units in a u-less pattern, the first (its high
    // surrogate) ending the range.
    Ranges lit;
    for (const auto& [lo, hi] : Ranges{{0, '\\' - 1}, {']' + 1, 0xFFFF}}) {
      if (hi >= v) lit.push_back({std::max(lo, v), hi});
    }
    if (v <= 0xD800) {
      lit.push_back({0x10000, 0x10FFFF});
    } else if (v <= 0xDBFF) {
      lit.push_back({0x10000 + ((v - 0xD800) << 10), 0x10FFFF});
    }
    if (!lit.empty()) alts.push_back(Chars(std::move(lit)));
    if (v <= 0xFF) alts.push_back(Escaped(g_->Seq({Lit("x"), HexAtLeast(v, 2)})));
    alts.push_back(Escaped(g_->Seq({Lit("u"), HexAtLeast(v, 4)})));
    Ranges identity;
    for (uint32_t c = 0; c < 0x80; ++c)
      if (c >= v && IdentityEscapeAnywhere(c)) identity.push_back({c, c});
    if (v <= 0x80) identity.push_back({0x80, 0x10FFFF});
    else identity.push_back({v, 0x10FFFF});
    alts.push_back(Escaped(Chars(std::move(identity))));
    for (char c : std::string_view("tnvfrb"))
      if (ControlEscapeValue(c) >= static_cast<int>(v)) alts.push_back(Escaped(Char(static_cast<uint32_t>(c))));
    for (uint32_t w = std::max<uint32_t>(v, 1); w <= 26; ++w)
      alts.push_back(Escaped(g_->Seq({Lit("c"), Chars({{'A' + w - 1, 'A' + w - 1}, {'a' + w - 1, 'a' + w - 1}})})));
    for (uint32_t w = std::max<uint32_t>(v, 16); w <= 25; ++w) alts.push_back(Escaped(g_->Seq({Lit("c"), Char('0' + w - 16)})));
    if (v <= 31) alts.push_back(Escaped(Lit("c_")));
    ExprId e = g_->Alt(std::move(alts));
    at_least_[v] = e;
    return e;
  }

  // Ranges between two atoms with values, in order (the header comment says how far that is checked).
  ExprId OrderedRange() {
    std::vector<ExprId> alts;
    ExprId dash = Lit("-");
    for (uint32_t v = 0; v < 0x80; ++v) alts.push_back(g_->Seq({LeftEnd(v), dash, RightEndAtLeast(v)}));
    // A non-ASCII left end, by its block of 4096 code units: the right end must not lie in an earlier
    // block (a reversed range within one block is accepted: an exact check takes an automaton state per
    // left end).
    const ExprId hex_from_8 = Chars({{'8', '9'}, {'A', 'F'}, {'a', 'f'}});
    for (uint32_t block = 0; block < 16; ++block) {
      const uint32_t lo = std::max<uint32_t>(block << 12, 0x80), hi = (block << 12) | 0xFFF;
      std::vector<ExprId> left;
      left.push_back(Chars({{lo, hi}}));
      if (block == 0) {
        left.push_back(Escaped(g_->Seq({Lit("x"), hex_from_8, Hex()})));
        left.push_back(Escaped(g_->Seq({Lit("u0"), g_->Alt({g_->Seq({Lit("0"), hex_from_8}),
                                                            g_->Seq({Chars({{'1', '9'}, {'A', 'F'}, {'a', 'f'}}), Hex()})}),
                                        Hex()})));
      } else {
        left.push_back(Escaped(g_->Seq({Lit("u"), HexDigitIs(block), Hex(), Hex(), Hex()})));
      }
      alts.push_back(g_->Seq({g_->Alt(std::move(left)), dash, RightEndAtLeast(lo)}));
    }
    // A literal astral character ends a u-less range with its second code unit, a low surrogate.
    alts.push_back(g_->Seq({Chars({{0x10000, 0x10FFFF}}), dash, RightEndAtLeast(0xDC00)}));
    return g_->Alt(std::move(alts));
  }

  // `[` `^`? atoms and ranges `]`. An atom followed by `-` and another atom is a range (not three atoms),
  // so after a lone atom a `-` may only come last.
  ExprId CharacterClass() {
    if (class_ != kNone) return class_;
    ExprId dash = Lit("-");
    // \x and \u only with all their hex digits: an escape that stops short is read as a letter and the
    // digits as atoms, which would let `[\u9fa5-\u4e00]` parse as `5-\u4e00`.
    ExprId single = g_->Alt({Chars(AllBut("\\]-")), Escaped(Chars(AllBut("xu"))), Escaped(g_->Seq({Lit("x"), Hex(), Hex()})),
                             Escaped(g_->Seq({Lit("u"), Hex(), Hex(), Hex(), Hex()}))});
    ExprId class_escape = Escaped(Chars({{'D', 'D'}, {'S', 'S'}, {'W', 'W'}, {'d', 'd'}, {'s', 's'}, {'w', 'w'}}));
    ExprId any_atom = g_->Alt({single, dash});
    // Annex B: a range with \d, \s, \w (or their negations) at either end is read as its atoms and `-`.
    ExprId range_from_atom = g_->Alt({OrderedRange(), g_->Seq({class_escape, dash, any_atom}), g_->Seq({single, dash, class_escape})});
    ExprId range_from_dash = g_->Seq({dash, dash, g_->Alt({RightEndAtLeast('-'), class_escape})});
    ExprId ranges = g_->Star(g_->Alt({range_from_atom, range_from_dash}));
    ExprId singles_then_range = g_->Seq({any_atom, g_->Star(single), range_from_atom});
    ExprId tail = g_->Optional(g_->Seq({any_atom, g_->Star(single), g_->Optional(dash)}));
    ExprId contents = g_->Seq({ranges, g_->Star(g_->Seq({singles_then_range, ranges})), tail});
    class_ = g_->Seq({Lit("["), g_->Optional(Lit("^")), contents, Lit("]")});
    return class_;
  }

  static constexpr ExprId kNone = 0xFFFFFFFFu;
  Grammar* g_;
  ExprId quantifier_ = kNone;
  ExprId class_ = kNone;
  uint32_t run_rule_ = kNone;
  std::map<uint32_t, ExprId> at_least_;
};

}  // namespace

ExprId RegexFormatSyntax(Grammar* g) { return RegexSyntaxBuilder(g).Build(); }

bool RegexFormatEnforced(const Json& s) {
  for (const char* k : {"pattern", "$patterns", "$any_patterns", "$not_patterns", "$not_in", "maxLength"})
    if (s.contains(k)) return false;
  auto it = s.find("minLength");
  return it == s.end() || !it->is_number() || it->get<double>() <= 0;
}

}  // namespace deepinfer::grammar::json_schema_internal
