// JSON Schema coverage beyond merging: finite languages (an enum or const under any other keywords, which
// json_schema_validate.cpp evaluates member by member) and oneOf branches proven disjoint by an empty
// intersection. Expected strings are derived by hand from the standard, the reasoning in each comment
// (the same verdicts as `jsonschema.validate`).
#include <gtest/gtest.h>

#include "grammar/compiler.h"
#include "grammar/json_schema.h"
#include "schema_case.h"

namespace deepinfer::grammar {
namespace {

TEST(JsonSchemaFinite, EnumMembersMustPassEveryOtherKeyword) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
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
           // An enum merged from allOf with a length elsewhere: "abcd" is too long (used to be accepted).
           {R"({"allOf":[{"enum":["ab","abcd"]},{"maxLength":2}]})", {R"("ab")"}, {R"("abcd")"}},
           // Enums of 16 or more members, which the validator looks up by a value hash: numbers still compare
           // by value (1.0 and 5.0 exclude 1 and 5), the object member goes by Equal, and 0 stays (0.0 is
           // not excluded).
           {R"({"enum":[0,1,2,3,4,5,6,7,8,9,"s0","s1","s2","s3","s4","s5",1.5,true,null,{"a":1}],)"
            R"("not":{"enum":[1.0,3,5.0,7,9,"s0","s2","s4",true,"z1","z2","z3","z4","z5","z6",[1]]}})",
            {"0", "2", "4", "6", "8", R"("s1")", R"("s3")", R"("s5")", "1.5", "null", R"({"a":1})"},
            {"1", "3", "5", "7", "9", R"("s0")", R"("s2")", R"("s4")", "true", R"("z1")", "false"}},
           // An enum reached through an allOf member's $ref.
           {R"({"$defs":{"e":{"enum":["x","y"]}},"allOf":[{"$ref":"#/$defs/e"},{"not":{"const":"x"}}]})", {R"("y")"},
            {R"("x")"}},
       })
    CheckSchemaCase(c);
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
  CheckSchemaCase({R"({"allOf":[{"properties":{"a":{}},"additionalProperties":{"type":"string"}},{"properties":{"b":{}}}]})",
         {R"({"a":1,"b":"x"})", R"({"b":""})", R"({"a":[]})"}, {R"({"b":1})", R"({"a":1,"b":null})"}});
}

TEST(JsonSchemaOneOf, DisjointBranchesAreAnyOf) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
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
    CheckSchemaCase(c);
}

// Branches that may overlap: each one holds with the others it may meet negated (exactly one holds).
TEST(JsonSchemaOneOf, OverlappingBranchesAreMadeExclusive) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           // Strings meet the first branch; non-strings and non-empty strings the second: only "" is in the
           // first alone, and non-strings in the second alone.
           {R"({"oneOf":[{"type":"string"},{"minLength":1}]})", {R"("")", "1", "null", "{}"}, {R"("a")"}},
           // {"a":...} meets both; another non-empty object only the second; {} neither.
           {R"({"oneOf":[{"type":"object","required":["a"]},{"type":"object","minProperties":1}]})", {R"({"b":1})"},
            {"{}", R"({"a":1})", R"({"a":1,"b":2})"}},
           // Strings with an a or a b, not both.
           {R"({"oneOf":[{"type":"string","pattern":"a"},{"type":"string","pattern":"b"}]})", {R"("a")", R"("b")", R"("xa")"},
            {R"("ab")", R"("x")", "1"}},
       })
    CheckSchemaCase(c);
}

// A member's additionalProperties false also forbids the names another member's patterns match (where its
// own patterns do not): {"xa":1} matches "a" but not "^b", so the allOf rejects it; "ba" matches both, so it
// takes the integer schema of "a".
TEST(JsonSchemaAllOf, AdditionalPropertiesBesideAnotherMembersPatterns) {
  CheckSchemaCase({R"({"type":"object","allOf":[{"patternProperties":{"^b":true},"additionalProperties":false}],
                      "patternProperties":{"a":{"type":"integer"}}})",
                   {"{}", R"({"ba":1})", R"({"b":"s"})"},
                   {R"({"xa":1})", R"({"ba":"s"})", R"({"q":1})"}});
}

// Where a branch has no exact negation (an enum of arrays here), overlapping branches stay an error.
TEST(JsonSchemaOneOf, OverlapWithoutANegationIsAnError) {
  auto g = JsonSchemaToGrammar(R"({"oneOf":[{"enum":[[1],[2]]},{"type":"array","minItems":1}]})");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(g.status().message().find("oneOf"), std::string::npos) << g.status().ToString();
}

