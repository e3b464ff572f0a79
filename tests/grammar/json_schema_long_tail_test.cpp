// JSON Schema keywords of the benchmark's long tail: `integer` as integer literals only, uniqueItems
// (exact over a finite set of scalar items; beside tuple items or contains refused naming the keyword and
// the schema's JSON pointer; other items are checked by the matcher, unique_items_test.cpp), and look-aheads
// at the start of a pattern. Expected verdicts are derived by hand from the standard, the reasoning in each
// comment.
#include <gtest/gtest.h>

#include "grammar/compiler.h"
#include "grammar/json_schema.h"
#include "schema_case.h"

namespace deepinfer::grammar {
namespace {

TEST(JsonSchemaIntegers, IntegerLiteralsOnly) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           // -?(0|[1-9][0-9]*): no fraction (35.0 and 35.000 are integers to draft 6+, not to a typed int
           // field), no exponent.
           {R"({"type":"integer"})", {"35", "-7", "0", "12345678901234567890"}, {"35.0", "35.000", "1e2", "1E2", "01", "3.5"}},
           // Draft 4 calls 12345.0 no integer at all: rejected there too.
           {R"({"$schema":"http://json-schema.org/draft-04/schema#","type":"integer","maximum":100000})",
            {"12345", "-3"}, {"12345.0", "100001"}},
           // Bounds and multipleOf as before, on literals: 10, 20, 30 are the multiples of 10 in [5, 30].
           {R"({"type":"integer","minimum":5,"maximum":30,"multipleOf":10})", {"10", "20", "30"}, {"10.0", "0", "40", "15"}},
           {R"({"type":"integer","exclusiveMinimum":0,"maximum":126})", {"1", "35", "126"}, {"0", "126.0", "35.0", "127"}},
           // A type list with integer: the integer part spells literals, the string part strings.
           {R"({"type":["integer","string"]})", {"3", R"("3.0")"}, {"3.0"}},
           // `number` keeps JSON's full syntax: fraction, exponent, and the integral spelling 3.0.
           {R"({"type":"number"})", {"35", "35.0", "1e2", "-1.5E-3"}, {"01", ".5", "1."}},
           // A number that must be integral (multipleOf 1) may still be written 3.0, as JSON's numbers allow.
           {R"({"type":"number","multipleOf":1})", {"3", "3.0"}, {"3.5"}},
       })
    CheckSchemaCase(c);
}

// Bounds past 10^18 are exact up to 2^64: 9223372036854776000 is the double 2^63 = 9223372036854775808, so
// 9223372036854775809 and 9223372036854776001 are above it (a bound read as none let them through).
TEST(JsonSchemaNumbers, HugeBoundsHold) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"type":"integer","minimum":0,"maximum":9223372036854776000})",
            {"0", "9223372036854775808", "1643723400"}, {"9223372036854775809", "9223372036854776001", "-1"}},
           {R"({"type":"integer","minimum":-9223372036854775808})", {"-9223372036854775808", "5"}, {"-9223372036854775809"}},
           // Past 2^64 the largest magnitude is 2^64 - 1: a subset of the valid integers, never more.
           {R"({"type":"integer","maximum":1.79769e308})", {"18446744073709551615", "-3"}, {"18446744073709551616"}},
           // Beside a fractional bound: [0.5, 10^19].
           {R"({"type":"number","minimum":0.5,"maximum":1e19})", {"0.5", "10000000000000000000", "3.25"},
            {"10000000000000000001", "10000000000000000000.5", "0.25"}},
       })
    CheckSchemaCase(c);
  auto refused = JsonSchemaToGrammar(R"({"type":"integer","minimum":1e20})");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnimplemented) << refused.status().ToString();
}

