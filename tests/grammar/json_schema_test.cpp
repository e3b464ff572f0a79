// JSON Schema coverage beyond merging: finite languages (an enum or const under any other keywords, which
// json_schema_validate.cpp evaluates member by member) and oneOf branches proven disjoint by an empty
// intersection. Expected strings are derived by hand from the standard, the reasoning in each comment
// (the same verdicts as `jsonschema.validate`).
#include <gtest/gtest.h>

#include "grammar/compiler.h"
#include "grammar/json_schema.h"

namespace deepinfer::grammar {
namespace {

struct Case {
  std::string schema;
  std::vector<std::string> yes, no;
};

void Check(const Case& c) {
  auto g = JsonSchemaToGrammar(c.schema);
  ASSERT_TRUE(g.ok()) << c.schema << ": " << g.status().ToString();
  auto cg = Compile(*g);
  ASSERT_TRUE(cg.ok()) << c.schema << ": " << cg.status().ToString();
  for (const auto& s : c.yes) EXPECT_TRUE(cg->Matches(s)) << c.schema << " should accept " << s;
  for (const auto& s : c.no) EXPECT_FALSE(cg->Matches(s)) << c.schema << " should reject " << s;
}

TEST(JsonSchemaFinite, EnumMembersMustPassEveryOtherKeyword) {
  for (const Case& c : std::vector<Case>{
           // not of a type: 1 and 2.5 are numbers; "a" and [1] are not.
           {R"({"allOf":[{"enum":[1,"a",[1],2.5]},{"not":{"type":"number"}}]})", {R"("a")", "[1]"}, {"1", "2.5"}},
           // maxLength beside an enum: "bbbb" has 4 code points > 2 (the enum alone used to let it through).
           {R"({"enum":["a","bbbb","é"],"maxLength":2})", {R"("a")", R"("é")"}, {R"("bbbb")"}},
           // Double negation: not not maxLength 2 = maxLength 2.
           {R"({"allOf":[{"enum":["fo","foo"]},{"not":{"not":{"maxLength":2}}}]})", {R"("fo")"}, {R"("foo")"}},
           // not of an enum of an object: {"a":true} is excluded whatever its member order; {"a":false} stays.
           {R"({"allOf":[{"enum":[{"a":true},{"a":false}]},{"not":{"enum":[{"a":true}]}}]})", {R"({"a":false})"},
            {R"({"a":true})"}},
           // Numbers compare by value: 1.0 equals 1, so it is excluded; 2 is not.
           {R"({"enum":[1.0,2],"not":{"const":1}})", {"2"}, {"1.0", "1"}},
           // if/then/else: strings must be at least 3 long, others must be integers.
           {R"({"enum":["ab","abc",1,1.5],"if":{"type":"string"},"then":{"minLength":3},"else":{"type":"integer"}})",
            {R"("abc")", "1"}, {R"("ab")", "1.5"}},
           // Object keywords: properties, required, additionalProperties, propertyNames, dependencies.
           {R"({"enum":[{"a":1},{"a":"x"},{"b":1},{"a":1,"c":2}],"properties":{"a":{"type":"integer"}},"required":["a"],)"
            R"("additionalProperties":false})",
            {R"({"a":1})"}, {R"({"a":"x"})", R"({"b":1})", R"({"a":1,"c":2})"}},
           {R"({"enum":[{"ab":1},{"abc":1}],"propertyNames":{"maxLength":2}})", {R"({"ab":1})"}, {R"({"abc":1})"}},
           {R"({"enum":[{"a":1},{"a":1,"b":2}],"dependencies":{"a":["b"]}})", {R"({"a":1,"b":2})"}, {R"({"a":1})"}},
           // Array keywords: items, uniqueItems, contains.
           {R"({"enum":[[1,2],[1,1],["x"]],"items":{"type":"integer"},"uniqueItems":true})", {"[1,2]"},
            {"[1,1]", R"(["x"])"}},
           {R"({"enum":[[1,"x"],[1,2]],"contains":{"type":"string"}})", {R"([1,"x"])"}, {"[1,2]"}},
           // Strings: pattern (unanchored) and a format the compiler constrains.
           {R"({"enum":["a1","bb","2024-01-02","2024-13-01"],"anyOf":[{"pattern":"^[a-z][0-9]$"},{"format":"date"}]})",
            {R"("a1")", R"("2024-01-02")"}, {R"("bb")", R"("2024-13-01")"}},
           // oneOf over an enum, exactly one branch: 1 meets neither, 3 only minimum, 4 both (and is excluded).
           {R"({"enum":[1,3,4],"oneOf":[{"multipleOf":2},{"minimum":2}],"not":{"const":4}})", {"3"}, {"1", "4"}},
           // 1 is odd only, 3 odd and >= 2, 4 >= 2 only.
           {R"({"enum":[1,3,4],"oneOf":[{"not":{"multipleOf":2}},{"minimum":2}]})", {"1", "4"}, {"3"}},
           // An enum reached through an allOf member's $ref.
           {R"({"$defs":{"e":{"enum":["x","y"]}},"allOf":[{"$ref":"#/$defs/e"},{"not":{"const":"x"}}]})", {R"("y")"},
            {R"("x")"}},
       })
    Check(c);
}

TEST(JsonSchemaFinite, NoMemberLeftIsAnEmptyLanguage) {
  // The only member is excluded, so nothing validates: compiling says so.
  auto g = JsonSchemaToGrammar(R"({"allOf":[{"enum":[true]},{"not":true}]})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto cg = Compile(*g);
  ASSERT_FALSE(cg.ok());
  EXPECT_NE(cg.status().message().find("accepts no string"), std::string::npos) << cg.status().ToString();
}

// An additionalProperties of one allOf member (or of the schema beside allOf) holds the properties the
// other members list: here the outer `false` lists none, so a and b are both forbidden and both required:
// nothing validates (jsonschema: Draft202012Validator(s).is_valid({"a": 1, "b": True}) is False).
TEST(JsonSchemaMerge, AdditionalPropertiesHoldTheOtherMembersProperties) {
  auto g = JsonSchemaToGrammar(R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},)"
                               R"({"properties":{"b":{"const":true}},"required":["b"]}],"additionalProperties":false})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_FALSE(Compile(*g).ok());
  // Open on one side only: b must be a string (the first member's additionalProperties), a anything.
  Check({R"({"allOf":[{"properties":{"a":{}},"additionalProperties":{"type":"string"}},{"properties":{"b":{}}}]})",
         {R"({"a":1,"b":"x"})", R"({"b":""})", R"({"a":[]})"}, {R"({"b":1})", R"({"a":1,"b":null})"}});
}

TEST(JsonSchemaOneOf, DisjointBranchesAreAnyOf) {
  for (const Case& c : std::vector<Case>{
           // Same type, enums that do not meet.
           {R"({"oneOf":[{"type":"string","enum":["all","none"]},{"type":"string","enum":["some"]}]})",
            {R"("all")", R"("some")"}, {R"("x")"}},
           // A pattern that cannot match the empty string against maxLength 0.
           {R"({"oneOf":[{"type":"string","pattern":"^[0-9]+\\.[0-9]+$"},{"type":"string","maxLength":0}]})",
            {R"("1.2")", R"("")"}, {R"("x")", R"("1.")"}},
           // Objects told apart by a required member whose const values differ (through $refs).
           {R"({"$defs":{"a":{"type":"object","properties":{"k":{"const":"a"},"x":{"type":"integer"}},"required":["k"]},)"
            R"("b":{"type":"object","properties":{"k":{"const":"b"}},"required":["k"]}},)"
            R"("oneOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/b"}]})",
            {R"({"k":"a","x":1})", R"({"k":"b"})"}, {R"({"k":"c"})", R"({"x":1})", R"({"k":"a","x":"s"})"}},
           // Closed objects whose required members cannot appear in the other.
           {R"({"oneOf":[{"type":"object","properties":{"p":{}},"required":["p"],"additionalProperties":false},)"
            R"({"type":"object","properties":{"q":{}},"required":["q"],"additionalProperties":false}]})",
            {R"({"p":1})", R"({"q":null})"}, {R"({"p":1,"q":2})", R"({})"}},
       })
    Check(c);
}

TEST(JsonSchemaOneOf, OverlappingBranchesStayAnError) {
  // "abc" is a string of length >= 1: both branches validate it, so oneOf is not anyOf here.
  for (const char* schema : {R"({"oneOf":[{"type":"string"},{"minLength":1}]})",
                             R"({"oneOf":[{"type":"object","required":["a"]},{"type":"object","required":["b"]}]})",
                             R"({"oneOf":[{"type":"string","pattern":"a"},{"type":"string","pattern":"b"}]})"}) {
    auto g = JsonSchemaToGrammar(schema);
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented) << schema;
    EXPECT_NE(g.status().message().find("oneOf"), std::string::npos) << g.status().ToString();
  }
}

}  // namespace
}  // namespace deepinfer::grammar