// Numeric bounds with a fraction compare as exact decimals: x >= 0.1 holds for 0.1, 0.10, 0.11 and 5, not
// for 0.09 or 0.0999; exclusive bounds drop the bound itself; negative ranges mirror the magnitude.
TEST(JsonSchemaNumbers, FractionalBounds) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"type":"number","minimum":0.1})", {"0.1", "0.10", "0.11", "0.2", "1", "5.5", "123"},
            {"0.09", "0.0999", "0", "-0.1", "0.01"}},
           {R"({"type":"number","minimum":0.01,"maximum":1.0})", {"0.01", "0.5", "1", "1.0", "0.010"},
            {"0.009", "1.01", "2", "0"}},
           {R"({"type":"number","exclusiveMinimum":0.5,"exclusiveMaximum":2.25})", {"0.51", "1", "2", "2.249"},
            {"0.5", "0.50", "2.25", "2.3", "0.4"}},
           {R"({"type":"number","minimum":-1.5,"maximum":-0.25})", {"-1.5", "-1", "-0.25", "-0.3", "-1.25"},
            {"-1.51", "-2", "-0.2", "0", "-0.24"}},
           {R"({"type":"number","minimum":-0.5,"maximum":0.5})", {"-0.5", "0", "0.0", "0.5", "-0.1"},
            {"-0.6", "0.51", "1", "-1"}},
           {R"({"type":"number","minimum":1e-09,"maximum":4.294967295})", {"0.000000001", "1", "4.294967295", "0.5"},
            {"0", "0.0000000009", "4.2949672951", "5"}},
       })
    CheckSchemaCase(c);
}

// not, lowered to the negation of its schema where that is exact.
TEST(JsonSchemaNot, ExactNegations) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           // not required: an object without k (required holds for non-objects, so they fail the not).
           {R"({"not":{"required":["k"]}})", {"{}", R"({"a":1})"}, {R"({"k":1})", "1", R"("s")"}},
           // not (cmd and args): objects with at most one of them.
           {R"({"type":"object","properties":{"cmd":{},"args":{}},"not":{"allOf":[{"required":["cmd"]},{"required":["args"]}]}})",
            {"{}", R"({"cmd":1})", R"({"args":2})"}, {R"({"cmd":1,"args":2})"}},
           // not pattern: strings without a match (non-strings meet the pattern, so they fail).
           {R"({"type":"string","not":{"pattern":"^[.,*\\s-]+$"}})", {R"("Bob")", R"("a.b")", R"("")"}, {R"("..")", R"("- ,")"}},
           // not of properties: an object whose "f" is a non-empty array.
           {R"({"type":"object","not":{"properties":{"f":{"maxItems":0}}}})", {R"({"f":[1]})"}, {"{}", R"({"f":[]})", R"({"f":1})"}},
           // not enum of strings and null: any other value; the string in canonical spelling only.
           {R"({"not":{"enum":["a",null,true]}})", {R"("b")", "false", "1", "[]"}, {R"("a")", "null", "true"}},
           // Two nots in one allOf: neither holds.
           {R"({"allOf":[{"not":{"type":"string"}},{"not":{"type":"null"}}]})", {"1", "true"}, {R"("s")", "null"}},
           // not of a length: strings shorter than 3 only.
           {R"({"not":{"minLength":3}})", {R"("ab")", R"("")"}, {R"("abc")", "1"}},
       })
    CheckSchemaCase(c);
}

// if/then/else as anyOf [allOf [if, then], allOf [not if, else]]; dependencies as "absent, or present and
// the dependency holds".
TEST(JsonSchemaConditional, IfThenElseAndDependencies) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           // kind "a" needs x; any other kind (or none, where the if holds vacuously) is as is.
           {R"({"type":"object","properties":{"kind":{"type":"string"},"x":{"type":"integer"}},)"
            R"("if":{"properties":{"kind":{"const":"a"}},"required":["kind"]},"then":{"required":["x"]},"else":{"not":{"required":["x"]}}})",
            {R"({"kind":"a","x":1})", R"({"kind":"b"})", "{}"}, {R"({"kind":"a"})", R"({"kind":"b","x":1})", R"({"x":1})"}},
           {R"({"type":"object","properties":{"a":{},"b":{}},"dependencies":{"a":["b"]}})", {"{}", R"({"b":1})", R"({"a":1,"b":2})"},
            {R"({"a":1})"}},
           {R"({"type":"object","properties":{"a":{},"b":{"type":"integer"}},"dependentSchemas":{"a":{"properties":{"b":{"minimum":5}}}}})",
            {R"({"a":1,"b":5})", R"({"b":1})", R"({"a":0})"}, {R"({"a":1,"b":4})"}},
           // then/else without if do nothing; propertyNames of type string says nothing keys do not.
           {R"({"then":false,"else":false,"propertyNames":{"type":"string"},"type":"object"})", {"{}", R"({"a":1})"}, {"1"}},
       })
    CheckSchemaCase(c);
}