// A number bounded on one side at zero (or beyond it) keeps the exponent spelling on its allowed side: the
// sign decides, so 1e-06 >= 0 and -1e-06 <= 0; with zero excluded the mantissa needs a nonzero digit (0e5 is
// zero). Bounded on both sides it is spelled without exponent (0.000001).
TEST(JsonSchemaNumbers, OneSidedZeroBoundKeepsExponents) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"type":"number","minimum":0})", {"1e-06", "0.5E+3", "0e5", "3", "2.5"}, {"-1e-06", "-1", "1e", "1.e3"}},
           {R"({"type":"number","exclusiveMinimum":0})", {"1e-06", "0.01e2", "7"}, {"0e5", "0.0e1", "-2e1", "0"}},
           {R"({"type":"number","minimum":-5})", {"1e3", "-5", "-4.5"}, {"-1e1", "-6"}},
           {R"({"type":"number","maximum":0})", {"-1e-06", "-0e1", "0", "-3"}, {"1e-06", "1"}},
           {R"({"type":"number","minimum":0,"maximum":1})", {"0.000001", "1"}, {"1e-06", "2"}},
           {R"({"type":"integer","minimum":0})", {"1000000"}, {"1e6"}},
       })
    CheckSchemaCase(c);
}

TEST(JsonSchemaUniqueItems, ExactOverFiniteScalarItems) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           // Any order of distinct members; a repeat anywhere is out.
           {R"({"type":"array","items":{"enum":["a","b","c"]},"uniqueItems":true})",
            {"[]", R"(["a"])", R"(["b","a"])", R"(["c","a","b"])"},
            {R"(["a","a"])", R"(["a","b","a"])", R"(["a","b","c","a"])", R"(["d"])"}},
           // Booleans: at most two items, so minItems 2 leaves the two orders of true and false.
           {R"({"type":"array","items":{"type":"boolean"},"uniqueItems":true,"minItems":2})",
            {"[true,false]", "[false,true]"}, {"[true]", "[true,true]", "[true,false,true]"}},
           // A small integer range (1..3) with maxItems 2.
           {R"({"type":"array","items":{"type":"integer","minimum":1,"maximum":3},"uniqueItems":true,"maxItems":2})",
            {"[3,1]", "[2]", "[]"}, {"[1,1]", "[1,2,3]", "[4]"}},
           // Equal by value: 1 and 1.0 are the same item, so no array holds both.
           {R"({"type":"array","items":{"enum":[1,1.0,2]},"uniqueItems":true})",
            {"[1,2]", "[1.0,2]", "[2,1]"}, {"[1,1.0]", "[1.0,1]", "[2,2]"}},
           // The enum's members that fail the items' other keywords are no items: "bb" is longer than 1.
           {R"({"type":"array","items":{"enum":["a","bb","c"],"maxLength":1},"uniqueItems":true})",
            {R"(["c","a"])"}, {R"(["bb"])", R"(["c","c"])"}},
           // Under a property, and with uniqueItems false nothing changes.
           {R"({"type":"object","properties":{"t":{"type":"array","items":{"const":"x"},"uniqueItems":true},"u":{"type":"array","uniqueItems":false}},"required":["t"],"additionalProperties":false})",
            {R"({"t":["x"],"u":[1,1]})", R"({"t":[]})"}, {R"({"t":["x","x"]})"}},
       })
    CheckSchemaCase(c);
}

TEST(JsonSchemaUniqueItems, TupleItemsAndContainsAreRefusedWithTheirPointer) {
  struct Refused {
    std::string schema, pointer;
  };
  for (const Refused& r : std::vector<Refused>{
           {R"({"type":"array","prefixItems":[{"const":1},{"const":1}],"items":false,"uniqueItems":true})", "at # "},
           {R"({"type":"object","properties":{"t":{"type":"array","contains":{"type":"string"},"uniqueItems":true}}})",
            "at #/properties/t "},
       }) {
    auto g = JsonSchemaToGrammar(r.schema);
    ASSERT_FALSE(g.ok()) << r.schema;
    EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented) << r.schema;
    EXPECT_NE(g.status().message().find("'uniqueItems"), std::string::npos) << g.status().message();
    EXPECT_NE(g.status().message().find(r.pointer), std::string::npos) << g.status().message();
  }
  // One item at most: nothing to repeat, whatever the items are.
  CheckSchemaCase({R"({"type":"array","items":{"type":"string"},"uniqueItems":true,"maxItems":1})",
                   {"[]", R"(["a"])"}, {R"(["a","a"])"}});
}

