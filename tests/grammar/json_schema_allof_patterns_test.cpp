// allOf members whose additionalProperties meet another member's properties and patternProperties: each
// member's additionalProperties holds exactly for the names it neither lists nor matches with its own
// patterns, whatever the other members say about those names. Also the negation of propertyNames'
// `not: {enum}` and an allOf with one constraining member. Expected verdicts are derived by hand from the
// standard, the reasoning in each comment.
#include <gtest/gtest.h>

#include "grammar/compiler.h"
#include "grammar/json_schema.h"
#include "schema_case.h"

namespace deepinfer::grammar {
namespace {

// The other member lists names: those this member's patterns match take the pattern schema, the others its
// additionalProperties.
TEST(JsonSchemaAllOfPatterns, OtherMembersNamesByThisMembersPatterns) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           // First member: a (integer) and ^x keys (strings), nothing else. Second: b and xb, anything.
           // xb matches ^x, so it must be a string; b matches nothing of the first, which forbids it.
           {R"({"allOf":[{"properties":{"a":{"type":"integer"}},"patternProperties":{"^x":{"type":"string"}},
                "additionalProperties":false},{"properties":{"b":{},"xb":{}}}]})",
            {"{}", R"({"a":1})", R"({"xb":"s"})", R"({"xz":"s"})", R"({"a":1,"xb":"s"})"},
            {R"({"xb":1})", R"({"b":1})", R"({"a":"s"})", R"({"xz":1})", R"({"q":1})"}},
           // The same with additionalProperties a schema: b takes it (integers), xb the pattern's (strings).
           {R"({"allOf":[{"patternProperties":{"^x":{"type":"string"}},"additionalProperties":{"type":"integer"}},
                {"properties":{"b":{},"xb":{}}}]})",
            {R"({"b":1})", R"({"xb":"s"})", R"({"q":2})", R"({"b":1,"xb":"s"})"},
            {R"({"b":"s"})", R"({"xb":1})", R"({"q":"s"})"}},
       })
    CheckSchemaCase(c);
}

// The other member has patterns this one lacks: a key they match that this member neither lists nor matches
// takes this member's additionalProperties as well as the pattern's schema.
TEST(JsonSchemaAllOfPatterns, OtherMembersPatternsTakeThisMembersAdditional) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           // x1 is not a's and the first member has no pattern: an integer (first) of at least 5 (second).
           {R"({"allOf":[{"properties":{"a":{}},"additionalProperties":{"type":"integer"}},
                {"patternProperties":{"^x":{"minimum":5}}}]})",
            {R"({"x1":7})", R"({"a":"s"})", R"({"q":2})", R"({"a":"s","x1":5})"},
            {R"({"x1":3})", R"({"x1":"s"})", R"({"q":"s"})"}},
           // additionalProperties false: the first member allows a only, so no ^x key at all.
           {R"({"allOf":[{"properties":{"a":{}},"additionalProperties":false},{"patternProperties":{"^x":{}}}]})",
            {"{}", R"({"a":1})"}, {R"({"x1":1})", R"({"q":1})"}},
           // Both with patterns: ^a only (first), b anywhere only (second): a key matches both, as "ab".
           {R"({"allOf":[{"patternProperties":{"^a":{"type":"string"}},"additionalProperties":false},
                {"patternProperties":{"b":{"maxLength":2}},"additionalProperties":false}]})",
            {"{}", R"({"ab":"s"})", R"({"abc":"st"})"},
            {R"({"a":"s"})", R"({"b":"s"})", R"({"ab":1})", R"({"ab":"stu"})", R"({"ba":"s"})"}},
           // A key both members' patterns match takes both pattern schemas and neither additional schema:
           // first ^x strings and others integers, second x.*y at most 2 long and others at least 3 long.
           // xy: string (first) of length <= 2 (second); xq: string, and not matched by x.*y so >= 3 long
           // (second's additional); qy: matched by x.*y? no (no x), so integer (first) and >= 3 long (a
           // number: maxLength/minLength hold for every number).
           {R"({"allOf":[{"patternProperties":{"^x":{"type":"string"}},"additionalProperties":{"type":"integer"}},
                {"patternProperties":{"x.*y":{"maxLength":2}},"additionalProperties":{"minLength":3}}]})",
            {R"({"xy":"ab"})", R"({"xq":"abc"})", R"({"qy":1})", R"({"zxy":1})"},
            {R"({"xy":"abc"})", R"({"xq":"ab"})", R"({"xy":1})", R"({"qy":"abc"})", R"({"zxy":"ab"})"}},
       })
    CheckSchemaCase(c);
}

// A required name that only the other member's pattern matches takes this member's additionalProperties too:
// under additionalProperties false no object has it, so "o" cannot appear.
TEST(JsonSchemaAllOfPatterns, RequiredPatternedNameTakesTheGuard) {
  CheckSchemaCase({R"({"properties":{"o":{"allOf":[{"additionalProperties":false},
                      {"patternProperties":{"^x":{}},"required":["xy"]}]}}})",
                   {"{}"},
                   {R"({"o":{}})", R"({"o":{"xy":1}})"}});
  // With a schema instead: xy must be an integer (first) of at least 5 (second).
  CheckSchemaCase({R"({"allOf":[{"additionalProperties":{"type":"integer"}},
                      {"patternProperties":{"^x":{"minimum":5}},"required":["xy"]}]})",
                   {R"({"xy":5})", R"({"xy":9,"q":1})"},
                   {"{}", R"({"xy":"s"})", R"({"xy":4})"}});
}

