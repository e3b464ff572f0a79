// The official JSON-Schema-Test-Suite (draft 7 and draft 2020-12, required tests; tests/grammar/data/
// json_schema_test_suite.jsonl, written by tools/grammar/make_test_suite_data.py) against the JSON Schema
// compiler: for every case whose schema compiles, every `valid: true` instance, serialised compactly, is
// accepted and every `valid: false` one is rejected. A schema that does not compile is an honest error and
// is not checked. The exceptions (json_schema_test_suite_exceptions.jsonl) each give the reason; a
// member-order or spelling exception also gives the instance in the grammar's canonical spelling, which
// must then get the suite's verdict. An exception that no longer fails is itself a failure, and the counts
// of compiled cases and checked tests are asserted, so a silent shrink of coverage fails too.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "grammar/compiler.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_index.h"

namespace deepinfer::grammar {
namespace {

using Json = nlohmann::ordered_json;

// The non-empty lines of a committed data file (tests/grammar/data/NAME).
std::vector<std::string> DataLines(const std::string& name) {
  std::ifstream in(std::string(DEEPINFER_SOURCE_DIR) + "/tests/grammar/data/" + name);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

// Whether `cg` accepts `text`: through the matcher (over a vocabulary of single bytes) where the grammar
// checks uniqueItems at run time, which the automaton alone does not.
bool Accepts(const std::shared_ptr<const CompiledGrammar>& cg, const std::string& text) {
  if (!cg->has_unique_items()) return cg->Matches(text);
  static const std::shared_ptr<const TokenIndex> bytes = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
    tokens.push_back("<eos>");
    return *TokenIndex::FromTokens(tokens, {256}, {256}, 288);
  }();
  GrammarMatcher m(std::make_shared<BoundGrammar>(cg, bytes));
  return m.AcceptString(text) && m.CanTerminate();
}

struct Exception {
  std::string reason;
  std::string canonical;  // empty: none (the test is not checked otherwise)
  bool used = false;
};

// Counts from running this test (they change only with what the compiler covers: update them with the
// exceptions file, in the same commit as the compiler change).
constexpr int kCases = 640;
constexpr int kCasesCompiled = 453;
constexpr int kTests = 2226;
constexpr int kTestsChecked = 1738;

TEST(JsonSchemaTestSuite, CompiledSchemasGiveTheSuitesVerdicts) {
  std::map<std::pair<std::string, int>, Exception> exceptions;
  for (const std::string& line : DataLines("json_schema_test_suite_exceptions.jsonl")) {
    auto j = ParseOrderedJson(line);
    ASSERT_TRUE(j.ok()) << line;
    Exception e{j->value("reason", std::string()), j->value("canonical", std::string())};
    ASSERT_FALSE(e.reason.empty()) << "an exception needs its reason: " << line;
    exceptions[{j->at("id").get<std::string>(), j->at("test").get<int>()}] = e;
  }
  int cases = 0, compiled = 0, tests = 0, checked = 0;
  for (const std::string& line :
       DataLines("json_schema_test_suite.jsonl")) {
    auto j = ParseOrderedJson(line);
    ASSERT_TRUE(j.ok()) << line;
    const std::string id = j->at("id").get<std::string>();
    const Json& list = j->at("tests");
    ++cases;
    tests += static_cast<int>(list.size());
    // The draft 7 files mostly name no `$schema`: their `$ref` siblings follow draft 7 all the same.
    JsonSchemaOptions options;
    options.draft7_without_schema = id.rfind("draft7/", 0) == 0;
    auto g = JsonSchemaToGrammar(j->at("schema").dump(), options);
    if (!g.ok()) continue;
    // No wall-clock limit: a loaded or sanitized build must compile the same cases as a quiet one.
    CompileLimits untimed;
    untimed.max_compile_ms = 600'000.0;
    auto compiled_grammar = Compile(*g, untimed);
    // A grammar that accepts nothing compiles to an error that says so: then every instance is rejected.
    const bool empty = !compiled_grammar.ok() && compiled_grammar.status().message() == "the grammar accepts no string";
    if (!compiled_grammar.ok() && !empty) continue;
    std::shared_ptr<const CompiledGrammar> cg;
    if (compiled_grammar.ok()) cg = std::make_shared<const CompiledGrammar>(std::move(*compiled_grammar));
    ++compiled;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string text = list[i][0].get<std::string>();
      const bool valid = list[i][1].get<bool>();
      const bool accepted = !empty && Accepts(cg, text);
      auto ex = exceptions.find({id, static_cast<int>(i)});
      if (ex == exceptions.end()) {
        ++checked;
        EXPECT_EQ(accepted, valid) << id << " test " << i << ": " << text << " is "
                                   << (valid ? "valid" : "invalid") << " (schema " << j->at("schema").dump() << ")";
        continue;
      }
      ex->second.used = true;
      EXPECT_NE(accepted, valid) << id << " test " << i << " is listed as an exception but now gets the suite's verdict";
      if (!ex->second.canonical.empty()) {
        ++checked;
        EXPECT_EQ(!empty && Accepts(cg, ex->second.canonical), valid)
            << id << " test " << i << ": the canonical spelling " << ex->second.canonical;
      }
    }
  }
  for (const auto& [key, e] : exceptions)
    EXPECT_TRUE(e.used) << "exception " << key.first << " test " << key.second << " matches no compiled test";
  EXPECT_EQ(cases, kCases);
  EXPECT_EQ(tests, kTests);
  EXPECT_EQ(compiled, kCasesCompiled);
  EXPECT_EQ(checked, kTestsChecked);
}

}  // namespace
}  // namespace deepinfer::grammar