// Dependencies that each only restrict one member (the tag) to listed values are split by the tag's value.
// Verdicts by hand: x goes with kind a, y with kind b or c, z with a or b; without a kind every member is
// allowed (the dependencies hold vacuously), with an unlisted kind (d, or a number) none of x, y, z is.
TEST(JsonSchemaConditional, DependenciesOnOneTagBySplittingOnItsValue) {
  const std::string schema =
      R"({"type":"object","additionalProperties":false,"properties":{"kind":{"enum":["a","b","c","d",1]},)"
      R"("x":{"type":"integer"},"y":{"type":"integer"},"z":{"type":"integer"}},"dependencies":{)"
      R"("x":{"properties":{"kind":{"const":"a"}},"description":"only for a"},)"
      R"("y":{"properties":{"kind":{"enum":["b","c"]}}},"z":{"properties":{"kind":{"enum":["a","b"]}}}}})";
  CheckSchemaCase({schema,
                   {"{}", R"({"x":1,"y":2,"z":3})", R"({"kind":"a","x":1,"z":3})", R"({"kind":"b","y":2,"z":3})",
                    R"({"kind":"c","y":2})", R"({"kind":"d"})", R"({"kind":1})"},
                   {R"({"kind":"b","x":1})", R"({"kind":"a","y":1})", R"({"kind":"c","z":1})", R"({"kind":"d","x":1})",
                    R"({"kind":1,"y":1})", R"({"kind":"e"})", R"({"kind":"a","w":1})"}});
}

// Twenty such dependencies: one anyOf per dependency multiplied out to 2^20 branches and ran past the
// translation's time limit; split by the tag there are 22 cells.
TEST(JsonSchemaConditional, ManyDependenciesOnOneTagCompile) {
  std::string props = R"("kind":{"type":"string"})", deps;
  for (int i = 0; i < 20; ++i) {
    const std::string m = "m" + std::to_string(i);
    props += ",\"" + m + "\":{\"type\":\"boolean\"}";
    deps += std::string(i ? "," : "") + "\"" + m + R"(":{"properties":{"kind":{"enum":["k)" + std::to_string(i) + "\"]}}}";
  }
  CheckSchemaCase({R"({"type":"object","additionalProperties":false,"properties":{)" + props + R"(},"dependencies":{)" +
                       deps + "}}",
                   {R"({"kind":"k3","m3":true})", R"({"m3":true,"m7":false})", R"({"kind":"k19"})"},
                   {R"({"kind":"k3","m4":true})", R"({"kind":"other","m0":true})"}});
}

// oneOf of branches that only require names: exactly one branch's names all present.
TEST(JsonSchemaOneOf, ExactlyOneOfRequiredNames) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"type":"object","properties":{"login":{"type":"string"},"password":{"type":"string"}},)"
            R"("oneOf":[{"required":["login"]},{"required":["password"]}]})",
            {R"({"login":"a"})", R"({"password":"b"})"}, {"{}", R"({"login":"a","password":"b"})"}},
           // Untyped: a non-object meets both branches, so it fails.
           {R"({"oneOf":[{"required":["a"]},{"required":["b"]}]})", {R"({"a":1})", R"({"b":1,"c":2})"}, {"1", "{}", R"({"a":1,"b":2})"}},
           // Two names each: length and width, or base and height, not all four.
           {R"({"type":"object","properties":{"l":{},"w":{},"b":{},"h":{}},"oneOf":[{"required":["l","w"]},{"required":["b","h"]}]})",
            {R"({"l":1,"w":2})", R"({"l":1,"w":2,"b":3})", R"({"b":3,"h":4})"}, {R"({"l":1,"w":2,"b":3,"h":4})", R"({"l":1})"}},
       })
    CheckSchemaCase(c);
}

