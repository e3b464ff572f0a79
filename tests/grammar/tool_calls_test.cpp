// The DSML tool-call grammar of strict tools (grammar/tool_calls.h) on byte strings written out by hand from
// deepseek-recipe's layout (render_v4.cpp AppendToolCalls: V4 ends every parameter with "\n"; V4.1 and V3.2
// join them with "\n" and put "\n" before the invoke's end tag). `｜DSML｜` is the marker bytes M, as the
// vocabulary index spells the added token. The recipe's own rendering of calls is checked against the same
// grammar in tests/server/strict_tools_test.cpp.
#include <gtest/gtest.h>

#include "grammar/compiler.h"
#include "grammar/constraint.h"
#include "grammar/token_index.h"
#include "grammar/tool_calls.h"

namespace deepinfer::grammar {
namespace {

const std::string M = TokenIndex::MarkerBytes(0);

// get_weather(city: enum, days: 1..7 integer, note: plain string) and ping() without parameters.
const char* kWeather = R"({"type":"object","properties":{
  "city":{"type":"string","enum":["Paris","Rome"]},
  "days":{"type":"integer","minimum":1,"maximum":7},
  "note":{"type":"string","description":"free text"},
  "tags":{"type":"array","items":{"type":"string","maxLength":3},"maxItems":2}},
  "required":["city","days","note","tags"],"additionalProperties":false})";

ToolCallGrammarSpec Spec(ToolCallGrammarSpec::Dialect d, bool opened) {
  ToolCallGrammarSpec s;
  s.dialect = d;
  s.opened = opened;
  s.tools = {{"get_weather", kWeather}, {"ping", ""}};
  return s;
}

Result<CompiledGrammar> Build(const ToolCallGrammarSpec& s) {
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::kToolCalls;
  spec.text = SerializeToolCallSpec(s);
  DI_ASSIGN_OR_RETURN(Grammar g, BuildGrammar(spec));
  return Compile(g);
}

std::string ParamV4(const std::string& name, bool str, const std::string& value) {
  return "<" + M + "parameter name=\"" + name + "\" string=\"" + (str ? "true" : "false") + "\">" + value + "</" + M +
         "parameter>\n";
}

// One V4 get_weather invoke with the given parameter texts (in order).
std::string InvokeV4(const std::string& name, const std::vector<std::string>& params) {
  std::string s = "<" + M + "invoke name=\"" + name + "\">\n";
  for (const auto& p : params) s += p;
  return s + "</" + M + "invoke>";
}

std::string Weather(const std::string& city = "Paris", const std::string& days = "3", const std::string& note = "x < y",
                    const std::string& tags = "[\"a\", \"bc\"]") {
  return InvokeV4("get_weather", {ParamV4("city", true, city), ParamV4("days", false, days), ParamV4("note", true, note),
                                  ParamV4("tags", false, tags)});
}

const std::string kEnd = "\n</" + M + "tool_calls>";

