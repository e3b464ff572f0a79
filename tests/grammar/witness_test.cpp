// ProvablyMeet (json_schema_witness.cpp): a oneOf's pairs of branches are shown to meet by one instance
// both validate, instead of compiling each pair together. `true` must be a proof; each case that says so
// is checked against the compiled allOf of both (it must accept something), and the cases that meet only
// by instances the builder does not guess (or through keywords the validator does not evaluate) must say
// false, so the compiler takes its exact path. Expected verdicts are derived by hand from the standard.
#include <gtest/gtest.h>

#include "grammar/compiler.h"
#include "grammar/json_schema.h"
#include "grammar/json_schema_internal.h"

namespace deepinfer::grammar {
namespace {

using json_schema_internal::Json;

bool WitnessMeet(const std::string& root, const std::string& a, const std::string& b) {
  const Json r = Json::parse(root);
  const JsonSchemaOptions o;
  json_schema_internal::SchemaResolver resolver(r, o);
  return json_schema_internal::ProvablyMeet(resolver, o.max_depth, Json::parse(a), Json::parse(b));
}

// The compiled allOf [a, b] accepts some string (compiling reports an empty language as an error).
bool WitnessAllOfAccepts(const std::string& defs, const std::string& a, const std::string& b) {
  auto g = JsonSchemaToGrammar(R"({"definitions":)" + defs + R"(,"allOf":[)" + a + "," + b + "]}");
  if (!g.ok()) return false;
  return Compile(*g).ok();
}

TEST(ProvablyMeet, ProvesOnlyPairsThatMeet) {
  const std::string defs = R"({"path":{"type":"string","minLength":2},"n":{"type":"integer","minimum":3}})";
  const std::string root = R"({"definitions":)" + defs + "}";
  struct WitnessPair {
    std::string a, b;
    bool meet;
  };
  for (const WitnessPair& p : std::vector<WitnessPair>{
           // The helm test suite's shape: each branch requires its own member; an object with both meets both.
           {R"({"properties":{"x":{"type":"object","required":["path"],"properties":{"path":{"$ref":"#/definitions/path"}},
                "additionalProperties":false}},"required":["x"]})",
            R"({"properties":{"y":{"type":"object","properties":{"n":{"$ref":"#/definitions/n"}}}},"required":["y"]})", true},
           // Bounds from both sides: an integer at least 3 and at most 5.
           {R"({"$ref":"#/definitions/n"})", R"({"type":"number","maximum":5})", true},
           {R"({"type":"string","minLength":2})", R"({"type":"string","maxLength":4})", true},
           {R"({"type":"array","minItems":2,"items":{"type":"null"}})", R"({"type":"array","maxItems":2})", true},
           {R"({"enum":["a","b"]})", R"({"type":"string"})", true},
           // Disjoint: no proof can come.
           {R"({"type":"string"})", R"({"type":"integer"})", false},
           {R"({"properties":{"k":{"type":"string"}},"required":["k"]})", R"({"properties":{"k":{"type":"integer"}},"required":["k"]})", false},
           {R"({"type":"object","additionalProperties":false})", R"({"type":"object","required":["k"]})", false},
           {R"({"type":"integer","minimum":5})", R"({"type":"integer","maximum":4})", false},
           // They meet, but not at the guess ("aa" fails the pattern; the first enum member fails the other).
           {R"({"type":"string","minLength":2})", R"({"type":"string","pattern":"^b"})", false},
           {R"({"enum":[1,"a"]})", R"({"type":"string"})", false},
           // A keyword the validator does not evaluate: no proof, whatever the instance.
           {R"({"type":"object","unevaluatedProperties":false})", R"({"type":"object"})", false},
       }) {
    EXPECT_EQ(WitnessMeet(root, p.a, p.b), p.meet) << p.a << " / " << p.b;
    if (p.meet) {
      EXPECT_TRUE(WitnessAllOfAccepts(defs, p.a, p.b)) << p.a << " / " << p.b;
    }
  }
}

TEST(ProvablyMeet, OverlappingOneOfStaysExclusive) {
  // Branches that meet (shown by a witness) still exclude each other: exactly one of x, y.
  auto g = JsonSchemaToGrammar(R"({"type":"object","oneOf":[
      {"properties":{"x":{"type":"integer"}},"required":["x"]},
      {"properties":{"y":{"type":"boolean"}},"required":["y"]}]})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto cg = Compile(*g);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_TRUE(cg->Matches(R"({"x":1})"));
  EXPECT_TRUE(cg->Matches(R"({"y":true})"));
  EXPECT_FALSE(cg->Matches(R"({"x":1,"y":true})"));
  EXPECT_FALSE(cg->Matches(R"({})"));
}

}  // namespace
}  // namespace deepinfer::grammar
