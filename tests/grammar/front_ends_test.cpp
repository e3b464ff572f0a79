// Front ends against languages written out by hand: each case lists strings that must be accepted and
// strings that must be rejected (CompiledGrammar::Matches runs the pushdown automaton on bytes), and bad
// inputs must fail with an error that names the cause.
#include <gtest/gtest.h>

#include <regex>

#include "grammar/compiler.h"
#include "grammar/constraint.h"
#include "grammar/ebnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace deepinfer::grammar {
namespace {

struct FrontEndCase {
  ConstraintSpec::Kind kind;
  std::string text;
  std::vector<std::string> yes, no;
};

Result<CompiledGrammar> Build(ConstraintSpec::Kind kind, const std::string& text) {
  ConstraintSpec spec;
  spec.kind = kind;
  spec.text = text;
  DI_ASSIGN_OR_RETURN(Grammar g, BuildGrammar(spec));
  return Compile(g);
}

void CheckFrontEndCase(const FrontEndCase& c) {
  auto cg = Build(c.kind, c.text);
  ASSERT_TRUE(cg.ok()) << c.text << ": " << cg.status().ToString();
  for (const auto& s : c.yes) EXPECT_TRUE(cg->Matches(s)) << c.text << " should accept " << s;
  for (const auto& s : c.no) EXPECT_FALSE(cg->Matches(s)) << c.text << " should reject " << s;
}

using K = ConstraintSpec::Kind;

TEST(Regex, Languages) {
  for (const FrontEndCase& c : std::vector<FrontEndCase>{
           {K::kRegex, "a|bc*", {"a", "b", "bccc"}, {"", "ab", "c"}},
           {K::kRegex, "[^a-c]{2}", {"dd", "zé"}, {"ad", "d", "ddd"}},
           {K::kRegex, "\\d{1,3}(\\.\\d+)?", {"1", "123", "12.5"}, {"1234", "1.", ".5"}},
           {K::kRegex, "(?:ab)+?x", {"abx", "ababx"}, {"x", "abax"}},
           {K::kRegex, "\\u00e9\\x41.", {"éAb"}, {"éA\n", "eAb"}},
           {K::kRegex, "[\\w-]+", {"a-b_9"}, {"a b", ""}},
           {K::kRegex, "a{2}{", {"aa{"}, {"aa"}},
       })
    CheckFrontEndCase(c);
}

// `$` inside a pattern (end of string there), and `^` in a group that is a whole top-level alternative: the pattern search (JSON Schema semantics) against
// std::regex_search with ECMAScript syntax, on every string of up to 5 characters over a small alphabet.
TEST(Regex, DollarInsideAPatternAsStdRegex) {
  const std::string alphabet = "ab/.";
  std::vector<std::string> strings = {""};
  for (size_t i = 0; i < strings.size() && strings[i].size() < 5; ++i)
    for (char c : alphabet) strings.push_back(strings[i] + c);
  for (const std::string pattern : {"^(/?(\\.\\.|[a-b]*)($|/))*$", "a($|b)\\.?", "x?(a|$)", "(a$)*b?", "^(a|$){2,3}$",
                                    "b(a$|/)+", "a$b", "^(a|b$)*$", "(^[^a]*$)|/", "(?:^a)|(b$)", "((^a.))|[.]"}) {
    Grammar g;
    const uint32_t rule = g.AddRule("p");
    g.set_root(rule);
    RegexOptions ro;
    ro.full_match = false;
    auto re = CompileRegex(pattern, ro, &g);
    ASSERT_TRUE(re.ok()) << pattern << ": " << re.status().ToString();
    g.Define(rule, *re);
    auto cg = Compile(g);
    const std::regex reference(pattern, std::regex::ECMAScript);
    size_t matched = 0;
    for (const auto& text : strings) {
      const bool want = std::regex_search(text, reference);
      matched += want;
      if (!cg.ok()) {  // only a pattern that matches nothing may fail to compile, and says so
        EXPECT_FALSE(want) << pattern << " matches " << text;
        continue;
      }
      EXPECT_EQ(cg->Matches(text), want) << pattern << " on " << text;
    }
    if (!cg.ok()) {
      EXPECT_EQ(matched, 0u) << pattern << ": " << cg.status().ToString();
    }
  }
}

// Byte classes are intervals: each byte's class_last is the last byte before the class changes (or 255), and
// every byte from it back to the byte has the same class. A JSON schema with a pattern, a format and an enum
// cuts the bytes into many classes.
TEST(Compiler, ClassLastEndsEachBytesClass) {
  auto cg = Build(K::kJsonSchema, R"({"type":"object","properties":{"a":{"type":"string","pattern":"^[b-dx]+$"},)"
                                  R"("t":{"type":"string","format":"date-time"},"e":{"enum":["Qz","é"]}}})");
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_GT(cg->num_classes(), 20u);
  for (int b = 0; b < 256; ++b) {
    const uint8_t byte = static_cast<uint8_t>(b), last = cg->class_last(byte);
    ASSERT_GE(last, byte);
    for (int x = b; x <= last; ++x) EXPECT_EQ(cg->byte_class(static_cast<uint8_t>(x)), cg->byte_class(byte)) << b;
    if (last < 255) {
      EXPECT_NE(cg->byte_class(static_cast<uint8_t>(last + 1)), cg->byte_class(byte)) << b;
    }
  }
}

TEST(Ebnf, GbnfAndW3cForms) {
  CheckFrontEndCase({K::kEbnf,
         "root ::= \"[\" list? \"]\"\nlist ::= item (\",\" item)*\nitem ::= [0-9]+ | 'x' # comment\n",
         {"[]", "[1]", "[1,x,23]"},
         {"[", "[1,]", "[y]"}});
  // Right recursion is a real pushdown language: balanced parentheses.
  CheckFrontEndCase({K::kEbnf, "root ::= p\np ::= \"(\" p \")\" p | \"\"", {"", "()", "(())()"}, {"(", "())", ")("}});
  CheckFrontEndCase({K::kEbnf, "start ::= [^\"\\\\]{2,3} \"\\n\"", {"ab\n", "abc\n"}, {"a\n", "abcd\n", "a\"\n"}});
}

TEST(JsonSchema, Keywords) {
  for (const FrontEndCase& c : std::vector<FrontEndCase>{
           {K::kJsonSchema, R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["b"],"additionalProperties":false})",
            {R"({"b":""})", R"({"a":1,"b":"x"})", R"({"a":-20,"b":"\u00e9\n"})"},
            {R"({})", R"({"a":1})", R"({"b":"x","a":1})", R"({"a":1.5,"b":""})", R"({"b":"x","c":1})"}},
           {K::kJsonSchema, R"({"type":"object","properties":{"a":{"type":"boolean"}}})",
            {R"({})", R"({"a":true,"z":[1,{"q":null}]})", R"({"z":1})"},
            {R"({"a":true,"a":false})", R"({"a":1})"}},
           {K::kJsonSchema, R"({"type":"integer","minimum":-5,"exclusiveMaximum":120})",
            {"-5", "0", "119", "7", "100"},
            {"-6", "120", "1000", "-0", "01", "3.0"}},
           {K::kJsonSchema, R"({"type":"number","minimum":0,"maximum":1})",
            {"0", "1", "0.25", "1.0", "0.999"},
            {"-0.1", "1.5", "2", "1.01"}},
           {K::kJsonSchema, R"({"type":"integer","multipleOf":10,"minimum":0})", {"0", "10", "250"}, {"5", "-10", "11"}},
           {K::kJsonSchema, R"({"type":"string","minLength":2,"maxLength":3})",
            {R"("ab")", R"("abc")", R"("a\"")", R"("\u0041b")"},
            {R"("a")", R"("abcd")", R"("a\")"}},
           {K::kJsonSchema, R"({"type":"string","pattern":"^[a-z]+$","maxLength":4})",
            {R"("abc")", R"("abcd")"},
            {R"("")", R"("abcde")", R"("aB")"}},
           {K::kJsonSchema, R"({"type":"string","pattern":"b"})", {R"("abc")", R"("b")"}, {R"("ac")"}},
           {K::kJsonSchema, R"({"type":"string","format":"date"})", {R"("2024-02-29")"}, {R"("2024-13-01")", R"("24-01-01")"}},
           {K::kJsonSchema, R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123")"}},
           {K::kJsonSchema, R"({"type":"array","items":{"type":"null"},"minItems":1,"maxItems":2})",
            {"[null]", "[null,null]"}, {"[]", "[null,null,null]", "[1]"}},
           {K::kJsonSchema, R"({"prefixItems":[{"const":1},{"const":"a"}],"items":false})",
            {"[]", "[1]", "[1,\"a\"]"}, {"[\"a\"]", "[1,\"a\",2]"}},
           {K::kJsonSchema, R"({"enum":["x",2,null,{"k":[1]}]})", {R"("x")", "2", "null", R"({"k":[1]})"}, {R"("y")", "3"}},
           {K::kJsonSchema, R"({"anyOf":[{"type":"string"},{"type":"integer"}]})", {R"("s")", "5"}, {"null", "1.5"}},
           {K::kJsonSchema, R"({"oneOf":[{"type":"string"},{"type":"null"}]})", {R"("s")", "null"}, {"1"}},
           {K::kJsonSchema, R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"const":true}},"required":["b"]}]})",
            {R"({"a":1,"b":true})"}, {R"({"a":1})", R"({"b":true})", R"({"a":1,"b":false})"}},
           {K::kJsonSchema, R"({"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}},"additionalProperties":false}},"$ref":"#/$defs/n"})",
            {"{}", R"({"next":{"next":{}}})"}, {R"({"next":1})"}},
           {K::kJsonSchema, R"({"type":"object","patternProperties":{"^x-":{"type":"integer"}},"additionalProperties":false})",
            {"{}", R"({"x-a":1,"x-b":2})"}, {R"({"y":1})", R"({"x-a":"s"})"}},
           {K::kJsonSchema, R"({"type":"object","minProperties":1,"maxProperties":2})",
            {R"({"a":1})", R"({"a":1,"b":2})"}, {"{}", R"({"a":1,"b":2,"c":3})"}},
           {K::kJsonSchema, R"({"not":{"type":"string"}})", {"1", "null", "[]"}, {R"("s")"}},
       })
    CheckFrontEndCase(c);
}