TEST(ToolCallGrammar, OpenedV4AcceptsValidCallsOnly) {
  auto cg = Build(Spec(ToolCallGrammarSpec::Dialect::kV4, true));
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  // Valid: one call, two calls, the parameterless tool, an empty raw string, an empty array.
  EXPECT_TRUE(cg->Matches(Weather() + kEnd));
  EXPECT_TRUE(cg->Matches(Weather() + "\n" + InvokeV4("ping", {}) + kEnd));
  EXPECT_TRUE(cg->Matches(Weather("Rome", "7", "", "[]") + kEnd));
  EXPECT_TRUE(cg->Matches(Weather("Rome", "1", "multi\nline \"quoted\" {json}") + kEnd));
  // No call at all, or the block not closed.
  EXPECT_FALSE(cg->Matches(kEnd));
  EXPECT_FALSE(cg->Matches(Weather()));
  // A tool not in the list.
  EXPECT_FALSE(cg->Matches(InvokeV4("get_weathers", {}) + kEnd));
  EXPECT_FALSE(cg->Matches(InvokeV4("rm_rf", {}) + kEnd));
  // Values the schema forbids: a city outside the enum, days out of range or not an integer, a tag too long.
  EXPECT_FALSE(cg->Matches(Weather("Oslo") + kEnd));
  EXPECT_FALSE(cg->Matches(Weather("Paris", "8") + kEnd));
  EXPECT_FALSE(cg->Matches(Weather("Paris", "0") + kEnd));
  EXPECT_FALSE(cg->Matches(Weather("Paris", "2.5") + kEnd));
  EXPECT_FALSE(cg->Matches(Weather("Paris", "2.0") + kEnd));  // integral, but tool arguments get no fraction
  EXPECT_FALSE(cg->Matches(Weather("Paris", "3", "n", "[\"abcd\"]") + kEnd));
  EXPECT_FALSE(cg->Matches(Weather("Paris", "3", "n", "[\"a\", \"b\", \"c\"]") + kEnd));
  // JSON in Python spacing only (deepseek-recipe writes json.dumps): compact or extra spaces are refused.
  EXPECT_FALSE(cg->Matches(Weather("Paris", "3", "n", "[\"a\",\"b\"]") + kEnd));
  // A plain string raw text cannot contain '｜' (so it cannot spell the closing `</｜DSML｜`).
  EXPECT_FALSE(cg->Matches(Weather("Paris", "3", "a｜b") + kEnd));
  // Wrong string attributes: the integer as a string, the plain string as JSON, the enum as JSON.
  const std::string city = ParamV4("city", true, "Paris"), days = ParamV4("days", false, "3"),
                    note = ParamV4("note", true, "n"), tags = ParamV4("tags", false, "[]");
  EXPECT_TRUE(cg->Matches(InvokeV4("get_weather", {city, days, note, tags}) + kEnd));
  EXPECT_FALSE(cg->Matches(InvokeV4("get_weather", {city, ParamV4("days", true, "3"), note, tags}) + kEnd));
  EXPECT_FALSE(cg->Matches(InvokeV4("get_weather", {city, days, ParamV4("note", false, "\"n\""), tags}) + kEnd));
  EXPECT_FALSE(cg->Matches(InvokeV4("get_weather", {ParamV4("city", false, "\"Paris\""), days, note, tags}) + kEnd));
  // A required parameter left out, parameters out of schema order, an unknown parameter, one twice.
  EXPECT_FALSE(cg->Matches(InvokeV4("get_weather", {city, days, note}) + kEnd));
  EXPECT_FALSE(cg->Matches(InvokeV4("get_weather", {days, city, note, tags}) + kEnd));
  EXPECT_FALSE(cg->Matches(InvokeV4("get_weather", {city, days, note, tags, ParamV4("x", true, "")}) + kEnd));
  EXPECT_FALSE(cg->Matches(InvokeV4("get_weather", {city, city, days, note, tags}) + kEnd));
  // The marker must be the token: its text spelled with ordinary characters is not the tag.
  std::string text_marker = Weather() + kEnd;
  text_marker.replace(text_marker.find(M), M.size(), "｜DSML｜");
  EXPECT_FALSE(cg->Matches(text_marker));
}

TEST(ToolCallGrammar, AutoModeHasFreeTextBeforeAnOptionalBlock) {
  auto cg = Build(Spec(ToolCallGrammarSpec::Dialect::kV4, false));
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  const std::string open = "\n\n<" + M + "tool_calls>\n";
  EXPECT_TRUE(cg->Matches(""));
  EXPECT_TRUE(cg->Matches("Just an answer.\n\nWith paragraphs <b>."));
  EXPECT_TRUE(cg->Matches(open + Weather() + kEnd));
  EXPECT_TRUE(cg->Matches("Let me look.\n" + open + Weather() + kEnd));
  EXPECT_FALSE(cg->Matches("Let me look." + open + InvokeV4("nope", {}) + kEnd));
  EXPECT_FALSE(cg->Matches("text after the block" + open + Weather() + kEnd + "more"));
  EXPECT_FALSE(cg->Matches("a full-width bar ｜ in the text"));
}

// must_call (Anthropic tool_choice "any", prompt not opened): the block from its opening tag on, nothing
// before it, and at least one call.
TEST(ToolCallGrammar, MustCallStartsWithTheBlock) {
  ToolCallGrammarSpec s = Spec(ToolCallGrammarSpec::Dialect::kV4, false);
  s.must_call = true;
  auto cg = Build(s);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  const std::string open = "\n\n<" + M + "tool_calls>\n";
  EXPECT_TRUE(cg->Matches(open + Weather() + kEnd));
  EXPECT_TRUE(cg->Matches(open + Weather() + "\n" + InvokeV4("ping", {}) + kEnd));
  EXPECT_FALSE(cg->Matches(""));
  EXPECT_FALSE(cg->Matches("Just an answer."));
  EXPECT_FALSE(cg->Matches("Let me look.\n" + open + Weather() + kEnd));
  EXPECT_FALSE(cg->Matches(open + kEnd));
  EXPECT_FALSE(cg->Matches(Weather() + kEnd));  // the opening tag is the output's, not the prompt's
  // The spec text keeps the flag (the cache keys on it).
  auto back = ParseToolCallSpec(SerializeToolCallSpec(s));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->must_call);
  EXPECT_FALSE(back->opened);
}

