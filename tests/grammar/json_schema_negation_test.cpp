// Negations the JSON Schema front end builds exactly (`not`, and each oneOf branch keeping out the others it
// may meet): oneOf, format, numeric bounds and numeric enum members; and the refusals left, which name the
// keyword and its JSON pointer. Expected verdicts are derived by hand from the standard, in each comment.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/constraint.h"
#include "grammar/json_schema.h"
#include "grammar/token_index.h"
#include "schema_case.h"

namespace deepinfer::grammar {
namespace {

// not oneOf [A, B] holds where none of the branches holds or two of them do.
TEST(JsonSchemaNegation, OneOf) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           // Disjoint branches (string, array): anything but a string or an array.
           {R"({"not":{"oneOf":[{"type":"string"},{"type":"array"}]}})", {"1", "{}", "null"}, {R"("a")", "[1]"}},
           // Overlapping branches: string, and maxLength 3 (which every non-string meets). No instance meets
           // neither; strings of at most 3 characters meet both; longer strings and non-strings meet one.
           {R"({"not":{"oneOf":[{"type":"string"},{"maxLength":3}]}})", {R"("ab")", R"("")"},
            {R"("abcd")", "1", "null", "[]"}},
           // A oneOf nested in a oneOf's branch: the outer branch 1 keeps out branch 0 (a string, or an
           // object with only `secure`), so {"secure":"a"} meets branch 0 alone, {"global":"a"} branch 1
           // alone, {} both (rejected), {"global":1} neither.
           {R"({"oneOf":[{"oneOf":[{"type":"string"},{"type":"object","additionalProperties":false,"properties":{"secure":{"type":"string"}}}]},)"
            R"({"type":"object","properties":{"global":{"type":"string"}},"additionalProperties":false}]})",
            {R"({"secure":"a"})", R"({"global":"a"})", R"("x")"}, {"{}", R"({"global":1})", R"({"secure":"a","global":"b"})"}},
       })
    CheckSchemaCase(c);
}

// A oneOf beside a negation that needs a member (here: some key other than "global") constrains the
// alternatives of the negation: {"global":1} is neither a string nor an object with only `secure`.
TEST(JsonSchemaNegation, OneOfBesideAnyOfStillHolds) {
  CheckSchemaCase({R"({"allOf":[{"oneOf":[{"type":"string"},{"type":"object","additionalProperties":false,)"
                   R"("properties":{"secure":{"type":"string"}}}]},)"
                   R"({"not":{"type":"object","properties":{"global":{"type":"string"}},"additionalProperties":false}}]})",
                   {R"({"secure":"a"})", R"("s")"}, {R"({"global":1})", R"({"global":"a"})", "{}"}});
}

// A string the format rejects: "1.2.3.4" is an ipv4 address and a hostname (digit labels), so it meets
// two branches; "256.1.1.1" is a hostname only; "a b" neither.
TEST(JsonSchemaNegation, Format) {
  CheckSchemaCase({R"({"type":"string","oneOf":[{"format":"ipv4"},{"format":"hostname"}]})",
                   {R"("example.com")", R"("256.1.1.1")"}, {R"("1.2.3.4")", R"("a b")"}});
  CheckSchemaCase({R"({"type":"string","not":{"format":"uuid"}})", {R"("x")", R"("123e4567-e89b-12d3-a456-42661417400")"},
                   {R"("123e4567-e89b-12d3-a456-426614174000")"}});
}

// A number on the other side of a bound; other types meet every bound, so `not` rejects them.
TEST(JsonSchemaNegation, NumericBounds) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"not":{"minimum":3}})", {"2", "2.5", "-1"}, {"3", "3.5", R"("s")", "null"}},
           {R"({"not":{"maximum":3}})", {"4", "3.01"}, {"3", "-7", "[]"}},
           // Draft 6 on: the numeric exclusive forms; not (x < 3) is x >= 3.
           {R"({"not":{"exclusiveMaximum":3}})", {"3", "4"}, {"2.9"}},
           // Draft 4: exclusiveMinimum true makes minimum exclusive; not (x > 3) is x <= 3.
           {R"({"$schema":"http://json-schema.org/draft-04/schema#","not":{"minimum":3,"exclusiveMinimum":true}})",
            {"3", "2"}, {"3.5", "4"}},
           // Both bounds: outside [1, 5] on either side.
           {R"({"type":"integer","not":{"minimum":1,"maximum":5}})", {"0", "6", "-3"}, {"1", "3", "5"}},
       })
    CheckSchemaCase(c);
}