// A pattern's look-aheads right after `^` test the whole string (it begins, or does not begin, with their
// match); elsewhere they stay refused, naming the look-ahead. Verdicts derived by hand, each checked with
// jsonschema (Python re agrees with ECMA 262 on these patterns).
TEST(JsonSchemaPatterns, LookAheadsAtTheStart) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           // Dotted lower-case names, except those in io.papermc.
           {R"({"type":"string","pattern":"^(?!io\\.papermc\\.)([a-z]+\\.)*[a-z]+$"})", {R"("org.example")", R"("io.other")", R"("io")"},
            {R"("io.papermc.x")", R"("Org")", R"("io.papermc.")"}},
           // Two in a row, one with `$` inside: no `=`, not only white space, not empty.
           {R"({"type":"string","pattern":"^(?=[^=]+$)(?!\\s+$)(.|\\n)+$"})", {R"("ab")", R"(" a")"}, {R"("a=b")", R"("   ")", R"("")"}},
           // Unanchored at the end: the look-ahead sees the whole string, past the three characters.
           {R"({"type":"string","pattern":"^(?=.*\\d)[a-z0-9]{3}"})", {R"("ab1")", R"("a1cXYZ")", R"("abcd5")"},
            {R"("ab")", R"("abc")", R"("AB1")"}},
           // A `^` inside the look-ahead is where it stands already.
           {R"({"type":"string","pattern":"^(?!^lucene\\.|builtin\\.).*"})", {R"("x")", R"("lucenex")", R"("a.builtin.b")"},
            {R"("lucene.a")", R"("builtin.b")"}},
       })
    CheckSchemaCase(c);
  for (const char* refused : {R"j({"type":"string","pattern":"a(?=b)"})j", R"j({"type":"string","pattern":"^((?!mode).)*$"})j"}) {
    auto g = JsonSchemaToGrammar(refused);
    ASSERT_FALSE(g.ok()) << refused;
    EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented) << refused;
    EXPECT_NE(g.status().message().find("look-ahead"), std::string::npos) << g.status().message();
  }
}

// A definition that only names another (an alias) means that other one, also when it is an object whose
// members hold any value (a recursive rule): JSONSchemaBench has such chains, A -> B -> an object.
TEST(JsonSchemaRefs, AliasesOfObjectsAreTheObjects) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"definitions":{"B":{"type":"object"},"M":{"$ref":"#/definitions/B"}},"$ref":"#/definitions/M"})",
            {R"({"b":1})", "{}"}, {"[]", "1"}},
           {R"({"definitions":{"B":{"properties":{"b":{}},"required":["b"],"additionalProperties":false,"type":"object"},"C":{"properties":{"c":{"$ref":"#/definitions/B"}},"required":["c"],"additionalProperties":false,"type":"object"},"D":{"$ref":"#/definitions/C"},"M":{"$ref":"#/definitions/D"}},"$ref":"#/definitions/M"})",
            {R"({"c":{"b":[1,{"x":null}]}})"}, {R"({"c":{}})", "{}"}},
           {R"({"$defs":{"B":{"type":"object"},"M":{"$ref":"#/$defs/B"}},"type":"object","properties":{"a":{"$ref":"#/$defs/M"}}})",
            {R"({"a":{}})", R"({"a":{"k":"v"}})"}, {R"({"a":1})"}},
       })
    CheckSchemaCase(c);
}

// A reference to a subschema that also appears inline (here the very property it points to) compiles to the
// same expression twice, once behind a rule that is inlined; the automaton shares such repeated parts, and
// the shared part must be the subschema itself, not the rule's call of it (which called itself: no member
// "c" could be written). The object holds any members, so {"y":[2]} is a valid "c"; 1 is no object.
TEST(JsonSchemaRefs, ReferenceToAnInlineSubschemaKeepsItsLanguage) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"properties":{"a":{"type":"object"},"c":{"$ref":"#/properties/a"}}})",
            {R"({"c":{}})", R"({"a":{"x":1},"c":{"y":[2]}})", "{}"}, {R"({"c":1})", R"({"a":"s"})"}},
           {R"({"properties":{"a":{"oneOf":[{"type":"string"},{"type":"object"}]},"c":{"type":"array","items":{"$ref":"#/properties/a"}}}})",
            {R"({"c":["x",{"k":null}]})", R"({"a":"x","c":[]})"}, {R"({"c":[1]})", R"({"c":"x"})"}},
       })
    CheckSchemaCase(c);
}

