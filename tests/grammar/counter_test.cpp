// Counted strings whose counts have gaps: a format with bounded pieces (an email's domain labels hold at
// most 63 characters, so a full label can only end or go on with ".x", never with one more unit) under
// maxLength runs with a counter, since without a lower bound only the fewest units still needed matter.
// References: the same format without a length bound (no counter at all), with the length checked by
// hand, and the token-level mask brute-forced against it on a small vocabulary.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "grammar/compiler.h"
#include "grammar/constraint.h"
#include "grammar/matcher.h"
#include "mask_walk.h"

namespace deepinfer::grammar {
namespace {

CompiledGrammar Schema(const std::string& text) {
  ConstraintSpec spec;
  spec.text = text;
  auto g = BuildGrammar(spec);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  auto c = Compile(*g);
  EXPECT_TRUE(c.ok()) << text << ": " << c.status().ToString();
  return std::move(*c);
}

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

// The reference language: an email (the unbounded format) of minimum..maximum characters (the test
// strings are ASCII, one byte per character).
struct Reference {
  const CompiledGrammar& unbounded;
  size_t min, max;
  bool Accepts(const std::string& content) const {
    return unbounded.Matches(Quote(content)) && content.size() >= min && content.size() <= max;
  }
};

TEST(CountedGaps, EmailUnderMaxLengthRunsWithACounter) {
  const CompiledGrammar unbounded = Schema(R"({"type":"string","format":"email"})");
  const CompiledGrammar bounded = Schema(R"({"type":"string","format":"email","maxLength":1024})");
  // A counter adds no states: the bounded automaton is the unbounded one plus a count in the frame (the
  // unrolled form was about 250,000 states).
  EXPECT_EQ(bounded.num_states(), unbounded.num_states());
  const std::string label63(63, 'b');
  EXPECT_TRUE(bounded.Matches(Quote("a@" + label63)));              // a full label ends the address
  EXPECT_TRUE(bounded.Matches(Quote("a@" + label63 + ".c")));       // or goes on with a new label
  EXPECT_FALSE(bounded.Matches(Quote("a@" + label63 + "b")));       // a 64-character label
  std::string long_ok = "a@";  // labels "b." up to 1022 characters, then "cc": 1024 in all
  while (long_ok.size() + 3 <= 1024) long_ok += "b.";
  while (long_ok.size() < 1024) long_ok += "c";
  ASSERT_EQ(long_ok.size(), 1024u);
  EXPECT_TRUE(unbounded.Matches(Quote(long_ok)));
  EXPECT_TRUE(bounded.Matches(Quote(long_ok)));
  EXPECT_FALSE(bounded.Matches(Quote(long_ok + "c")));  // 1025 characters
}

TEST(CountedGaps, AgreesWithTheLengthCheckedFormat) {
  const CompiledGrammar unbounded = Schema(R"({"type":"string","format":"email"})");
  // An upper bound alone (the counter), a lower bound alone (the counter) and both (where gaps would
  // matter, so the unrolled form) must each give the reference's language.
  struct Bounds {
    const char* schema;
    size_t min, max;
  };
  for (const Bounds& b : std::vector<Bounds>{
           {R"({"type":"string","format":"email","maxLength":7})", 0, 7},
           {R"({"type":"string","format":"email","minLength":5,"maxLength":7})", 5, 7},
           {R"({"type":"string","format":"email","minLength":6})", 6, 1000},
       }) {
    const CompiledGrammar g = Schema(b.schema);
    const Reference ref{unbounded, b.min, b.max};
    std::mt19937 rng(11);
    const std::string alphabet = "ab.@-";
    size_t yes = 0;
    for (int i = 0; i < 4000; ++i) {
      std::string s;
      const size_t n = rng() % 10;
      for (size_t k = 0; k < n; ++k) s += alphabet[rng() % alphabet.size()];
      if (i % 4 == 0) s = std::string(1 + rng() % 3, 'a') + "@" + std::string(1 + rng() % 5, 'b');
      const bool want = ref.Accepts(s);
      yes += want;
      EXPECT_EQ(g.Matches(Quote(s)), want) << b.schema << " on '" << s << "'";
    }
    EXPECT_GT(yes, 100u) << b.schema;  // the comparison is not vacuous
  }
}

// A prefix is valid when some completion of up to `extra` characters over the alphabet is accepted.
bool ValidPrefix(const Reference& ref, const std::string& text, const std::string& alphabet, int extra) {
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"' && ref.Accepts(text.substr(1, text.size() - 2)))
    return true;
  if (extra == 0) return false;
  for (char c : alphabet)
    if (ValidPrefix(ref, text + c, alphabet, extra - 1)) return true;
  return false;
}

TEST(CountedGaps, MaskEqualsBruteForce) {
  const CompiledGrammar unbounded = Schema(R"({"type":"string","format":"email"})");
  auto bounded = std::make_shared<const CompiledGrammar>(Schema(R"({"type":"string","format":"email","maxLength":6})"));
  const Reference ref{unbounded, 0, 6};
  const std::vector<std::string> vocab = {"\"", "a", "b", "@", ".", "-", "ab", "a@", "@b", "b.", ".b", "b\"",
                                          "\"a", "bb", "abab"};
  const std::string alphabet = "ab@.-\"";
  auto index = TokenIndex::FromTokens(vocab, {}, {}, 16);
  ASSERT_TRUE(index.ok());
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    GrammarMatcher m(std::make_shared<BoundGrammar>(bounded, *index));
    test_support::ExpectMaskIsValidPrefixesAlongWalk(
        m, vocab, (*index)->words(), seed, 10,
        [&](const std::string& prefix) { return ValidPrefix(ref, prefix, alphabet, 4); });
  }
}

}  // namespace
}  // namespace deepinfer::grammar