// Numeric enum members have many spellings (1, 1.0): they are kept out by the ranges around them.
TEST(JsonSchemaNegation, NumericEnumMembers) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"not":{"enum":[1,"a",3]}})", {"2", "1.5", "0", "4", R"("b")", "null"}, {"1", "1.0", "3", "3.00", R"("a")"}},
           {R"({"type":"integer","not":{"enum":[1,2]}})", {"0", "3", "-1"}, {"1", "2"}},
           {R"({"type":"number","not":{"const":0}})", {"0.5", "-1"}, {"0", "0.0", "-0"}},
       })
    CheckSchemaCase(c);
}

// Enum members written as floats with an integral value (9.0 is 9) and object members (equal objects have
// the same members, in any order, with equal values) have exact negations.
TEST(JsonSchemaNegation, IntegralFloatAndObjectEnumMembers) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"not":{"enum":[9.0,"red"]}})", {"8", "9.5", "10", R"("blue")"}, {"9", "9.0", R"("red")"}},
           // {"a":1} is kept out in every spelling of 1; an extra member, another value or no member differ.
           {R"({"not":{"enum":[{"a":1},"x"]}})", {R"({"a":2})", R"({"a":1,"b":1})", "{}", R"("y")", "1"},
            {R"({"a":1})", R"({"a":1.0})", R"("x")"}},
           // Overlapping oneOf branches (the object {"type":"void"} is in both enums): it meets two, so no
           // instance of it validates; each other member meets one branch.
           {R"({"oneOf":[{"enum":[{"type":"void"},"a"]},{"enum":[{"type":"void"},"b"]}]})", {R"("a")", R"("b")"},
            {R"({"type":"void"})", R"("c")"}},
       })
    CheckSchemaCase(c);
}

// A multiple of 1 is an integer, so not multipleOf 1 holds for the numbers with a fraction only (and for no
// other type: multipleOf holds for every non-number).
TEST(JsonSchemaNegation, MultipleOfOne) {
  CheckSchemaCase({R"({"not":{"multipleOf":1}})", {"1.5", "-0.25"}, {"1", "1.0", "0", R"("a")", "null"}});
}

// A negation meets only the instances of the types the schema around it allows, so keywords of other types
// need no negation: `null` meets both branches below (rejected) while the array branch's tuple items (which
// have no negation) only constrain arrays, which the other branches never hold. The first branch is thus
// the arrays of at most one string (draft 7 tuple, nothing after it).
TEST(JsonSchemaNegation, KeywordsOfOtherTypesNeedNoNegation) {
  CheckSchemaCase({R"({"oneOf":[{"type":["array","null"],"items":[{"type":"string"}],"additionalItems":false},{"type":"null"},{"type":"boolean"}]})",
                   {R"(["a"])", "[]", "true", "false"}, {"null", R"(["a","b"])", "[1]", "1", R"("a")"}});
  // `not` beside type string: the array keywords of its schema constrain no string.
  CheckSchemaCase({R"({"type":"string","not":{"type":["string","array"],"maxLength":2,"uniqueItems":true}})",
                   {R"("abc")"}, {R"("ab")", R"("")", "[1]"}});
}

