// Alternations of large regular parts are built as a union of the parts' minimal DFAs, one part at a time
// (CompileLimits::fold_unions). The language must be the one the plain subset construction over all the
// parts gives: each case is compiled both ways and the two automata are walked in lock step over every
// byte from their starts (an exact equivalence check, since neither has calls), and, both being built from
// minimal parts, they have the same number of states.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/constraint.h"
#include "grammar/regex.h"

namespace deepinfer::grammar {
namespace {

// A schema, or a regex (full match, as one rule without calls) where `schema` starts with "regex:".
Result<CompiledGrammar> CompileWith(const std::string& schema, bool fold) {
  Grammar g;
  if (schema.rfind("regex:", 0) == 0) {
    const uint32_t r = g.AddRule("root");
    RegexOptions o;
    o.full_match = true;
    DI_ASSIGN_OR_RETURN(ExprId e, CompileRegex(schema.substr(6), o, &g));
    g.Define(r, e);
  } else {
    ConstraintSpec spec;
    spec.text = schema;
    DI_ASSIGN_OR_RETURN(g, BuildGrammar(spec));
  }
  CompileLimits limits;
  limits.fold_unions = fold;
  return Compile(g, limits);
}

// Whether a and b (automata without calls) accept the same strings: every pair of states reachable by the
// same bytes agrees on acceptance and on which bytes are dead. Counts the pairs visited in *pairs.
bool SameLanguage(const CompiledGrammar& a, const CompiledGrammar& b, size_t* pairs) {
  std::set<std::pair<uint32_t, uint32_t>> seen = {{a.start(), b.start()}};
  std::vector<std::pair<uint32_t, uint32_t>> work(seen.begin(), seen.end());
  while (!work.empty()) {
    auto [s, t] = work.back();
    work.pop_back();
    if (a.has_calls(s) || b.has_calls(t)) return false;
    if (a.accepting(s) != b.accepting(t)) return false;
    for (int byte = 0; byte < 256; ++byte) {
      const uint32_t x = a.Next(s, static_cast<uint8_t>(byte)), y = b.Next(t, static_cast<uint8_t>(byte));
      if ((x == CompiledGrammar::kDead) != (y == CompiledGrammar::kDead)) return false;
      if (x != CompiledGrammar::kDead && seen.insert({x, y}).second) work.push_back({x, y});
    }
  }
  *pairs = seen.size();
  return true;
}

// An object with properties in a fixed order, additionalProperties false, and an anyOf of `required`
// variants: each variant is a large regular part (arrays of enum strings), and they differ only in which
// member must appear.
std::string RequiredVariants(int variants) {
  std::string props, any_of;
  for (int i = 0; i < variants; ++i) {
    std::string name(1, 'k');
    name += std::to_string(i);
    if (i > 0) props += ',', any_of += ',';
    props += '"';
    props += name;
    props += R"(":{"type":"array","maxItems":3,"items":{"enum":["alpha","beta","gamma","delta"]}})";
    any_of += R"({"required":[")";
    any_of += name;
    any_of += "\"]}";
  }
  std::string s = R"({"type":"object","additionalProperties":false,"properties":{)";
  s += props;
  s += R"(,"flag":{"type":"boolean"}},"anyOf":[)";
  s += any_of;
  s += "]}";
  return s;
}

TEST(UnionFold, SameAutomatonAsOneSubsetConstruction) {
  const std::vector<std::string> cases = {
      RequiredVariants(2),
      RequiredVariants(5),
      // Numbers: oneOf branches that are unions of remainder automata and their exclusions.
      R"({"type":"integer","oneOf":[{"multipleOf":7},{"multipleOf":11},{"not":{"multipleOf":3}}]})",
      R"({"type":"number","anyOf":[{"multipleOf":13},{"multipleOf":0.5,"minimum":-40,"maximum":9000}]})",
      // Pattern alternatives: large regular parts beside small ones (a literal, a short class).
      "regex:a[bc]{3,70}d|c[a-z]{5,80}|x(yz){40,60}|q|[0-9]",
      "regex:[a-f]{2,90}|[c-k]{3,60}x|[0-3]{40,64}",
      // Alternatives that share "any text" at both ends: built with it once, not folded.
      "regex:.*(Red|Blue|Yellow|Gold|Silver|Crystal|Ruby|Sapphire|Emerald).*|.*[a-c]{70}.*|.*x{64}.*",
      // Many long strings (each a large part of its own): folded in pairs, then pairs of those.
      R"({"enum":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1",)"
      R"("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2",)"
      R"("baaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",)"
      R"("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab3",)"
      R"("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab4"]})",
  };
  for (const std::string& schema : cases) {
    auto folded = CompileWith(schema, true);
    auto plain = CompileWith(schema, false);
    ASSERT_TRUE(folded.ok()) << schema << ": " << folded.status().ToString();
    ASSERT_TRUE(plain.ok()) << schema << ": " << plain.status().ToString();
    size_t pairs = 0;
    EXPECT_TRUE(SameLanguage(*folded, *plain, &pairs)) << schema;
    EXPECT_EQ(folded->num_states(), plain->num_states()) << schema;
    // Equal minimal automata pair each state with exactly one (live states plus the shared dead one).
    EXPECT_LE(pairs, folded->num_states()) << schema;
  }
}

TEST(UnionFold, SpotChecksOfTheFoldedLanguage) {
  // The anyOf of required members: a value must name at least one of k0..k4.
  auto g = CompileWith(RequiredVariants(5), true);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(g->Matches(R"({"k3":["beta","alpha"]})"));
  EXPECT_TRUE(g->Matches(R"({"k0":[],"k4":["delta"],"flag":true})"));
  EXPECT_FALSE(g->Matches(R"({"flag":true})"));                       // no required member
  EXPECT_FALSE(g->Matches(R"({"k1":["alpha","beta","gamma","delta"]})"));  // maxItems 3
  EXPECT_FALSE(g->Matches(R"({"k4":[],"k0":[]})"));                   // members in the schema's order
}

}  // namespace
}  // namespace deepinfer::grammar
