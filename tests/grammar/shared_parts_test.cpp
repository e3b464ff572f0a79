// Regular pieces the compiler builds once per distinct content as a minimal DFA and splices in (integer
// ranges, long repetitions), and alternatives whose shared first or last part is built once (unanchored
// pattern alternatives). The languages must not change: regexes are checked against std::regex (an
// independent ECMAScript engine) on random strings, integer ranges against the bounds by hand, and the
// token mask against brute force.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <regex>

#include "grammar/compiler.h"
#include "grammar/constraint.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "mask_walk.h"
#include "grammar/nfa.h"
#include "grammar/regex.h"

namespace deepinfer::grammar {
namespace {

Result<CompiledGrammar> RegexGrammar(const std::string& pattern, bool full_match) {
  Grammar g;
  const uint32_t r = g.AddRule("root");
  RegexOptions o;
  o.full_match = full_match;
  DI_ASSIGN_OR_RETURN(ExprId e, CompileRegex(pattern, o, &g));
  g.Define(r, e);
  return Compile(g);
}

CompiledGrammar CompileSharedSchema(const std::string& text) {
  ConstraintSpec spec;
  spec.text = text;
  auto g = BuildGrammar(spec);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  auto c = Compile(*g);
  EXPECT_TRUE(c.ok()) << text << ": " << c.status().ToString();
  return std::move(*c);
}

std::string RandomString(std::mt19937& rng, const std::string& alphabet, size_t max_len) {
  std::string s;
  const size_t n = rng() % (max_len + 1);
  for (size_t i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
  return s;
}

TEST(SharedParts, RegexesAgreeWithStdRegex) {
  struct Case {
    const char* pattern;
    bool full_match;
    const char* alphabet;
    size_t max_len;
  };
  // Each is large enough as a Thompson automaton to be built as a spliced minimal DFA; the unanchored
  // ones have alternatives that share "any text" at both ends.
  for (const Case& c : std::vector<Case>{
           {"(ab|a)*c{2,40}", true, "abc", 48},
           {"[a-c]{3,70}", true, "abcd", 75},
           {"(abc|ab|b){0,30}d", true, "abcd", 40},
           {"x(a|b){20}y|x[ab]{1,30}", true, "abxy", 34},
           {"UTC|(Africa/[A-Za-z]+)|(America/[A-Za-z]+)|(Asia/[A-Za-z]+)", false, "UTCAfricamesA/x ", 24},
           {"ab|ba|(c[ab]{2,12})", false, "abc", 20},
           {"^a[bc]{2,20}|d{2}$", false, "abcd", 24},
           {"^ab|ca|b[ab]c|cc$|(a|c)b{2}", false, "abc", 16},
       }) {
    auto g = RegexGrammar(c.pattern, c.full_match);
    ASSERT_TRUE(g.ok()) << c.pattern << ": " << g.status().ToString();
    const std::regex ref(c.pattern, std::regex::ECMAScript);
    std::mt19937 rng(5);
    size_t yes = 0, no = 0;
    for (int i = 0; i < 3000; ++i) {
      std::string s = RandomString(rng, c.alphabet, c.max_len);
      const bool want = c.full_match ? std::regex_match(s, ref) : std::regex_search(s, ref);
      (want ? yes : no) += 1;
      EXPECT_EQ(g->Matches(s), want) << c.pattern << " on '" << s << "'";
    }
    EXPECT_GT(yes, 0u) << c.pattern;  // neither side of the comparison is vacuous
    EXPECT_GT(no, 0u) << c.pattern;
  }
}

TEST(SharedParts, UnanchoredPatternAlternativesStaySmall) {
  // Eleven unanchored alternatives: kept apart, the subset construction tracked which of them had matched
  // so far and ran past the 2 s limit; with "any text" built once before and after them it is the size
  // of the alternatives' prefixes.
  const std::string pattern =
      "UTC|(Africa/[A-Za-z]+)|(America/[A-Za-z]+)|(Antarctica/[A-Za-z]+)|(Arctic/[A-Za-z]+)|(Asia/[A-Za-z]+)|"
      "(Atlantic/[A-Za-z]+)|(Australia/[A-Za-z]+)|(Europe/[A-Za-z]+)|(Indian/[A-Za-z]+)|(Pacific/[A-Za-z]+)";
  const CompiledGrammar g = CompileSharedSchema(R"({"type":"string","pattern":")" + pattern + R"("})");
  EXPECT_LT(g.num_states(), 2000u);
  const std::regex ref(pattern, std::regex::ECMAScript);
  std::mt19937 rng(3);
  for (int i = 0; i < 2000; ++i) {
    std::string s = RandomString(rng, "UTCAfricaEuropesn/x", 20);
    if (i % 3 == 0) s.insert(0, i % 2 ? "xEurope/" : "xAsia/");
    EXPECT_EQ(g.Matches("\"" + s + "\""), std::regex_search(s, ref)) << s;
  }
}

TEST(SharedParts, AnchoredAlternativesBesideUnanchoredOnesStaySmall) {
  // An anchored alternative at each end keeps the alternatives from all sharing "any text" at both ends;
  // the unanchored ones between still share it, so the subset construction stays about the size of their
  // words (kept apart, it tracked which of them had matched so far: hundreds of milliseconds). The limit
  // on automaton states, which the intermediate subset construction must also stay under, tells the two.
  const std::string pattern = "^list|date|time|string|enum|int|double|long|boolean|number$";
  ConstraintSpec spec;
  spec.text = R"({"type":"string","pattern":")" + pattern + R"("})";
  auto built = BuildGrammar(spec);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  CompileLimits limits;
  limits.max_dfa_states = 1000;
  auto g = Compile(*built, limits);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::regex ref(pattern, std::regex::ECMAScript);
  std::mt19937 rng(4);
  size_t yes = 0, no = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string s = RandomString(rng, "listdaemnumbrgx", 14);
    if (i % 4 == 0) s.insert(rng() % (s.size() + 1), i % 8 ? "time" : "list");
    const bool want = std::regex_search(s, ref);
    (want ? yes : no) += 1;
    EXPECT_EQ(g->Matches("\"" + s + "\""), want) << s;
  }
  EXPECT_GT(yes, 0u);
  EXPECT_GT(no, 0u);
}

TEST(SharedParts, IntegerRangesAreExact) {
  // The range is the issue's common case (minimum 0, maximum 2^31 - 1 on every property). Canonical
  // integer literals only (never the ".0" spelling of an integral value).
  const CompiledGrammar g = CompileSharedSchema(R"({"type":"integer","minimum":0,"maximum":2147483647})");
  // The minimal automaton has about two states per digit position (still on the bound's prefix or below
  // it) and a few for the fraction; the Thompson automaton's subset construction made 2,536.
  EXPECT_LT(g.num_states(), 40u);
  std::mt19937_64 rng(9);
  std::vector<int64_t> values = {-1, 0, 1, 9, 10, 99, 100, 2147483646, 2147483647, 2147483648, 2147483650,
                                 9999999999, 1000000000, 1999999999, 2099999999, 2147399999, 2147483639};
  for (int i = 0; i < 3000; ++i) {
    const int digits = 1 + static_cast<int>(rng() % 11);
    int64_t v = static_cast<int64_t>(rng() % 10);
    for (int k = 1; k < digits; ++k) v = v * 10 + static_cast<int64_t>(rng() % 10);
    values.push_back(v);
  }
  for (int64_t v : values) {
    const bool want = v >= 0 && v <= 2147483647;
    EXPECT_EQ(g.Matches(std::to_string(v)), want) << v;
    EXPECT_FALSE(g.Matches(std::to_string(v) + ".0")) << v;
  }
  EXPECT_FALSE(g.Matches("01"));
  EXPECT_FALSE(g.Matches("1.5"));
  EXPECT_FALSE(g.Matches(""));
}

TEST(SharedParts, MaskEqualsBruteForce) {
  const std::vector<std::string> vocab = {"a", "b", "c", "ab", "ba", "abc", "cc", "aaa", "bab", "x", "ca"};
  const std::string alphabet = "abcx";
  auto index = TokenIndex::FromTokens(vocab, {}, {}, 16);
  ASSERT_TRUE(index.ok());
  for (const char* pattern : {"(ab|ba){1,40}c?", "[ab]{2,60}x|c(a|b){2,3}"}) {
    auto g = RegexGrammar(pattern, true);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    auto cg = std::make_shared<const CompiledGrammar>(std::move(*g));
    GrammarMatcher m(std::make_shared<BoundGrammar>(cg, *index));
    test_support::ExpectMaskIsValidPrefixesAlongWalk(
        m, vocab, (*index)->words(), 2, 14,
        [&](const std::string& prefix) { return test_support::ValidPrefixByCompletion(*cg, prefix, alphabet, 3); }, pattern);
  }
}

}  // namespace
}  // namespace deepinfer::grammar

