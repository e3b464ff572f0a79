// IntersectionEmpty keeps the verdict of each pair of oneOf branches it checks (by content) for later
// checks of the same pair: nested oneOfs repeat the same pairs at every level, and each check compiled
// both branches again. The grammar must be the one the checks without kept verdicts give, text for text:
// each schema is translated both ways and the texts compared. These small schemas do not repeat a pair
// within the budget's rules, so no kept verdict is used here; without kept verdicts none ever is.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/json_schema_compiler.h"

namespace deepinfer::grammar {
namespace {

using json_schema_internal::Json;
using json_schema_internal::SchemaCompiler;

struct Translation {
  std::string text;  // the grammar, or the error
  uint32_t reused = 0;
};

Translation Translate(const std::string& schema, bool remember) {
  const Json root = Json::parse(schema);
  JsonSchemaOptions o;
  SchemaCompiler c(root, o);
  c.set_remember_pair_verdicts(remember);
  auto g = c.Run();
  return {g.ok() ? g->ToString() : g.status().ToString(), c.pair_verdicts_reused()};
}

// A tagged union of objects whose members are tagged unions again (the same definitions at every level),
// with string branches told apart by their patterns only (a check that compiles them together).
std::string NestedUnions(int levels) {
  std::string defs = R"("leaf":{"oneOf":[{"type":"string","pattern":"^[a-m]+$"},{"type":"string","pattern":"^[n-z]+$"}]})";
  for (int i = 0; i < levels; ++i) {
    std::string name(1, 'n'), inner(1, 'n');
    name += std::to_string(i);
    if (i == 0) inner = "leaf";
    else inner += std::to_string(i - 1);
    std::string ref = R"({"$ref":"#/definitions/)";
    ref += inner;
    ref += "\"}";
    defs += ",\"";
    defs += name;
    defs += R"(":{"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"v":)";
    defs += ref;
    defs += R"(},"required":["kind"]},{"type":"object","properties":{"kind":{"const":"b"},"w":)";
    defs += ref;
    defs += R"(},"required":["kind"]},)";
    defs += ref;
    defs += "]}";
  }
  std::string top = R"({"$ref":"#/definitions/n)";
  top += std::to_string(levels - 1);
  top += "\"}";
  std::string s = R"({"definitions":{)";
  s += defs;
  s += R"(},"type":"object","properties":{"p":)";
  s += top;
  s += R"(,"q":{"oneOf":[)";
  s += top;
  s += R"(,{"type":"null"}]}}})";
  return s;
}

TEST(PairVerdicts, SameGrammarAsCheckingEveryPairAgain) {
  const std::vector<std::string> cases = {
      NestedUnions(1),
      NestedUnions(2),
      // Objects that need different members, each member the same union: checking the two objects
      // compiles them together, which checks that union's branches again.
      R"({"oneOf":[{"type":"object","additionalProperties":false,"required":["a"],"properties":{"a":)"
      R"({"oneOf":[{"type":"string","pattern":"^[a-m]+$"},{"type":"string","pattern":"^[n-z]+$"}]}}},)"
      R"({"type":"object","additionalProperties":false,"required":["b"],"properties":{"b":)"
      R"({"oneOf":[{"type":"string","pattern":"^[a-m]+$"},{"type":"string","pattern":"^[n-z]+$"}]}}}]})",
      // Branches that overlap (a verdict "may meet" kept too) beside disjoint ones.
      R"({"oneOf":[{"type":"string","pattern":"^a"},{"type":"string","pattern":"b$"},{"type":"integer"},)"
      R"({"type":"array","items":{"oneOf":[{"type":"string","pattern":"^a"},{"type":"string","pattern":"b$"}]}}]})",
  };
  for (const std::string& schema : cases) {
    const Translation kept = Translate(schema, true), plain = Translate(schema, false);
    EXPECT_EQ(kept.text, plain.text) << schema;
    EXPECT_EQ(plain.reused, 0u);
  }
}

}  // namespace
}  // namespace deepinfer::grammar
