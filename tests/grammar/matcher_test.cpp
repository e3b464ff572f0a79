// Matcher properties on small vocabularies: the mask allows exactly the tokens whose bytes keep the text a
// valid prefix (checked by brute force against CompiledGrammar::Matches over all completions), rollback
// restores, termination and stop tokens.
#include <gtest/gtest.h>

#include <random>

#include "grammar/compiler.h"
#include "grammar/matcher.h"
#include "mask_walk.h"
#include "grammar/regex.h"
#include "support/sanitizer_scale.h"

namespace deepinfer::grammar {
namespace {

std::shared_ptr<const CompiledGrammar> CompileRegexOrDie(const std::string& pattern) {
  Grammar g;
  uint32_t r = g.AddRule("root");
  auto e = CompileRegex(pattern, {}, &g);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  g.Define(r, *e);
  auto c = Compile(g);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::make_shared<CompiledGrammar>(std::move(*c));
}

// For each pattern, along a seeded walk of `steps` tokens, every mask equals the tokens whose bytes keep the
// text a valid prefix (some completion of up to `extra` bytes from `alphabet` matches).
void ExpectRegexMasksAreValidPrefixes(const std::vector<std::string>& vocab, size_t mask_width,
                                      const std::string& alphabet, int extra, const std::vector<const char*>& patterns,
                                      uint32_t seed, int steps) {
  auto index = TokenIndex::FromTokens(vocab, {}, {}, mask_width);
  ASSERT_TRUE(index.ok());
  for (const char* pattern : patterns) {
    auto cg = CompileRegexOrDie(pattern);
    GrammarMatcher m(std::make_shared<BoundGrammar>(cg, *index));
    test_support::ExpectMaskIsValidPrefixesAlongWalk(
        m, vocab, (*index)->words(), seed, steps,
        [&](const std::string& prefix) { return test_support::ValidPrefixByCompletion(*cg, prefix, alphabet, extra); },
        pattern);
  }
}

TEST(Matcher, MaskEqualsBruteForceOnRegexes) {
  const std::vector<std::string> vocab = {"a", "b", "c", "ab", "ba", "abc", "cc", "aaa", "-", "1", "12", "a-", "-1", "x"};
  const std::string alphabet = "abc-1x2";
  // The brute force (every completion of up to four bytes, for each token) is most of the time: under the
  // sanitizers, several times slower, each walk stops after four tokens; the Release pass walks twelve.
  const int steps = ::deepinfer::test_support::RoundsForThisBuild(12, 4);
  ExpectRegexMasksAreValidPrefixes(vocab, 16, alphabet, 4,
                                   {"a+b*c?", "(ab|ba)*", "[abc]{2,4}", "a-?1+2?", "(a|b)(c|-1)", "x|ab(c|cc)*"}, 7,
                                   steps);
}

// A character-class loop takes the subtrees whose token tails are code points that all come back to the
// loop's state in bulk: tails holding a code point that leaves the loop (',' ':' '&', a space, a line
// separator, a quote) or that is cut off must still be decided one by one.
TEST(Matcher, SelfLoopSubtreesMatchBruteForce) {
  const std::vector<std::string> vocab = {
      "a", "abcdef", "abcdefgh", "abcd", "abcd\u00e9", "abcd\u20acx", "abcd ", "abcd :x", "abcd,x", "abcd&",
      "abcd\u00a0x", "a\u00e9\u20ac\U0001D11Ebc", "a\u2028bcd", "a\"bcd", "a\\bcd", "abc\xE2", "xyz:", "xyz:abc \u00e9z",
      "xyz:ab,c", "xyz:abc:", " ", "  ab", ":", "\u00e9", "\u00e9\u00e9\u00e9\u00e9", "\u00e9\u20ac\u00e9\u20ac", ","};
  const std::string alphabet = " a:\x82\xAC";  // the last two complete "abc\xE2" as "abc€"
  ExpectRegexMasksAreValidPrefixes(
      vocab, 32, alphabet, 3,
      {"[^,:&\\s]+(\\s*:[^,:&]*)?", "[^&]*", "(\\s*[^,:&\\s]+\\s*:[^,:&]*)(,[^,:&\\s]+:[^,:&]*)*"}, 11, 8);
}

TEST(Matcher, RollbackRestoresAndStopTokenEnds) {
  const std::vector<std::string> vocab = {"a", "b", "<eos>"};
  auto index = TokenIndex::FromTokens(vocab, {2}, {2}, 3);
  ASSERT_TRUE(index.ok());
  auto bound = std::make_shared<BoundGrammar>(CompileRegexOrDie("ab"), *index);
  GrammarMatcher m(bound);
  EXPECT_FALSE(m.AcceptToken(1));
  EXPECT_FALSE(m.AcceptToken(2));  // "" is not in the language
  EXPECT_TRUE(m.AcceptToken(0));
  EXPECT_FALSE(m.CanTerminate());
  EXPECT_TRUE(m.AcceptToken(1));
  EXPECT_TRUE(m.CanTerminate());
  m.Rollback(1);
  EXPECT_FALSE(m.CanTerminate());
  EXPECT_TRUE(m.AcceptToken(1));
  EXPECT_TRUE(m.AcceptToken(2));
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_EQ(m.ForcedBytes(), "");
  m.Reset();
  EXPECT_EQ(m.ForcedBytes(), "ab");
}

}  // namespace
}  // namespace deepinfer::grammar