namespace deepinfer::grammar {
namespace {

// An object schema repeated under three properties (what a schema with its $refs expanded looks like).
std::string RepeatedSubObjectSchema() {
  const std::string sub =
      R"({"type":"object","properties":{"displayName":{"type":"string"},"annotations":{"type":"array","items":{"type":"string"}},)"
      R"("replicaCount":{"type":"integer","minimum":0,"maximum":99},"phase":{"enum":["Pending","Running","Succeeded","Failed"]},)"
      R"("description":{"type":"string","maxLength":20}},"required":["displayName"],"additionalProperties":false})";
  return R"({"type":"object","properties":{"first":)" + sub + R"(,"second":)" + sub + R"(,"third":)" + sub +
         R"(},"additionalProperties":false})";
}

TEST(SharedParts, RepeatedSubObjectsAreOneCalledRule) {
  const CompiledGrammar g = CompileSharedSchema(RepeatedSubObjectSchema());
  size_t shared = 0;
  for (const std::string& name : g.rule_names()) shared += name.rfind("(shared part", 0) == 0;
  // The sub-object is built inline for "first" and called for "second" and "third" (a large part of it,
  // met again while the shared rule is built, may be shared as well).
  EXPECT_GE(shared, 1u);
  // Hand-written instances: each property's value must follow the sub-schema, whichever copy it uses.
  for (const char* yes : {R"({})", R"({"first":{"displayName":"a"}})",
                          R"({"second":{"displayName":"b","replicaCount":7,"phase":"Running"}})",
                          R"({"first":{"displayName":"","annotations":["x","y"]},"third":{"displayName":"c","description":"short"}})"})
    EXPECT_TRUE(g.Matches(yes)) << yes;
  for (const char* no : {R"({"second":{}})",                                      // displayName required
                         R"({"third":{"displayName":"c","replicaCount":100}})",     // above the maximum
                         R"({"second":{"displayName":"c","phase":"Done"}})",        // not in the enum
                         R"({"third":{"displayName":"c","description":"much longer than twenty"}})",
                         R"({"second":{"displayName":"c","extra":1}})",             // additionalProperties
                         R"({"first":{"displayName":"a"},"fourth":{}})"})
    EXPECT_FALSE(g.Matches(no)) << no;
}

TEST(SharedParts, MaskEqualsAcceptAcrossCalledParts) {
  auto g = std::make_shared<const CompiledGrammar>(CompileSharedSchema(RepeatedSubObjectSchema()));
  const std::vector<std::string> vocab = {"{", "}", "\"", ":", ",", "{\"", "\":", "\",\"", "\"}", "}}", "},\"",
                                          "first", "second", "third", "displayName", "phase", "Running", "replicaCount",
                                          "7", "12", "0", "x", "ab", "\"x\"", "[", "]", "annotations"};
  auto index = TokenIndex::FromTokens(vocab, {}, {}, 32);
  ASSERT_TRUE(index.ok());
  // A valid instance spelled with these tokens; at each step every token's mask bit must equal whether
  // the matcher accepts it.
  const std::vector<std::string> walk = {"{\"", "second", "\":", "{\"", "displayName", "\":", "\"x\"", ",", "\"",
                                         "replicaCount", "\":", "12", "},\"", "third", "\":", "{\"", "displayName",
                                         "\":", "\"", "ab", "\"", ",", "\"", "annotations", "\":", "[", "\"x\"",
                                         "]", "}}"};
  GrammarMatcher m(std::make_shared<BoundGrammar>(g, *index));
  for (const std::string& piece : walk) {
    std::vector<uint32_t> bits((*index)->words());
    ASSERT_TRUE(m.FillNextTokenBitmask(bits.data()).ok());
    for (size_t id = 0; id < vocab.size(); ++id) {
      const bool got = (bits[id / 32] >> (id % 32)) & 1;
      const bool accepted = m.AcceptToken(static_cast<int32_t>(id));
      if (accepted) m.Rollback(1);
      EXPECT_EQ(got, accepted) << "before '" << piece << "' token '" << vocab[id] << "'";
    }
    const auto it = std::find(vocab.begin(), vocab.end(), piece);
    ASSERT_NE(it, vocab.end());
    ASSERT_TRUE(m.AcceptToken(static_cast<int32_t>(it - vocab.begin()))) << piece;
  }
  EXPECT_TRUE(m.CanTerminate());
}

}  // namespace
}  // namespace deepinfer::grammar