// Draft 7 and earlier: keywords beside a $ref are ignored, an enum or const too (it made the value finite).
// Under 2019-09 on (no `$schema` here) both apply: only "key" is a string that is also in the enum.
TEST(JsonSchemaRefs, EnumBesideReferenceIsIgnoredBeforeDraft2019) {
  const std::string defs = R"("definitions":{"P":{"type":["string","object"]}},)";
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"$schema":"http://json-schema.org/draft-07/schema#",)" + defs +
                R"("type":"object","properties":{"s":{"$ref":"#/definitions/P","enum":["key",3]}}})",
            {R"({"s":{}})", R"({"s":"other"})", R"({"s":"key"})"}, {R"({"s":3})"}},
           {"{" + defs + R"("type":"object","properties":{"s":{"$ref":"#/definitions/P","enum":["key",3]}}})",
            {R"({"s":"key"})"}, {R"({"s":{}})", R"({"s":"other"})", R"({"s":3})"}},
       })
    CheckSchemaCase(c);
}

// A oneOf the compiler cannot make exclusive (no exact negation of an enum of arrays) is refused by default
// with its pointer; one_of_as_any_of takes it as anyOf: [1] meets both branches (the schema rejects it) and
// is then accepted, which is why the option is off unless asked for.
TEST(JsonSchemaOneOf, LenientOptionTakesOverlappingBranchesAsAnyOf) {
  const std::string schema =
      R"({"type":"object","properties":{"n":{"oneOf":[{"enum":[[1],[2]]},{"type":"array","maxItems":1,"items":{"type":"integer","minimum":0,"maximum":1}}]}}})";
  auto refused = JsonSchemaToGrammar(schema);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(refused.status().message().find("'oneOf"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("#/properties/n"), std::string::npos) << refused.status().message();
  JsonSchemaOptions lenient;
  lenient.one_of_as_any_of = true;
  auto g = JsonSchemaToGrammar(schema, lenient);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto cg = Compile(*g);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  // [2]: the first branch only; [0] and []: the second only; [1]: both; [3], [0,1] and 1: neither.
  for (const char* yes : {R"({"n":[2]})", R"({"n":[0]})", R"({"n":[]})", R"({"n":[1]})", "{}"})
    EXPECT_TRUE(cg->Matches(yes)) << yes;
  for (const char* no : {R"({"n":[3]})", R"({"n":[0,1]})", R"({"n":1})"}) EXPECT_FALSE(cg->Matches(no)) << no;
}

// if/then/else are keywords from draft 7 on; under draft-04 (or 03, 06) they are unknown words that constrain
// nothing, wherever they stand: at the root, in an allOf (two there were refused as "two 'if'"), behind a $ref.
// The same schema without `$schema` (2020-12) applies them: {"a":"x"} must then have "b".
TEST(JsonSchemaDrafts, ConditionalsAreUnknownBeforeDraft7) {
  const std::string conditional = R"({"if":{"properties":{"a":{"enum":["x"]}},"required":["a"]},"then":{"required":["b"]}})";
  const std::string body = R"("type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}})";
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"$schema":"http://json-schema.org/draft-04/schema#",)" + body + "," + conditional.substr(1),
            {R"({"a":"x"})", R"({"a":"x","b":1})", R"({"a":"y"})"}, {R"({"a":1})", R"({"b":"s"})"}},
           {R"({"$schema":"http://json-schema.org/draft-06/schema#",)" + body + R"(,"allOf":[)" + conditional + "," +
                R"({"if":{"required":["b"]},"then":{"required":["a"]},"else":false}]})",
            {R"({"a":"x"})", "{}", R"({"b":1})"}, {R"({"a":2})"}},
           {R"({"$schema":"http://json-schema.org/draft-04/schema#","definitions":{"C":{"type":"object",)" + conditional.substr(1) +
                R"(},"type":"object","properties":{"o":{"$ref":"#/definitions/C"}}})",
            {R"({"o":{"a":"x"}})", R"({"o":{"a":"x","b":1}})"}, {R"({"o":1})"}},
           {"{" + body + "," + conditional.substr(1), {R"({"a":"x","b":1})", R"({"a":"y"})", "{}"}, {R"({"a":"x"})"}},
       })
    CheckSchemaCase(c);
}

}  // namespace
}  // namespace deepinfer::grammar