// Fixes checked against jsonschema (Draft7Validator / Draft202012Validator.is_valid, and
// FormatChecker for "date", which asks datetime.date.fromisoformat).
TEST(JsonSchemaFixes, DraftRefsDatesAndOverlappingPatterns) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           // Draft 7: maxItems beside $ref does nothing, so [1,2,3] is valid; 2020-12 applies both.
           {R"({"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"type":"array"}},)"
            R"("properties":{"f":{"$ref":"#/definitions/a","maxItems":2}}})",
            {R"({"f":[1,2,3]})"}, {R"({"f":"s"})"}},
           {R"({"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"a":{"type":"array"}},)"
            R"("properties":{"f":{"$ref":"#/$defs/a","maxItems":2}}})",
            {R"({"f":[1,2]})"}, {R"({"f":[1,2,3]})"}},
           // Days per month and leap years: 2024 is one, 1900 is not (a century), 2000 is (by 400); no year 0.
           {R"({"type":"string","format":"date"})",
            {R"("2024-02-29")", R"("2000-02-29")", R"("2023-04-30")", R"("2023-12-31")", R"("0001-01-01")"},
            {R"("2023-02-29")", R"("1900-02-29")", R"("2024-02-30")", R"("2023-04-31")", R"("0000-01-01")"}},
           {R"({"type":"string","format":"date-time"})", {R"("2024-02-29T10:00:00Z")", R"("2024-02-29t10:00:00z")"},
            {R"("2023-02-29T10:00:00Z")", R"("2024-02-29 10:00:00Z")"}},
           // "aaaa" matches both patterns, so it takes both schemas: integer and at most 20 (and "a*", unanchored,
           // matches every key: "b" must be an integer too).
           {R"({"patternProperties":{"a*":{"type":"integer"},"aaa*":{"maximum":20}}})",
            {R"({"aaaa":18})", R"({"a":21})", R"({"a":21,"aaaa":18})", R"({"b":1})"},
            {R"({"aaaa":31})", R"({"aaa":"foo"})", R"({"a":"bar"})", R"({"b":"x"})"}},
           // Listed names that each match three patterns take all three schemas (six merged schemas for two
           // names: they used to live in a vector that could move under the pointers to them).
           {R"({"properties":{"aaa":{},"aab":{}},"patternProperties":{"a":{"minimum":1},"aa":{"maximum":5},"^a":{"type":"integer"}}})",
            {R"({"aaa":3,"aab":5})", R"({"aab":1})"}, {R"({"aaa":0})", R"({"aab":6})", R"({"aaa":2.5})", R"({"aac":9})"}},
           // A required name no property lists but a pattern matches takes the pattern's schema, not the
           // additional one (false here: it was rejected).
           {R"({"required":["xa"],"patternProperties":{"^x":{"type":"integer"}},"additionalProperties":false})", {R"({"xa":1})"},
            {R"({"xa":"s"})", "{}", R"({"xa":1,"b":2})"}},
           // Three patterns: "xy" matches ^x and y$ (both schemas), "xz" only ^x, "zy" only y$, "q" neither.
           {R"({"patternProperties":{"^x":{"type":"integer"},"y$":{"minimum":5},"^q$":{"type":"string"}},"additionalProperties":false})",
            {R"({"xy":5})", R"({"xz":1})", R"({"zy":7.5})", R"({"q":"s"})"},
            {R"({"xy":4})", R"({"xy":5.5})", R"({"zy":4})", R"({"q":1})", R"({"z":1})"}},
       })
    CheckSchemaCase(c);
}

// Verdicts from jsonschema (Draft202012Validator; Draft7Validator for dependencies).
TEST(JsonSchemaCoverage, RecursiveAnyOfConditionalsAndOneOf) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           // anyOf of a recursive $ref: the branch stays a rule (it was inlined until the depth limit).
           {R"({"$defs":{"n":{"type":"object","properties":{"k":{"type":"array","items":{"anyOf":[{"$ref":"#/$defs/n"},)"
            R"({"type":"integer"}]}}}}},"$ref":"#/$defs/n"})",
            {R"({"k":[1,{"k":[2,{"k":[]}]}]})", "{}"}, {R"({"k":["x"]})", R"({"k":[{"k":["x"]}]})"}},
           // Two ifs on the value of "kind": absent, both hold (x and y needed); "a" needs x and forbids y
           // (the second if's else); "b" needs y; other values fail the enum.
           {R"({"type":"object","properties":{"kind":{"enum":["a","b"]},"x":{},"y":{}},"allOf":[)"
            R"({"if":{"properties":{"kind":{"const":"a"}}},"then":{"required":["x"]}},)"
            R"({"if":{"properties":{"kind":{"const":"b"}}},"then":{"required":["y"]},"else":{"not":{"required":["y"]}}}]})",
            {R"({"kind":"a","x":1})", R"({"kind":"b","y":1})", R"({"x":1,"y":2})"},
            {"{}", R"({"kind":"a","x":1,"y":1})", R"({"kind":"a"})", R"({"kind":"b"})", R"({"kind":"c","x":1})"}},
           // ifs with required: non-objects meet both ifs and both thens (required holds vacuously).
           {R"({"allOf":[{"if":{"required":["a"]},"then":{"required":["b"]}},)"
            R"({"if":{"properties":{"t":{"const":"x"}},"required":["t"]},"then":{"required":["c"]}}]})",
            {"5", R"({"a":1,"b":2})", R"({"t":"x","c":0})", R"({"t":"y"})", "{}"},
            {R"({"a":1})", R"({"t":"x"})", R"({"a":1,"b":1,"t":"x"})"}},
           // The negation of dependencies: non-objects meet only the second branch; {} meets both.
           {R"({"oneOf":[{"not":{"required":["x"]}},{"dependencies":{"x":false}}]})", {"1", R"("s")", "[]"},
            {"{}", R"({"x":1})"}},
           // Branch 0 lies inside branch 1 (so it adds nothing), branch 2 is closed and meets neither.
           {R"({"oneOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a","b"]},)"
            R"({"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},)"
            R"({"type":"object","required":["c"],"properties":{"c":{"type":"integer"}},"additionalProperties":false}]})",
            {R"({"a":"x"})", R"({"c":1})", R"({"a":"x","c":1})"}, {R"({"a":"x","b":1})", R"({"a":1})", R"({"c":"s"})"}},
       })
    CheckSchemaCase(c);
}

