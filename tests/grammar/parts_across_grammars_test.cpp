// Large regular parts are built once per process and shared by later compiles
// (CompileLimits::share_parts_across_grammars): a compile that takes a part another grammar built must
// give the automaton a private build gives, state for state, and compiles running at once on several
// threads must too.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/constraint.h"

namespace deepinfer::grammar {
namespace {

CompiledGrammar CompileSchema(const std::string& schema, bool share) {
  ConstraintSpec spec;
  spec.text = schema;
  auto g = BuildGrammar(spec);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  CompileLimits limits;
  limits.share_parts_across_grammars = share;
  // The private build of the regex format's syntax takes a while, longer still on a loaded machine or
  // beside the other threads: the deadline is not what these tests check.
  limits.max_compile_ms = 600'000.0;
  auto c = Compile(*g, limits);
  EXPECT_TRUE(c.ok()) << schema << ": " << c.status().ToString();
  return std::move(*c);
}

// The same numbering, byte classes, transitions, acceptance, rules and call edges.
void ExpectSameAutomaton(const CompiledGrammar& a, const CompiledGrammar& b) {
  ASSERT_EQ(a.num_states(), b.num_states());
  ASSERT_EQ(a.num_classes(), b.num_classes());
  ASSERT_EQ(a.rule_names(), b.rule_names());
  for (int byte = 0; byte < 256; ++byte)
    ASSERT_EQ(a.byte_class(static_cast<uint8_t>(byte)), b.byte_class(static_cast<uint8_t>(byte))) << byte;
  for (uint32_t r = 0; r < a.rule_names().size(); ++r) ASSERT_EQ(a.rule_start(r), b.rule_start(r));
  for (uint32_t s = 0; s < a.num_states(); ++s) {
    ASSERT_EQ(a.accepting(s), b.accepting(s)) << s;
    ASSERT_EQ(a.rule_of(s), b.rule_of(s)) << s;
    for (int byte = 0; byte < 256; ++byte)
      ASSERT_EQ(a.Next(s, static_cast<uint8_t>(byte)), b.Next(s, static_cast<uint8_t>(byte))) << s << " " << byte;
    ASSERT_EQ(a.calls_end(s) - a.calls_begin(s), b.calls_end(s) - b.calls_begin(s)) << s;
    for (const CallEdge *x = a.calls_begin(s), *y = b.calls_begin(s); x != a.calls_end(s); ++x, ++y) {
      EXPECT_EQ(x->rule, y->rule);
      EXPECT_EQ(x->target, y->target);
    }
  }
}

// Two different schemas that both hold the `regex` format, whose syntax is the large shared part.
const char* const kFirst = R"({"type":"object","properties":{"re":{"type":"string","format":"regex"}},"required":["re"]})";
const char* const kSecond =
    R"({"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},)"
    R"("match":{"type":"string","format":"regex"}},"required":["name","match"],"additionalProperties":false}})";

TEST(PartsAcrossGrammars, ASharedPartGivesThePrivateAutomaton) {
  // The first compile may build the part or find it from an earlier test; either way the second grammar
  // finds it in the cache.
  const CompiledGrammar first_shared = CompileSchema(kFirst, true);
  const CompiledGrammar second_shared = CompileSchema(kSecond, true);
  ExpectSameAutomaton(first_shared, CompileSchema(kFirst, false));
  ExpectSameAutomaton(second_shared, CompileSchema(kSecond, false));
  // Answers as well: a valid pattern, and one the syntax refuses (a reversed {n,m}: 3 > 2).
  EXPECT_TRUE(second_shared.Matches(R"([{"name":"x","match":"^a(b|c){1,2}$"}])"));
  EXPECT_FALSE(second_shared.Matches(R"([{"name":"x","match":"a{3,2}"}])"));
  EXPECT_TRUE(first_shared.Matches(R"({"re":"[a-z]+"})"));
  EXPECT_FALSE(first_shared.Matches(R"({"re":"[z-a]"})"));
}

TEST(PartsAcrossGrammars, CompilesOnSeveralThreadsAgree) {
  const CompiledGrammar reference = CompileSchema(kSecond, false);
  std::vector<CompiledGrammar> results(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i)
    threads.emplace_back([&results, i] { results[i] = CompileSchema(i % 2 ? kSecond : kFirst, true); });
  for (std::thread& t : threads) t.join();
  const CompiledGrammar first = CompileSchema(kFirst, false);
  for (size_t i = 0; i < results.size(); ++i) ExpectSameAutomaton(results[i], i % 2 ? reference : first);
}

}  // namespace
}  // namespace deepinfer::grammar