TEST(JsonSchema, FlexibleWhitespace) {
  ConstraintSpec spec;
  spec.kind = K::kJsonSchema;
  spec.text = R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}}})";
  spec.json.whitespace = JsonSchemaOptions::Whitespace::kFlexible;
  auto g = BuildGrammar(spec);
  ASSERT_TRUE(g.ok());
  auto cg = Compile(*g);
  ASSERT_TRUE(cg.ok());
  EXPECT_TRUE(cg->Matches("{ \"a\" : [ 1 , 2 ]\n}"));
  EXPECT_TRUE(cg->Matches("{\"a\":[1,2]}"));
  EXPECT_FALSE(cg->Matches("{ \"a\" : [ 1 , , 2 ] }"));
}

TEST(JsonSchema, RefsDecodeJsonPointerEscapes) {
  // "%61" is 'a' (URI percent-encoding), "~1" is '/' and "~0" is '~' (RFC 6901).
  for (const std::string ref : {"#/$defs/%61", "#/$defs/b~1c", "#/$defs/d~0e", "#/$defs/list/0"}) {
    auto r = Build(K::kJsonSchema, R"({"$defs":{"a":{"const":1},"b/c":{"const":1},"d~e":{"const":1},"list":[{"const":1}]},"$ref":")" +
                                       ref + R"("})");
    ASSERT_TRUE(r.ok()) << ref << ": " << r.status().ToString();
    EXPECT_TRUE(r->Matches("1")) << ref;
    EXPECT_FALSE(r->Matches("2")) << ref;
  }
}