// What still has no exact form is refused: kUnimplemented naming the keyword and its JSON pointer.
TEST(JsonSchemaNegation, RefusalsNameKeywordAndPointer) {
  struct Refusal {
    std::string schema, keyword, pointer;
  };
  for (const Refusal& r : std::vector<Refusal>{
           // An enum of arrays: no exact form here for the instances other than its members.
           {R"({"properties":{"n":{"not":{"enum":[[1,2]]}}}})", "'not'", "#/properties/n"},
           // [1] meets both branches, and the enum of arrays has no exact negation to keep it out.
           {R"({"properties":{"m":{"oneOf":[{"enum":[[1],[2]]},{"type":"array","maxItems":1}]}}})", "'oneOf", "#/properties/m"},
       }) {
    auto g = JsonSchemaToGrammar(r.schema);
    ASSERT_FALSE(g.ok()) << r.schema;
    EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented) << r.schema;
    EXPECT_NE(g.status().message().find(r.keyword), std::string::npos) << g.status().message();
    EXPECT_NE(g.status().message().find(r.pointer), std::string::npos) << g.status().message();
  }
}

// A keyword value that is not a schema where a negation looks for one (an array dependency, a property
// schema that is an array, misspelled keywords beside it) ends in a Status, never an exception: the schema
// came from a fuzzer, whose run threw out of the negation of the array dependency `{"kind":["v"]}`.
TEST(JsonSchemaNegation, KeywordValueThatIsNoSchemaEndsInAStatus) {
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::kJsonSchema;
  spec.text = R"({"type":"object","properties":{"kind":{"enum":["a","p"]},"v":{"type":"number","minimum":0.25,)"
              R"("exclusiveMaximum":3.5}},"if":{"properties":{"kinrequired":["v"]}},"oneOf":[{"requjjjj":["kind"]},)"
              R"({"required":["v"]}],"dependencies":{"kind":["v"]}})";
  std::optional<Result<Grammar>> g;
  ASSERT_NO_THROW(g.emplace(BuildGrammar(spec)));
  if (!g->ok()) {
    EXPECT_TRUE(g->status().code() == StatusCode::kUnimplemented || g->status().code() == StatusCode::kInvalidArgument)
        << g->status().ToString();
    return;
  }
  ASSERT_NO_THROW({
    auto cg = Compile(**g);
    EXPECT_TRUE(cg.ok() || cg.status().code() == StatusCode::kUnimplemented) << cg.status().ToString();
  });
}

// JsonSchemaOptions::one_of_as_any_of: the refused oneOf compiles as anyOf and the grammar names where; an
// exact grammar names nothing; the cache keeps the two modes apart (a strict request never gets the lenient
// grammar compiled for another).
TEST(JsonSchemaLenientOneOf, WarnsWhereItIsTakenAndCachesModesApart) {
  const std::string overlapping =
      R"({"properties":{"m":{"oneOf":[{"enum":[[1],[2]]},{"type":"array","maxItems":1,"items":{"type":"integer"}}]}}})";
  JsonSchemaOptions lenient;
  lenient.one_of_as_any_of = true;
  auto g = JsonSchemaToGrammar(overlapping, lenient);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->warnings().size(), 1u);
  EXPECT_NE(g->warnings()[0].find("oneOf at #/properties/m taken as anyOf"), std::string::npos) << g->warnings()[0];
  auto cg = Compile(*g);
  ASSERT_TRUE(cg.ok());
  EXPECT_EQ(cg->warnings(), g->warnings());
  // [1] meets both branches: the anyOf reading accepts it; [1,3] meets neither.
  EXPECT_TRUE(cg->Matches(R"({"m":[1]})"));
  EXPECT_FALSE(cg->Matches(R"({"m":[1,3]})"));
  auto exact = JsonSchemaToGrammar(R"({"oneOf":[{"type":"string"},{"type":"null"}]})", lenient);
  ASSERT_TRUE(exact.ok());
  EXPECT_TRUE(exact->warnings().empty());

  auto vocab = TokenIndex::FromTokens({"a", "b"}, {}, {}, 2);
  ASSERT_TRUE(vocab.ok());
  ConstraintCache cache(4);
  ConstraintSpec spec;
  spec.text = overlapping;
  spec.json.one_of_as_any_of = true;
  ASSERT_TRUE(cache.Get(spec, *vocab).ok());
  spec.json.one_of_as_any_of = false;
  auto strict = cache.Get(spec, *vocab);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace deepinfer::grammar