// propertyNames with a pattern, lengths and enum/const (verdicts from jsonschema's Draft202012Validator).
TEST(JsonSchemaCoverage, PropertyNames) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           // Listed "ab" fails the pattern, so it cannot appear; other keys are numbers of at most 3 digits.
           {R"({"type":"object","properties":{"12":{"type":"integer"},"ab":{}},)"
            R"("propertyNames":{"pattern":"^[1-9][0-9]*$","maxLength":3},"additionalProperties":{"type":"string"}})",
            {R"({"12":1,"5":"x"})", R"({"999":"x"})", "{}"},
            {R"({"ab":1})", R"({"1234":"x"})", R"({"05":"x"})", R"({"5":1})"}},
           // A required name the names reject: no object validates; other values do.
           {R"({"required":["ab"],"propertyNames":{"maxLength":1}})", {"1", R"("s")"}, {R"({"ab":1})", "{}"}},
           // Two propertyNames in allOf: keys start with a and end with b.
           {R"({"allOf":[{"propertyNames":{"pattern":"^a"}},{"propertyNames":{"pattern":"b$"}}]})", {R"({"ab":1})", R"({"axb":1})"},
            {R"({"a":1})", R"({"b":1})"}},
           // enum: keys are its strings only (1 names no key; "NS" is no member).
           {R"({"type":"object","propertyNames":{"enum":["N","S",1]},"additionalProperties":{"type":"integer"}})",
            {"{}", R"({"N":1})", R"({"S":2,"N":3})"}, {R"({"E":1})", R"({"N":"x"})", R"({"1":1})", R"({"NS":1})"}},
           // Through a $ref; the listed "x" is no member, so it cannot appear.
           {R"({"type":"object","properties":{"x":{}},"propertyNames":{"$ref":"#/definitions/d"},)"
            R"("definitions":{"d":{"type":"string","enum":["a","b"]}}})",
            {R"({"a":1})", R"({"b":null,"a":2})", "{}"}, {R"({"x":1})", R"({"c":1})", R"({"a":1,"x":2})"}},
           {R"({"propertyNames":{"const":"k"}})", {R"({"k":1})", "{}", "1"}, {R"({"j":1})", R"({"k":1,"kk":2})"}},
           // enum and pattern both hold.
           {R"({"propertyNames":{"enum":["ab","ba","c"],"pattern":"^a"}})", {R"({"ab":1})", "{}"}, {R"({"ba":1})", R"({"c":1})", R"({"a":1})"}},
       })
    CheckSchemaCase(c);
}

// oneOf of optional members with different values (verdicts from jsonschema's Draft202012Validator): {}
// meets all three branches; "c" present decides alone (each branch's c values meet no other's), so the
// exclusions factor into "c present, or s outside the others' values".
TEST(JsonSchemaCoverage, OneOfFactorsSharedCasesAndDraftTuples) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"type":"object","oneOf":[{"properties":{"c":{"enum":["B"]},"s":{"enum":["x","y"]}}},)"
            R"({"properties":{"c":{"enum":["I"]},"s":{"enum":["y","z"]}}},{"properties":{"c":{"enum":["M"]},"s":{"enum":["z"]}}}]})",
            {R"({"c":"B"})", R"({"s":"x"})", R"({"c":"I","s":"y"})", R"({"c":"M"})", R"({"c":"B","s":"x"})"},
            {"{}", R"({"s":"y"})", R"({"s":"z"})", R"({"c":"B","s":"z"})", R"({"c":"Q"})"}},
           // Lengths that do not meet make branches disjoint.
           {R"({"oneOf":[{"type":"string","maxLength":2},{"type":"string","minLength":3}]})", {R"("ab")", R"("abc")"}, {"1"}},
           // additionalItems without tuple items means nothing, so it merges with another member's items.
           {R"({"$schema":"http://json-schema.org/draft-07/schema#","allOf":[{"type":"array","items":{"type":"number"},)"
            R"("additionalItems":false},{"items":{"minimum":0}}]})",
            {"[1,2]", "[]"}, {"[-1]", R"(["a"])"}},
       })
    CheckSchemaCase(c);
}