TEST(Errors, NameTheCause) {
  struct Bad {
    K kind;
    std::string text;
    StatusCode code;
    std::string needle;
  };
  for (const Bad& b : std::vector<Bad>{
           {K::kJsonSchema, "{", StatusCode::kInvalidArgument, "not valid JSON"},
           {K::kJsonSchema, R"({"$ref":"#"})", StatusCode::kInvalidArgument, "accepts no string"},
           {K::kJsonSchema, R"({"properties":{"a":{"unevaluatedProperties":false}}})", StatusCode::kUnimplemented,
            "'unevaluatedProperties' at #/properties/a"},
           // An `if` whose negation has no exact form (an enum of arrays) names the keyword and its path.
           {K::kJsonSchema, R"({"properties":{"a":{"if":{"enum":[[1,2]]},"then":false}}})",
            StatusCode::kUnimplemented, "'if' at #/properties/a"},
           {K::kJsonSchema, R"({"$ref":"http://x/y.json"})", StatusCode::kUnimplemented, "local references"},
           // Percent-encoding in a JSON pointer: two hex digits or an error (a fuzzer found "%$$" threw).
           {K::kJsonSchema, R"({"$defs":{"a":{"type":"string"}},"$ref":"#/$defs/%$$a"})", StatusCode::kInvalidArgument,
            "invalid percent-encoding"},
           {K::kJsonSchema, R"({"$defs":{"a":{"type":"string"}},"$ref":"#/$defs/a%4"})", StatusCode::kInvalidArgument,
            "invalid percent-encoding"},
           {K::kJsonSchema, R"({"$defs":[{"type":"string"}],"$ref":"#/$defs/0x"})", StatusCode::kInvalidArgument,
            "does not resolve"},
           {K::kJsonSchema, R"({"type":"string","pattern":"(?<=a)b"})", StatusCode::kUnimplemented, "look-behind"},
           // Length and count keywords are non-negative integers (CI's fuzzer found maxLength -3 reached a
           // double-to-unsigned conversion, undefined behaviour).
           {K::kJsonSchema, R"({"properties":{"q":{"maxLength":-3}}})", StatusCode::kInvalidArgument,
            "#/properties/q: maxLength must be a non-negative integer"},
           {K::kJsonSchema, R"({"type":"array","minItems":1.5})", StatusCode::kInvalidArgument, "minItems must be"},
           {K::kJsonSchema, R"({"type":"object","maxProperties":-1e300})", StatusCode::kInvalidArgument,
            "maxProperties must be"},
           // Two tuple `items` in one allOf (the JSON-Schema-Test-Suite's additionalItems case threw out of
           // the merge, which iterated an array as an object).
           {K::kJsonSchema, R"({"allOf":[{"items":[{"type":"integer"},{"type":"string"}]}],"items":[{"type":"integer"}]})",
            StatusCode::kUnimplemented, "items beside another member's prefixItems"},
           {K::kRegex, "(a", StatusCode::kInvalidArgument, "missing ')'"},
           {K::kRegex, "[]", StatusCode::kInvalidArgument, "accepts no string"},
           {K::kEbnf, "root ::= x \"a\"\nx ::= [^\\x00-\\U0010FFFF]", StatusCode::kInvalidArgument, "accepts no string"},
           {K::kJsonSchema, R"({"type":"object","properties":{"a":false},"required":["a"]})", StatusCode::kInvalidArgument, "accepts no string"},
           {K::kRegex, "a\\1", StatusCode::kUnimplemented, "backreference"},
           {K::kRegex, "a{2000000}", StatusCode::kResourceExhausted, "repetition"},
           {K::kEbnf, "root ::= a\n", StatusCode::kInvalidArgument, "'a' is used but not defined"},
           {K::kEbnf, "root ::= root \"x\" | \"y\"", StatusCode::kInvalidArgument, "left recursion"},
       }) {
    auto r = Build(b.kind, b.text);
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_EQ(r.status().code(), b.code) << b.text << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find(b.needle), std::string::npos) << b.text << ": " << r.status().message();
  }
}

TEST(Errors, SizeLimitsAreEnforced) {
  auto g = ParseEbnf("root ::= [a-z]{5000} [0-9]{5000}");
  ASSERT_TRUE(g.ok());
  CompileLimits small;
  small.max_nfa_states = 10000;
  auto r = Compile(*g, small);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  small = CompileLimits();
  small.max_dfa_states = 100;
  r = Compile(*g, small);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("exceeds 100 states"), std::string::npos) << r.status().message();
}

