// anyOf of pattern-only branches folds into one $any_patterns group (SchemaResolver::PatternAlternatives)
// instead of distributing the rest of the schema over its branches: several such anyOf (double negations
// of pattern lists) used to compile every combination of branches as a string rule of its own. Expected
// verdicts are derived by hand from the standard (the same as `jsonschema.validate`).
#include <gtest/gtest.h>

#include "grammar/compiler.h"
#include "grammar/json_schema.h"
#include "grammar/json_schema_internal.h"

namespace deepinfer::grammar {
namespace {

using json_schema_internal::Json;

struct PatternCase {
  std::string schema;
  std::vector<std::string> yes, no;
};

CompiledGrammar CompileSchema(const std::string& schema) {
  auto g = JsonSchemaToGrammar(schema);
  EXPECT_TRUE(g.ok()) << schema << ": " << g.status().ToString();
  auto cg = Compile(*g);
  EXPECT_TRUE(cg.ok()) << schema << ": " << cg.status().ToString();
  return std::move(*cg);
}

TEST(PatternAlternatives, KeepTheLanguageOfTheAnyOf) {
  for (const PatternCase& c : std::vector<PatternCase>{
           // Two groups and a length: (starts with a or ends with b) and (holds x or is 4 long), 3 or more.
           {R"({"type":"string","minLength":3,"allOf":[{"anyOf":[{"pattern":"^a"},{"pattern":"b$"}]},
                {"anyOf":[{"pattern":"x"},{"pattern":"^....$"}]}]})",
            {R"("axx")", R"("abcd")", R"("zxb")", R"("zzzb")", R"("axzzzzzzb")"},
            {R"("abc")", R"("zzzz")", R"("ax")", R"("xb")", "1"}},
           // Without a type, instances other than strings meet every pattern, so the anyOf too.
           {R"({"anyOf":[{"pattern":"^a"},{"pattern":"^b"}]})", {"1", "null", "[]", R"("apple")", R"("bee")"},
            {R"("cat")", R"("")"}},
           // Branches that all say type string: strings only.
           {R"({"anyOf":[{"type":"string","pattern":"^a"},{"type":"string","pattern":"^b"}]})", {R"("a")", R"("b1")"},
            {"1", R"("c")"}},
           // One says type string, the other not: distributed as before (numbers meet the second branch).
           {R"({"anyOf":[{"type":"string","pattern":"^a"},{"pattern":"^b"}]})", {"1", R"("a")", R"("b")"}, {R"("c")"}},
           // Through $ref and not not, as the Handwritten allany schemas write them.
           {R"({"type":"string","allOf":[{"$ref":"#/$defs/n"}],"$defs":{"n":{"not":{"not":{"anyOf":[
                {"pattern":"^x$"},{"pattern":"yz"}]}}}}})",
            {R"("x")", R"("ayzb")"}, {R"("xx")", R"("y")"}},
           // not of such an anyOf: strings matching none of them (other instances fail the not).
           {R"({"not":{"anyOf":[{"pattern":"^a"},{"pattern":"^b"}]}})", {R"("c")", R"("")"}, {R"("a")", R"("b")", "1"}},
       }) {
    const CompiledGrammar cg = CompileSchema(c.schema);
    for (const auto& s : c.yes) EXPECT_TRUE(cg.Matches(s)) << c.schema << " should accept " << s;
    for (const auto& s : c.no) EXPECT_FALSE(cg.Matches(s)) << c.schema << " should reject " << s;
  }
}

TEST(PatternAlternatives, SeveralGroupsStayOneStringRule) {
  // Three anyOf of three patterns each: distributed, 27 string rules (one per combination); folded, one.
  const CompiledGrammar cg = CompileSchema(
      R"({"type":"string","maxLength":12,"allOf":[
          {"anyOf":[{"pattern":"ab"},{"pattern":"cd"},{"pattern":"^e"}]},
          {"anyOf":[{"pattern":"12"},{"pattern":"34"},{"pattern":"^5"}]},
          {"anyOf":[{"pattern":"x$"},{"pattern":"yy"},{"pattern":"z"}]}]})");
  EXPECT_LE(cg.rule_names().size(), 2u);  // the root and the string
  EXPECT_TRUE(cg.Matches(R"("ab12x")"));
  EXPECT_TRUE(cg.Matches(R"("e34yy")"));
  EXPECT_FALSE(cg.Matches(R"("5cd")"));  // groups 1 and 2, none of group 3
  EXPECT_FALSE(cg.Matches(R"("ab12")"));
  EXPECT_FALSE(cg.Matches(R"("ab12zzzzzzzzz")"));  // 13 long
}

TEST(PatternAlternatives, ValidatorAndNegationReadTheGroups) {
  const Json root = Json::object();
  const JsonSchemaOptions options;
  json_schema_internal::SchemaResolver resolver(root, options);
  const Json schema = Json::parse(R"({"$any_patterns":[["^a","^b"],["e$"]]})");
  auto members = json_schema_internal::ValidMembers(resolver, 10, schema, Json::parse(R"(["apple","bee","axe","cat",1])"), "#");
  ASSERT_TRUE(members.ok()) << members.status().ToString();
  EXPECT_EQ(*members, Json::parse(R"(["apple","bee","axe",1])"));
  auto neg = resolver.Negate(schema, "#", 0);
  ASSERT_TRUE(neg.has_value());
  EXPECT_EQ(*neg, Json::parse(R"({"anyOf":[{"type":"string","$not_patterns":["^a","^b"]},{"type":"string","$not_patterns":["e$"]}]})"));
}

}  // namespace
}  // namespace deepinfer::grammar