// anyOf lists under allOf that share a case: (n ∨ A) ∧ (n ∨ B) ∧ ... = n ∨ (A ∧ B ∧ ...). Fourteen lists,
// as the negations of fourteen oneOf branches with enum members give (distributed one list at a time they
// are 2^14 merges; factored, two alternatives). Numbers, or strings none of the lists excludes (k0..k13);
// other types meet no list.
TEST(JsonSchemaCoverage, SharedCasesOfAnyOfListsFactorOut) {
  std::string lists;
  for (int i = 0; i < 14; ++i)
    lists += std::string(i ? "," : "") + R"({"anyOf":[{"type":"number"},{"type":"string","not":{"enum":["k)" +
             std::to_string(i) + R"("]}}]})";
  CheckSchemaCase({R"({"allOf":[)" + lists + "]}", {"1", "-2.5", R"("a")", R"("k14")", R"("k1x")"},
                   {R"("k0")", R"("k7")", R"("k13")", "null", "true", "{}", "[]"}});
  // A case in every list but one does not factor; the language stays the same.
  CheckSchemaCase({R"({"allOf":[{"anyOf":[{"type":"number"},{"enum":["a","b"]}]},{"anyOf":[{"type":"number"},)"
                   R"({"enum":["b","c"]}]},{"anyOf":[{"type":"boolean"},{"enum":["b","d"]}]}]})",
                   {R"("b")"}, {"1", "true", R"("a")", R"("c")", R"("d")", "null"}});
}

// contains (one kind of element, counts split around the witness), and the negations it gives: not items
// (an element that fails them) and not contains (every element fails it). Verdicts from jsonschema.
TEST(JsonSchemaCoverage, Contains) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"type":"array","items":{"type":"integer"},"contains":{"minimum":5},"maxItems":3})", {"[5]", "[1,2,6]", "[6,1,2]"},
            {"[1,2]", "[1,2,3,6]", "[]", "[5.5]"}},
           {R"({"contains":{"const":1},"minItems":3})", {"[1,2,3]", "[2,2,1]", "[2,1,2,2]"}, {"[1,1]", "[2,2,2]"}},
           {R"({"not":{"items":{"type":"string"}}})", {"[1]", R"(["a",1])"}, {R"(["a"])", "[]", "1"}},
           {R"({"not":{"contains":{"type":"null"}}})", {"[]", "[1]"}, {"[null]", "[1,null]", R"("s")"}},
           // oneOf through the negation of items: [] meets only the first branch, [1] only the second.
           {R"({"oneOf":[{"type":"array","items":{"type":"string"}},{"type":"array","minItems":1}]})", {"[]", "[1]"},
            {R"(["a"])", "1"}},
       })
    CheckSchemaCase(c);
}

// Several kinds of element (contains in two allOf members, three, and contains beside a negated items): each
// kind needs an element, one element may serve several, in any order, with the other elements counted
// within min/maxItems. Verdicts derived by hand, each checked with jsonschema's Draft202012Validator.
TEST(JsonSchemaCoverage, ContainsSeveralKinds) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           // A string and an integer somewhere, in either order; 1.5 is no integer.
           {R"({"type":"array","allOf":[{"contains":{"type":"string"}},{"contains":{"type":"integer"}}]})",
            {R"(["a",1])", R"([1,"a"])", R"([null,1,true,"x"])", R"([1,2,"a"])"}, {"[]", R"(["a"])", "[1,2]", "[null]", R"(["a","b",1.5])"}},
           // 6 meets both kinds alone; 9 only >= 5, 1 only <= 7; items still apply to every element.
           {R"({"type":"array","items":{"type":"integer"},"allOf":[{"contains":{"minimum":5}},{"contains":{"maximum":7}}]})",
            {"[6]", "[1,9]", "[9,1]", "[3,6,9]"}, {"[9]", "[1]", "[]", "[8,9]", R"([6,"a"])"}},
           // No element is both 1 and 2: two witnesses, so maxItems 2 leaves no room for a third element.
           {R"({"type":"array","maxItems":2,"allOf":[{"contains":{"const":1}},{"contains":{"const":2}}]})", {"[1,2]", "[2,1]"},
            {"[1,2,3]", "[1,3]", "[1]", "[3,1,2]"}},
           // Exactly three elements: one other element before, between or after the witnesses.
           {R"({"type":"array","minItems":3,"maxItems":3,"allOf":[{"contains":{"const":1}},{"contains":{"const":2}}]})",
            {"[1,0,2]", "[0,1,2]", "[2,1,0]", "[1,2,2]"}, {"[1,2]", "[1,2,0,0]", "[0,0,1]"}},
           // At least four: two others anywhere around the witnesses.
           {R"({"type":"array","minItems":4,"allOf":[{"contains":{"const":1}},{"contains":{"const":2}}]})",
            {"[1,0,0,2]", "[0,0,1,2]", "[2,1,0,0,0]"}, {"[1,0,2]", "[1,2]", "[0,0,0,1]"}},
           // Three kinds, any order.
           {R"({"type":"array","allOf":[{"contains":{"type":"string"}},{"contains":{"type":"null"}},{"contains":{"type":"boolean"}}]})",
            {R"([true,null,"a"])", R"(["a",1,null,false])", R"([null,"a",true])"}, {R"(["a",null])", "[true,false,null]", "[]"}},
           // not items: some element neither a string nor null, beside a string.
           {R"({"type":"array","contains":{"type":"string"},"not":{"items":{"type":["string","null"]}}})",
            {R"(["a",1])", R"([1,"a"])", R"(["a",null,{}])"}, {R"(["a",null])", "[1]", "[]", R"(["a"])"}},
       })
    CheckSchemaCase(c);
}