TEST(ToolCallGrammar, V41AndV32Layouts) {
  auto v41 = Build(Spec(ToolCallGrammarSpec::Dialect::kV41, true));
  auto v32 = Build(Spec(ToolCallGrammarSpec::Dialect::kV32, true));
  ASSERT_TRUE(v41.ok() && v32.ok());
  auto call = [&](const std::string& sp, const std::string& calls) {
    auto p = [&](const std::string& n, bool s, const std::string& v) {
      return "<" + M + sp + "parameter name=\"" + n + "\" string=\"" + (s ? "true" : "false") + "\">" + v + "</" + M + sp +
             "parameter>";
    };
    return "<" + M + sp + "invoke name=\"get_weather\">\n" + p("city", true, "Rome") + "\n" + p("days", false, "2") +
           "\n" + p("note", true, "n") + "\n" + p("tags", false, "[\"a\"]") + "\n</" + M + sp + "invoke>\n<" + M + sp +
           "invoke name=\"ping\">\n\n</" + M + sp + "invoke>\n</" + M + calls + ">";
  };
  EXPECT_TRUE(v41->Matches(call(" ", " calls")));
  EXPECT_TRUE(v32->Matches(call("", "function_calls")));
  EXPECT_FALSE(v41->Matches(call("", "tool_calls")));
  EXPECT_FALSE(v32->Matches(call(" ", " calls")));
  EXPECT_FALSE(v41->Matches(call(" ", "calls")));
}

TEST(ToolCallGrammar, OptionalParametersAndMaxCalls) {
  ToolCallGrammarSpec s;
  s.opened = true;
  s.max_calls = 1;
  s.tools = {{"f", R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"}},"required":["b"]})"}};
  auto cg = Build(s);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  const std::string a = ParamV4("a", false, "true"), b = ParamV4("b", false, "null");
  EXPECT_TRUE(cg->Matches(InvokeV4("f", {a, b}) + kEnd));
  EXPECT_TRUE(cg->Matches(InvokeV4("f", {b}) + kEnd));
  EXPECT_FALSE(cg->Matches(InvokeV4("f", {a}) + kEnd));
  EXPECT_FALSE(cg->Matches(InvokeV4("f", {b}) + "\n" + InvokeV4("f", {b}) + kEnd));  // max_calls 1
}

TEST(ToolCallGrammar, RefsToTopLevelDefinitionsResolve) {
  ToolCallGrammarSpec s;
  s.opened = true;
  s.tools = {{"f", R"({"type":"object","$defs":{"pt":{"type":"object","properties":{"x":{"type":"integer"}},
      "required":["x"],"additionalProperties":false}},"properties":{"p":{"$ref":"#/$defs/pt"}},"required":["p"]})"}};
  auto cg = Build(s);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_TRUE(cg->Matches(InvokeV4("f", {ParamV4("p", false, "{\"x\": -12}")}) + kEnd));
  EXPECT_FALSE(cg->Matches(InvokeV4("f", {ParamV4("p", false, "{\"y\": 1}")}) + kEnd));
}

TEST(ToolCallGrammar, BadToolSchemasNameTheToolAndPath) {
  struct Bad {
    std::string schema, expect;
  };
  for (const Bad& b : std::vector<Bad>{
           {R"({"type":"array"})", "tool \"bad\": parameters.type"},
           {R"({"type":"object","anyOf":[{}]})", "tool \"bad\": parameters.anyOf"},
           {R"({"type":"object","properties":{"a b":{"type":"string"}}})", "parameters.properties.a b"},
           {R"({"type":"object","properties":{"x":{"type":"string","pattern":"(?<=a)b"}}})",
            "tool \"bad\": parameters.properties.x"},
           {R"({"type":"object","properties":{"x":{"type":"integer"}},"required":["y"]})", "\"y\""},
           {R"({"type":"object","properties":)", "tool \"bad\": parameters"},
       }) {
    ToolCallGrammarSpec s;
    s.tools = {{"ok", ""}, {"bad", b.schema}};
    ConstraintSpec spec;
    spec.kind = ConstraintSpec::Kind::kToolCalls;
    spec.text = SerializeToolCallSpec(s);
    auto g = BuildGrammar(spec);
    ASSERT_FALSE(g.ok()) << b.schema;
    EXPECT_NE(g.status().message().find(b.expect), std::string::npos) << g.status().message();
  }
}