// Three members: the first one's rule reaches names and patterns of the third as well.
TEST(JsonSchemaAllOfPatterns, ThreeMembers) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           // Every key of the first is an integer; xq (third) and ^x keys (second) too.
           {R"({"allOf":[{"additionalProperties":{"type":"integer"}},{"patternProperties":{"^x":{}}},
                {"properties":{"xq":{}}}]})",
            {R"({"xq":1})", R"({"xz":1})", R"({"q":1})"}, {R"({"xq":"s"})", R"({"xz":"s"})", R"({"q":"s"})"}},
           // The first allows a and ^p keys only: the second's ^x and the third's ^y add none.
           {R"({"allOf":[{"properties":{"a":{}},"patternProperties":{"^p":{}},"additionalProperties":false},
                {"patternProperties":{"^x":{}}},{"patternProperties":{"^y":{}}}]})",
            {R"({"a":1})", R"({"pz":1})", R"({"px":1})"}, {R"({"xz":1})", R"({"yz":1})", R"({"q":1})"}},
       })
    CheckSchemaCase(c);
}

// An enum under such an allOf keeps exactly its members that validate: the instance validator applies the
// same rule (x1 "s" fails the first member, x1 3 the second).
TEST(JsonSchemaAllOfPatterns, EnumMembersValidateTheSameWay) {
  CheckSchemaCase({R"({"allOf":[{"additionalProperties":{"type":"integer"}},{"patternProperties":{"^x":{"minimum":5}}}],
                      "enum":[{"x1":3},{"x1":7},{"x1":"s"},{"y":"s"},{"y":2}]})",
                   {R"({"x1":7})", R"({"y":2})"},
                   {R"({"x1":3})", R"({"x1":"s"})", R"({"y":"s"})"}});
}

// Its negation is not built: refused as `not`, never compiled as something that ignores the rule.
TEST(JsonSchemaAllOfPatterns, NegationRefusedOrExact) {
  const std::string schema = R"({"type":"object","not":{"allOf":[{"additionalProperties":{"type":"integer"}},
                                 {"patternProperties":{"^x":{"minimum":5}}}]}})";
  auto g = JsonSchemaToGrammar(schema);
  if (!g.ok()) {
    EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented) << g.status().ToString();
    return;
  }
  // Compiled: exactly the objects failing the allOf.
  CheckSchemaCase({schema, {R"({"x1":"s"})", R"({"x1":3})", R"({"q":"s"})"}, {R"({"x1":7})", "{}", R"({"q":1})"}});
}


// not {propertyNames: {not: {enum}}}: some key fails `not enum`, i.e. is one of the enum's strings (a number
// among them names no key).
TEST(JsonSchemaNotPropertyNames, SomeKeyFromTheEnum) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"type":"object","not":{"propertyNames":{"not":{"const":"0"}}}})",
            {R"({"0":1})", R"({"0":2,"a":1})"}, {"{}", R"({"a":1})", R"({"00":1})"}},
           {R"({"type":"object","not":{"propertyNames":{"not":{"enum":["1","3",5]}}}})",
            {R"({"1":true})", R"({"3":0})", R"({"1":1,"3":2})"}, {"{}", R"({"5":1})", R"({"2":1})"}},
           // Beside a pattern: a key failing either, so one not matching ^a or one of the enum's.
           {R"({"type":"object","not":{"propertyNames":{"pattern":"^a","not":{"enum":["ab"]}}}})",
            {R"({"b":1})", R"({"ab":1})"}, {"{}", R"({"ac":1})"}},
       })
    CheckSchemaCase(c);
}

// allOf [{$ref}] alone is the reference: a recursion through it (items of the same definition) compiles, and
// means what the definition means at every level.
TEST(JsonSchemaAllOfOne, RecursionThroughOneMember) {
  CheckSchemaCase({R"({"definitions":{"node":{"type":"object","properties":{"v":{"type":"integer"},
                      "kids":{"type":"array","items":{"allOf":[{"$ref":"#/definitions/node"}]}}},
                      "required":["v"],"additionalProperties":false}},
                      "allOf":[{"$ref":"#/definitions/node"}]})",
                   {R"({"v":1})", R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"},
                   {"{}", R"({"v":1,"kids":[{}]})", R"({"v":1,"kids":[{"v":2,"kids":[{"v":"s"}]}]})", R"({"v":1,"w":2})"}});
  // Beside members that only annotate (a title, true): the same.
  CheckSchemaCase({R"({"definitions":{"node":{"type":"object","properties":{"v":{"type":"integer"},
                      "next":{"allOf":[{"$ref":"#/definitions/node"},{"title":"next"},true]}},"required":["v"]}},
                      "$ref":"#/definitions/node"})",
                   {R"({"v":1})", R"({"v":1,"next":{"v":2,"next":{"v":3}}})"},
                   {"{}", R"({"v":1,"next":{}})", R"({"v":1,"next":{"v":2,"next":{"v":"s"}}})"}});
}

}  // namespace
}  // namespace deepinfer::grammar