// Two negations that each need a member, without maxProperties 1: each is met by a listed property or by
// one of the other members, the same member or two apart, in either order. Patterns are unanchored, so
// "ab" meets both. Verdicts derived by hand, each checked with jsonschema's Draft202012Validator.
TEST(JsonSchemaCoverage, TwoNegationsThatNeedAMemberEach) {
  const std::string both = R"("allOf":[{"not":{"patternProperties":{"a":{"type":"string"}}}},)"
                           R"({"not":{"patternProperties":{"b":{"type":"string"}}}}])";
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"type":"object",)" + both + "}",
            {R"({"a":1,"b":2})", R"({"b":2,"a":1})", R"({"ab":1})", R"({"x":"s","a":1,"y":"t","b":null,"z":0})"},
            {"{}", R"({"a":1})", R"({"a":1,"b":"s"})", R"({"ab":"s"})", R"({"a":"s","b":1})", "[]"}},
           // Listed properties serve as witnesses too (a1 still an integer).
           {R"({"type":"object","properties":{"a1":{"type":"integer"},"b1":{}},)" + both + "}",
            {R"({"a1":1,"b1":2})", R"({"a1":1,"b":true})", R"({"b1":null,"a":0})", R"({"a":1,"b":2})"},
            {R"({"a1":1})", R"({"a1":1,"b1":"s"})", R"({"a1":"s","b":1})", R"({"b1":"s","a":1})"}},
           // minProperties 2: one member meeting both is not enough alone.
           {R"({"type":"object","minProperties":2,)" + both + "}", {R"({"a":1,"b":2})", R"({"ab":1,"c":"s"})", R"({"c":"s","ab":1})"},
            {R"({"ab":1})", R"({"a":1})"}},
       })
    CheckSchemaCase(c);
  // Under maxProperties 3 the members apart would need counting: still refused, naming the keyword.
  auto g = JsonSchemaToGrammar(R"({"type":"object","maxProperties":3,)" + both + "}");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(g.status().message().find("not (of two object keywords"), std::string::npos) << g.status().message();
}

// Negations that need a member of some kind (additionalProperties, patternProperties, propertyNames): the
// member is a listed property or one of the others, before or after the rest, within maxProperties; and
// the negation of type integer (numbers with a fraction). Verdicts from jsonschema's Draft202012Validator.
TEST(JsonSchemaCoverage, NegationsThatNeedAMember) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"type":"object","properties":{"a":{}},"not":{"properties":{"a":{}},"additionalProperties":false}})",
            {R"({"a":1,"b":2})", R"({"b":2})"}, {R"({"a":1})", "{}"}},
           {R"({"not":{"patternProperties":{"^x":{"type":"string"}}},"maxProperties":2})",
            {R"({"xa":1})", R"({"b":1,"xa":2})", R"({"xa":1,"b":"s"})"}, {R"({"xa":"s"})", "{}", R"({"b":1,"c":2,"xa":3})", "1"}},
           {R"({"type":"object","properties":{"xa":{"type":"integer"}},"not":{"patternProperties":{"^x":{"type":"string"}}}})",
            {R"({"xa":1})", R"({"xb":true})"}, {"{}", R"({"xb":"s"})"}},
           {R"({"not":{"propertyNames":{"pattern":"^a"}}})", {R"({"b":1})", R"({"a":1,"b":2})"}, {R"({"a":1})", "{}", "1"}},
           {R"({"not":{"type":"integer"}})", {"1.5", "-0.05", R"("s")"}, {"1", "1.0", "2"}},
           // Two member-needing negations under maxProperties 1: the one member meets both (a and b in its key).
           {R"({"type":"object","maxProperties":1,"allOf":[{"not":{"propertyNames":{"not":{"pattern":"a"}}}},)"
            R"({"not":{"propertyNames":{"not":{"pattern":"b"}}}}]})",
            {R"({"ab":1})", R"({"xba":2})"}, {R"({"a":1})", R"({"a":1,"b":2})", "{}"}},
           // ^ inside a group that is a whole alternative.
           {R"({"type":"string","pattern":"(^[^5]*$)|7"})", {R"("abc")", R"("a57")"}, {R"("a5")", R"("5")"}},
       })
    CheckSchemaCase(c);
}