namespace deepinfer::grammar {
namespace {

// Grammar::Add keeps one node per distinct expression: equal content gives the same id, any difference
// (a kid, a bound, the text) a different one.
TEST(ExprSharing, EqualExpressionsAreOneNode) {
  Grammar g;
  const ExprId ab = g.Literal("ab"), ab2 = g.Literal("ab"), ac = g.Literal("ac");
  EXPECT_EQ(ab, ab2);
  EXPECT_NE(ab, ac);
  EXPECT_EQ(g.Seq({ab, ac}), g.Seq({ab2, ac}));
  EXPECT_NE(g.Seq({ab, ac}), g.Seq({ac, ab}));
  EXPECT_NE(g.Repeat(ab, 1, 2), g.Repeat(ab, 1, 3));
  EXPECT_EQ(g.Repeat(ab, 1, 2), g.Repeat(ab2, 1, 2));
  EXPECT_NE(g.Chars({{'a', 'c'}}), g.Chars({{'a', 'd'}}));
  const size_t before = g.num_exprs();
  g.Seq({g.Literal("ab"), g.Literal("ac")});
  EXPECT_EQ(g.num_exprs(), before);
}

// A schema repeating one sub-schema under many names grows by the names only, and keeps its language.
TEST(ExprSharing, RepeatedSubSchemasShareTheirNodes) {
  const std::string item = R"({"type":"array","items":{"type":"integer","minimum":3,"maximum":900},"maxItems":4})";
  std::string one = R"({"type":"object","properties":{"p0":)" + item + "}}";
  std::string many = R"({"type":"object","properties":{)";
  for (int i = 0; i < 20; ++i) many += std::string(i ? "," : "") + "\"p" + std::to_string(i) + "\":" + item;
  many += "}}";
  auto g1 = JsonSchemaToGrammar(one);
  auto g20 = JsonSchemaToGrammar(many);
  ASSERT_TRUE(g1.ok() && g20.ok());
  EXPECT_LT(g20->num_exprs(), g1->num_exprs() + 20 * 8);
  auto cg = Compile(*g20);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_TRUE(cg->Matches(R"({"p0":[3,900],"p19":[]})"));
  EXPECT_FALSE(cg->Matches(R"({"p0":[2]})"));
  EXPECT_FALSE(cg->Matches(R"({"p7":[3,3,3,3,3]})"));
}

}  // namespace
}  // namespace deepinfer::grammar

namespace deepinfer::grammar {
namespace {

// NfaState's edge lists keep their first elements in place and move to the heap past them; copies and
// moves keep every element either way.
TEST(SmallVec, InPlaceThenOnTheHeap) {
  SmallVec<uint32_t, 2> v;
  EXPECT_TRUE(v.empty());
  for (uint32_t i = 0; i < 9; ++i) {
    v.push_back(i * 3);
    ASSERT_EQ(v.size(), i + 1);
    EXPECT_EQ(v.back(), i * 3);
  }
  SmallVec<uint32_t, 2> copy = v, moved = std::move(v), small;
  small.push_back(7);
  SmallVec<uint32_t, 2> small_moved = std::move(small);
  for (uint32_t i = 0; i < 9; ++i) {
    EXPECT_EQ(copy[i], i * 3);
    EXPECT_EQ(moved[i], i * 3);
  }
  EXPECT_TRUE(v.empty());  // NOLINT(bugprone-use-after-move): a moved-from list is empty
  ASSERT_EQ(small_moved.size(), 1u);
  EXPECT_EQ(small_moved[0], 7u);
  copy = small_moved;
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_EQ(*copy.begin(), 7u);
}

}  // namespace
}  // namespace deepinfer::grammar