// The schema's translation has a time budget of its own: with none left, the first subschema it reaches is
// refused (kDeadlineExceeded naming where), never compiled; the default budget compiles the same schema.
TEST(Errors, SchemaTranslationStopsAtItsTimeBudget) {
  const std::string schema = R"({"type":"object","properties":{"a":{"type":"integer"}}})";
  JsonSchemaOptions spent;
  spent.max_translate_ms = 0;
  auto refused = JsonSchemaToGrammar(schema, spent);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(refused.status().message().find("(at #"), std::string::npos) << refused.status().message();
  EXPECT_TRUE(JsonSchemaToGrammar(schema, JsonSchemaOptions{}).ok());
}

TEST(Errors, DeepNestingIsBounded) {
  std::string deep(100000, '(');
  deep += "a";
  deep += std::string(100000, ')');
  auto r = Build(K::kRegex, deep);
  ASSERT_FALSE(r.ok());
  std::string schema;
  for (int i = 0; i < 5000; ++i) schema += R"({"items":)";
  schema += "true";
  for (int i = 0; i < 5000; ++i) schema += "}";
  auto s = Build(K::kJsonSchema, schema);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("deeper than"), std::string::npos) << s.status().message();
}

TEST(Cache, SharesCompiledGrammars) {
  auto vocab = TokenIndex::FromTokens({"a", "b"}, {}, {}, 2);
  ASSERT_TRUE(vocab.ok());
  ConstraintCache cache(2);
  ConstraintSpec a{K::kRegex, "a+", {}, {}};
  ConstraintSpec b{K::kRegex, "b+", {}, {}};
  auto x = cache.Get(a, *vocab);
  auto y = cache.Get(a, *vocab);
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(x->get(), y->get());
  EXPECT_EQ(cache.hits(), 1u);
  ASSERT_TRUE(cache.Get(b, *vocab).ok());
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_FALSE(cache.Get({K::kRegex, "(", {}, {}}, *vocab).ok());
}

}  // namespace
}  // namespace deepinfer::grammar