// Formats against the JSON-Schema-Test-Suite's optional/format verdicts (draft 2020-12) and the RFC
// grammars they cite: durations (RFC 3339 appendix A: years then days need months between), email
// (RFC 5321 quoted local parts and address literals), IPv6 (RFC 3986, IPv4 in the last 32 bits), URI
// (RFC 3986: percent-encoding, numeric ports, brackets only around an IP literal), URI references, IRIs
// (RFC 3987), URI templates (RFC 6570) and JSON pointers (RFC 6901).
TEST(JsonSchemaFormats, RfcGrammars) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"type":"string","format":"duration"})", {R"("P1Y2M3D")", R"("PT1H2M3S")", R"("P4W")", R"("P1D")"},
            {R"("P1Y2D")", R"("PT1H2S")", R"("P")", R"("PT")"}},
           {R"({"type":"string","format":"email"})",
            {R"("joe.bloggs@example.com")", R"("\"joe bloggs\"@example.com")", R"("joe.bloggs@[127.0.0.1]")", R"("joe.bloggs@[IPv6:::1]")"},
            {R"("2962")", R"("joe.@example.com")", R"("joe.bloggs@[300.0.0.1]")"}},
           {R"({"type":"string","format":"ipv6"})", {R"("::1")", R"("1000:1000:1000:1000:1000:1000:255.255.255.255")", R"("::ffff:192.168.0.1")"},
            {R"("12345::")", R"("1:2:3:4:5:6:7:8:9")", R"("::ffff:01.2.3.4")", R"("1::2::3")"}},
           {R"({"type":"string","format":"uri"})", {R"("http://example.com/a%20b?q=1#f")", R"("urn:isbn:0451450523")", R"("http://[::1]:80/")"},
            {R"("http://example.com/%")", R"("http://example.com:abc/path")", R"("http:/[::1]")", R"("//foo.bar")", R"("http://[::ffff:01.2.3.4]")"}},
           // A relative reference's first segment holds no ":" (it would read as a scheme).
           {R"({"type":"string","format":"uri-reference"})", {R"("//foo.bar/?baz=qux#quux")", R"("/abc")", R"("a/b:c")", R"("#f")", R"("")"},
            {R"("://")", R"("\\\\WINDOWS\\fileshare")", R"("#frag\\ment")", R"("a b")"}},
           // RFC 3987: an IRI's unreserved characters include ucschar (é, U+1F600 outside the BMP), iprivate only
           // in the query.
           {R"({"type":"string","format":"iri"})", {R"("http://ƒøø.ßår/?∂éœ=πîx#πîüx")", R"("http://example.com/😀")", "\"http://a/?\uE000\""},
            {R"("not-an-iri")", R"("/abc")", "\"http://a/\uE000\"", R"("http://a b")"}},
           {R"({"type":"string","format":"iri-reference"})", {R"("//ƒøø.ßår/?∂éœ=πîx#πîüx")", R"("/âππ")", R"("http://a/é")"},
            {R"("\\\\WINDOWS\\filëßåré")", R"("#€π»\\")", R"(":a")"}},
           // RFC 6570: expressions close, their operators are the defined ones, a prefix is 1-9999.
           {R"({"type":"string","format":"uri-template"})",
            {R"("http://example.com/dictionary/{term:1}/{term}")", R"("{+path}/x{?a,b*}")", R"("{a.b,c_d}")", R"("no-expressions")"},
            {R"("http://example.com/resource/{")", R"("http://example.com/dictionary/{term:1}/{term")", R"("{=a}")", R"("{a:0}")",
             R"("{a:10000}")", R"("{a..b}")", R"("x}")"}},
           {R"({"type":"string","format":"json-pointer"})", {R"("")", R"("/foo/0")", R"("/a~1b/m~0n")", R"("/")"},
            {R"("foo")", R"("/foo/~")", R"("/~2")"}},
       })
    CheckSchemaCase(c);
}

}  // namespace
}  // namespace deepinfer::grammar