namespace deepinfer::grammar {
namespace {

// Mask entries take plain tokens in bulk (by code-point category and length, see TokenIndex::text_mask)
// where a state accepts some categories whole (a pattern's "." takes no U+2028; "[\w\s-]" no
// punctuation but "-") and, in counted strings, where every plain code point is one unit; the mask
// must still equal what the matcher accepts token by token.
TEST(TextShortcuts, MaskEqualsAcceptOnEveryStep) {
  const std::vector<std::string> vocab = {
      "\"", "a", "ab", "abc", "abcd", "a1", "Z9", " ", " a", "a b", "-", "a-", ".", ".md", "md", "m", "d",
      "/", "a/", "/b", "\xE2\x80\xA8", "a\xE2\x80\xA8", "\xC3\xA9", "\xE6\x97\xA5\xE6\x9C\xAC", "\xF0\x9F\x98\x80",
      "\\n", "\\", "\"}", "a\"", "\n", "\t", "x", "xyzw1", "\xC3", "  ", "abcdefgh",
      std::string(40, 'a')};  // longer than TokenIndex::kPlainCap code points: walked, never taken in bulk
  auto index = TokenIndex::FromTokens(vocab, {}, {}, 64);
  ASSERT_TRUE(index.ok());
  const std::vector<std::string> schemas = {
      R"({"type":"string","pattern":"^.*\\.md$"})",
      R"({"type":"string","pattern":"^[\\w\\s-]+$"})",
      R"({"type":"string","pattern":"^[^/]+/[^/]+$"})",
      R"({"type":"string","minLength":2,"maxLength":5})",
      R"({"type":"string","maxLength":3})",
      R"({"type":"string","minLength":4})",
      R"({"type":"object","additionalProperties":{"type":"string","maxLength":6}})",
      R"({"type":"string","pattern":"^(.*)$","minLength":1})",  // counted, "." loops on all but U+2028/9
      R"({"type":"string","pattern":"^.*$","minLength":2,"maxLength":6})",
  };
  for (const std::string& schema : schemas) {
    auto g = std::make_shared<const CompiledGrammar>(Schema(schema));
    for (uint32_t seed = 1; seed <= 8; ++seed) {
      GrammarMatcher m(std::make_shared<BoundGrammar>(g, *index));
      std::mt19937 rng(seed);
      for (int step = 0; step < 12; ++step) {
        std::vector<uint32_t> bits((*index)->words());
        ASSERT_TRUE(m.FillNextTokenBitmask(bits.data()).ok());
        std::vector<int32_t> allowed;
        for (size_t id = 0; id < vocab.size(); ++id) {
          const bool got = (bits[id / 32] >> (id % 32)) & 1;
          const bool accepted = m.AcceptToken(static_cast<int32_t>(id));
          if (accepted) m.Rollback(1);
          EXPECT_EQ(got, accepted) << schema << " step " << step << " token '" << vocab[id] << "'";
          if (accepted) allowed.push_back(static_cast<int32_t>(id));
        }
        if (allowed.empty()) break;
        ASSERT_TRUE(m.AcceptToken(allowed[rng() % allowed.size()]));
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::grammar

namespace deepinfer::grammar {
namespace {

// Counts with gaps where both bounds bite: from the start, ^x?(ab|c[abc]{5,})$ reads 2, 3 or at least 6
// more characters, so the start alone has no interval; but it is only entered with count 0, where the
// counter decides exactly (2 is below minLength 3 anyway), so the string still runs with a counter
// instead of 40 unrolled copies (CountEntries).
TEST(CountedGaps, GapsTheEntryCountsRuleOutRunWithACounter) {
  const std::string pattern = R"("pattern":"^x?(ab|c[abc]{5,})$")";
  const CompiledGrammar unbounded = Schema("{\"type\":\"string\"," + pattern + "}");
  auto bounded = std::make_shared<const CompiledGrammar>(
      Schema("{\"type\":\"string\"," + pattern + ",\"minLength\":3,\"maxLength\":9}"));
  EXPECT_EQ(bounded->num_states(), unbounded.num_states());
  // The language, spelled out: xab, and c or xc followed by 5 or more of a, b, c, 3 to 9 long.
  std::set<std::string> valid, prefixes;
  std::vector<std::string> tails = {""};
  for (size_t len = 1; len <= 8; ++len) {
    std::vector<std::string> longer;
    for (const auto& t : tails)
      for (char c : std::string("abc")) longer.push_back(t + c);
    for (const auto& t : longer)
      if (len >= 5) {
        if (1 + len <= 9) valid.insert("c" + t);
        if (2 + len <= 9) valid.insert("xc" + t);
      }
    tails = std::move(longer);
  }
  valid.insert("xab");
  for (const auto& v : valid) {
    const std::string text = Quote(v);
    for (size_t k = 0; k <= text.size(); ++k) prefixes.insert(text.substr(0, k));
  }
  for (const auto& v : std::vector<std::string>{"ab", "xab", "cabcab", "cabca", "xcaaaaaaa", "caaaaaaaaa", "xcaaaaa"})
    EXPECT_EQ(bounded->Matches(Quote(v)), valid.count(v) > 0) << v;
  const std::vector<std::string> vocab = {"\"", "a", "b", "c", "x", "ab", "xab", "cab", "bc", "ccc", "c\"", "b\"",
                                          "abc\"", "xc", "aaaa"};
  auto index = TokenIndex::FromTokens(vocab, {}, {}, 16);
  ASSERT_TRUE(index.ok());
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    GrammarMatcher m(std::make_shared<BoundGrammar>(bounded, *index));
    test_support::ExpectMaskIsValidPrefixesAlongWalk(
        m, vocab, (*index)->words(), seed, 12,
        [&](const std::string& prefix) { return prefixes.count(prefix) > 0; });
  }
}

}  // namespace
}  // namespace deepinfer::grammar

namespace deepinfer::grammar {
namespace {

// A pattern whose last unit can only be followed by the end of the string (^ab$): the state after it
// has no byte of its own, and it used to fall out of the DFA state it shares with the closing quote, so
// that unit went uncounted and "ab" failed minLength 2.
TEST(CountedEnds, APatternsLastUnitCounts) {
  struct Case {
    const char* schema;
    std::vector<std::string> yes, no;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"type":"string","pattern":"^ab$","minLength":2})", {"ab"}, {"a", "abc"}},
           {R"({"type":"string","pattern":"^(ab|cde)$","minLength":2,"maxLength":3})", {"ab", "cde"}, {"a", "cd"}},
           {R"({"type":"string","pattern":"^(ab|cde)$","minLength":3})", {"cde"}, {"ab"}},
           {R"({"type":"string","pattern":"^(ab|cde)$","maxLength":2})", {"ab"}, {"cde"}},
       }) {
    const CompiledGrammar g = Schema(c.schema);
    for (const auto& s : c.yes) EXPECT_TRUE(g.Matches(Quote(s))) << c.schema << " should accept " << s;
    for (const auto& s : c.no) EXPECT_FALSE(g.Matches(Quote(s))) << c.schema << " should reject " << s;
  }
}

}  // namespace
}  // namespace deepinfer::grammar
