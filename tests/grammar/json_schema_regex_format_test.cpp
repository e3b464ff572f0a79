// The `regex` format: a string must spell a valid ECMA-262 pattern (u-less, Annex B, as browsers read it).
// Verdicts were taken from `new RegExp(p)` in Node (V8); where a pattern's validity is noted as refused
// although valid, the compiler's documented bounds (json_schema_regex_format.cpp) make it so.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/json_schema.h"
#include "grammar/json_text.h"

namespace deepinfer::grammar {
namespace {

struct PatternVerdict {
  std::string pattern;  // the pattern itself, before JSON quoting
  bool valid;
};

const std::vector<PatternVerdict>& Verdicts() {
  static const std::vector<PatternVerdict> v = {
      {"*", false},  // nothing to repeat
      {"\\", false},  // `\` at the end
      {"a**", false},
      {"(", false},
      {")", false},
      {"[", false},
      {"a{2,1}", false},  // numbers out of order in a quantifier
      {"a{10,9}", false},
      {"(?<n>a)\\k<n>", true},
      {"[a-z]", true},
      {"[z-a]", false},  // range out of order
      {"a{,3}", true},  // Annex B: `{`, `,`, `3`, `}` are literal characters
      {"(?=a)", true},
      {"(?=a)*", true},  // Annex B: a lookahead may be quantified
      {"(?<=a)*", false},  // a lookbehind may not
      {"^*", false},
      {"\\b+", false},
      {"a{2}{3}", false},
      {"a???", false},
      {"a+?", true},
      {"a{9,10}", true},
      {"a{99,100}", true},
      {"a{01,1}", true},
      {"{", true},
      {"}", true},
      {"]", true},
      {"x{a}", true},
      {"a|*", false},
      {"a||b", true},
      {"(?<1a>x)", false},  // a group name starts like an identifier
      {"(?", false},
      {"((a)", false},
      {"[\\d-z]", true},  // Annex B: a class escape at a range's end makes `-` a character
      {"[a--]", false},  // `a` to `-` is out of order
      {"[!--]", true},
      {"[--a]", true},
      {"[a-b-c]", true},
      {"[]", true},
      {"[^]", true},
      {"[\\x41-\\x5a]", true},
      {"[\\x5a-\\x41]", false},
      {"[\\u4e00-\\u9fa5]", true},
      {"[\\u9fa5-\\u4e00]", false},
      {"[\\t-\\r]", true},
      {"[\\r-\\t]", false},
      {"[z-ab]", false},
      {"[\\u00e0-\\u00ff]", true},
      {"\\u{41}", true},  // without u: `u` repeated 41 times
      {"\\c", true},  // Annex B: a `\` then `c`
      {"\"a\"", true},  // quotes, escaped in the JSON text
      {"(a)\\1", true},
      {"^\\s*(it|describe)\\(\\s*['\"]([^'\"]+)['\"]", true},
      {"", true},
  };
  return v;
}

std::string Quoted(const std::string& s) { return JsonQuote(s); }

// The regex syntax is the largest part a schema compiles to; a loaded or sanitized build may take seconds
// to build it. The tests judge the automaton, not its speed: no wall-clock limit.
Result<CompiledGrammar> CompileUntimed(const Grammar& g) {
  CompileLimits limits;
  limits.max_compile_ms = 600'000.0;
  return grammar::Compile(g, limits);
}

// The grammar of the string schema (the matcher) against Node's verdicts.
TEST(RegexFormat, MatcherAcceptsExactlyValidPatterns) {
  auto g = JsonSchemaToGrammar(R"({"type":"string","format":"regex"})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto cg = CompileUntimed(*g);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  for (const auto& [pattern, valid] : Verdicts()) EXPECT_EQ(cg->Matches(Quoted(pattern)), valid) << pattern;
}

// The instance validator decides which enum members the grammar keeps: the same verdicts.
TEST(RegexFormat, ValidatorAgreesWithMatcher) {
  std::string schema = R"({"format":"regex","enum":[)";
  for (const auto& v : Verdicts()) schema += Quoted(v.pattern) + (&v == &Verdicts().back() ? "" : ",");
  schema += "]}";
  auto g = JsonSchemaToGrammar(schema);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto cg = CompileUntimed(*g);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  for (const auto& [pattern, valid] : Verdicts()) EXPECT_EQ(cg->Matches(Quoted(pattern)), valid) << pattern;
}

// Groups nest through a rule that calls itself: 50 levels, and an unbalanced 50.
TEST(RegexFormat, DeepGroupsNest) {
  auto g = JsonSchemaToGrammar(R"({"type":"string","format":"regex"})");
  ASSERT_TRUE(g.ok());
  auto cg = CompileUntimed(*g);
  ASSERT_TRUE(cg.ok());
  const std::string deep = std::string(50, '(') + "a" + std::string(50, ')');
  EXPECT_TRUE(cg->Matches(Quoted(deep)));
  EXPECT_TRUE(cg->Matches(Quoted("(?:" + deep + ")+")));
  EXPECT_FALSE(cg->Matches(Quoted(deep + ")")));
  EXPECT_FALSE(cg->Matches(Quoted("(" + deep)));
}

// Beside another constraint on the string the format is not enforced (the syntax is no regular language
// to intersect with the pattern), in the grammar and the validator alike.
TEST(RegexFormat, NotEnforcedBesideAPattern) {
  auto g = JsonSchemaToGrammar(R"({"type":"string","format":"regex","pattern":"^/.+/$"})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto cg = CompileUntimed(*g);
  ASSERT_TRUE(cg.ok());
  EXPECT_TRUE(cg->Matches(Quoted("/\\d+/")));
  EXPECT_TRUE(cg->Matches(Quoted("/*/")));  // `/*/` is no valid pattern: not checked here
  EXPECT_FALSE(cg->Matches(Quoted("\\d+")));
  auto e = JsonSchemaToGrammar(R"({"enum":["/*/","x"],"format":"regex","pattern":"^/.+/$"})");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  auto ce = CompileUntimed(*e);
  ASSERT_TRUE(ce.ok());
  EXPECT_TRUE(ce->Matches(Quoted("/*/")));
  EXPECT_FALSE(ce->Matches(Quoted("x")));
}

// A negation takes the format as met: `not` keeps the non-strings and leaves out every string (the
// invalid patterns too, which the exact negation would keep); a oneOf whose branches need negating
// compiles.
TEST(RegexFormat, NegationLeavesOutStringsFailingOnlyTheFormat) {
  auto g = JsonSchemaToGrammar(R"({"not":{"type":"string","format":"regex"}})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto cg = CompileUntimed(*g);
  ASSERT_TRUE(cg.ok());
  EXPECT_TRUE(cg->Matches("1"));
  EXPECT_FALSE(cg->Matches(Quoted("a")));
  EXPECT_FALSE(cg->Matches(Quoted("*")));
  auto o = JsonSchemaToGrammar(
      R"({"oneOf":[{"type":"object","properties":{"r":{"type":"string","format":"regex"}}},{"type":"object","required":["n"]}]})");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  auto co = CompileUntimed(*o);
  ASSERT_TRUE(co.ok());
  EXPECT_TRUE(co->Matches(R"({"r":"a+"})"));
  EXPECT_FALSE(co->Matches(R"({"r":"a**"})"));  // neither branch: the first fails the format
  EXPECT_FALSE(co->Matches(R"({"r":"a+","n":1})"));  // both branches
}

}  // namespace
}  // namespace deepinfer::grammar