TEST(ToolCallGrammar, SpecTextRoundTripsAndRejectsGarbage) {
  ToolCallGrammarSpec s = Spec(ToolCallGrammarSpec::Dialect::kV41, true);
  s.max_calls = 3;
  auto back = ParseToolCallSpec(SerializeToolCallSpec(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(SerializeToolCallSpec(*back), SerializeToolCallSpec(s));
  const std::string text = SerializeToolCallSpec(s);
  for (size_t cut = 0; cut < text.size(); cut += 7) EXPECT_FALSE(ParseToolCallSpec(text.substr(0, cut)).ok()) << cut;
  EXPECT_FALSE(ParseToolCallSpec("1:9|").ok());
  EXPECT_FALSE(ParseToolCallSpec("1:0" "1:0" "1:0" "99999999999999999999:").ok());
}

// A tool with free arguments (a non-strict tool whose schema the grammar cannot take): any parameter names the
// output parser can copy into JSON, each value raw text or any JSON value in Python spacing; still only the
// listed tools. V4.1 joins the parameters with "\n" as for schema-bound tools.
TEST(ToolCallGrammar, FreeArgumentsTakeAnyParameters) {
  ToolCallGrammarSpec s = Spec(ToolCallGrammarSpec::Dialect::kV4, true);
  s.tools = {{"anything", "", true}};
  auto cg = Build(s);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_TRUE(cg->Matches(InvokeV4("anything", {}) + kEnd));
  EXPECT_TRUE(cg->Matches(InvokeV4("anything", {ParamV4("q", true, "x < y"), ParamV4("n", false, "[1, {\"a\": null}]"),
                                                ParamV4("é_2", false, "-3.5")}) + kEnd));
  EXPECT_FALSE(cg->Matches(InvokeV4("other", {}) + kEnd));
  EXPECT_FALSE(cg->Matches(InvokeV4("anything", {ParamV4("a b", true, "x")}) + kEnd));   // a space ends the name
  EXPECT_FALSE(cg->Matches(InvokeV4("anything", {ParamV4("a\"b", true, "x")}) + kEnd));  // no JSON spelling
  EXPECT_FALSE(cg->Matches(InvokeV4("anything", {ParamV4("", true, "x")}) + kEnd));
  EXPECT_FALSE(cg->Matches(InvokeV4("anything", {ParamV4("n", false, "[1,2]")}) + kEnd));  // Python spacing only
  EXPECT_FALSE(cg->Matches(InvokeV4("anything", {ParamV4("n", false, "nope")}) + kEnd));

  s.dialect = ToolCallGrammarSpec::Dialect::kV41;
  auto v41 = Build(s);
  ASSERT_TRUE(v41.ok()) << v41.status().ToString();
  auto param = [](const std::string& name, const std::string& value) {
    return "<" + M + " parameter name=\"" + name + "\" string=\"true\">" + value + "</" + M + " parameter>";
  };
  const std::string head = "<" + M + " invoke name=\"anything\">\n", tail = "\n</" + M + " invoke>\n</" + M + " calls>";
  EXPECT_TRUE(v41->Matches(head + param("a", "1") + "\n" + param("b", "2") + tail));
  EXPECT_TRUE(v41->Matches(head + tail));
  EXPECT_FALSE(v41->Matches(head + param("a", "1") + param("b", "2") + tail));
}

// Beside an answer format (not opened): the format's JSON or the block with no text before it.
TEST(ToolCallGrammar, AnswerFormatOrCalls) {
  ToolCallGrammarSpec s = Spec(ToolCallGrammarSpec::Dialect::kV4, false);
  s.answer.kind = ToolCallAnswer::Kind::kJsonSchema;
  s.answer.schema = R"({"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]})";
  s.answer.strict = true;
  auto cg = Build(s);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  const std::string open = "\n\n<" + M + "tool_calls>\n";
  EXPECT_TRUE(cg->Matches(R"({"ok":true})"));
  EXPECT_TRUE(cg->Matches(open + Weather() + kEnd));
  EXPECT_FALSE(cg->Matches(R"({"ok":true,"more":1})"));  // strict: no other members
  EXPECT_FALSE(cg->Matches("plain text"));
  EXPECT_FALSE(cg->Matches("text" + open + Weather() + kEnd));
  EXPECT_FALSE(cg->Matches(""));

  s.answer = {ToolCallAnswer::Kind::kJsonObject, "", false};
  auto object = Build(s);
  ASSERT_TRUE(object.ok());
  EXPECT_TRUE(object->Matches(R"({"any":[1,2]})"));
  EXPECT_FALSE(object->Matches("[1]"));
  EXPECT_TRUE(object->Matches(open + InvokeV4("ping", {}) + kEnd));

  // The answer and free arguments survive the spec text.
  s.tools.push_back({"free", "", true});
  auto back = ParseToolCallSpec(SerializeToolCallSpec(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->answer.kind, ToolCallAnswer::Kind::kJsonObject);
  EXPECT_TRUE(back->tools.back().free_arguments);
  EXPECT_FALSE(back->tools.front().free_arguments);
  EXPECT_EQ(SerializeToolCallSpec(*back), SerializeToolCallSpec(s));
  // An answer schema the JSON Schema front end refuses names the answer format.
  s.answer = {ToolCallAnswer::Kind::kJsonSchema, R"j({"type":"object","properties":{"a":{"pattern":"(?<=x)"}}})j", false};
  auto bad = Build(s);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("answer format: ", 0), 0u) << bad.status().message();
}

}  // namespace
}  // namespace deepinfer::grammar
