// uniqueItems over items the grammar cannot list, enforced by the matcher at run time: equality is JSON
// equality (1 = 1.0, members in any order), a duplicate is refused wherever it stands, and along random
// walks the mask allows exactly the tokens the matcher accepts and leads to arrays whose items differ
// (checked against nlohmann::json's own equality, which compares numbers by value and objects as maps).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_index.h"
#include "grammar/unique_items.h"

namespace deepinfer::grammar {
namespace {

TEST(UniqueItemCanonical, EqualValuesHaveEqualForms) {
  auto c = [](std::string_view t) { return CanonicalItem(t).canonical; };
  EXPECT_EQ(c("1"), c("1.0"));
  EXPECT_EQ(c("1"), c("1e0"));
  EXPECT_EQ(c("1"), c("10E-1"));
  EXPECT_EQ(c("0"), c("-0.0"));
  EXPECT_EQ(c(R"({"a":1,"b":[2,"x"]})"), c(R"( {"b":[2.0,"\u0078"],"a":1} )"));
  EXPECT_NE(c("true"), c("1"));  // JSON Schema keeps booleans apart from numbers
  EXPECT_NE(c("[1,2]"), c("[2,1]"));
  EXPECT_NE(c(R"("1")"), c("1"));
  EXPECT_NE(c(R"({"a":1})"), c(R"({"a":1,"b":null})"));
  EXPECT_NE(c(R"(["a,b"])"), c(R"(["a","b"])"));
}

TEST(UniqueItemCanonical, MayEqualRulesOutOnlyImpossibleCompletions) {
  const UniqueItem s = CanonicalItem(R"("ab")");
  EXPECT_TRUE(MayEqual("", s));
  EXPECT_TRUE(MayEqual(" \"a", s));
  EXPECT_TRUE(MayEqual("\"\\u006", s));  // an escape cut short: "\u0061" may follow
  EXPECT_TRUE(MayEqual("\"ab\"", s));
  EXPECT_FALSE(MayEqual("\"b", s));
  EXPECT_FALSE(MayEqual("\"abc", s));
  EXPECT_FALSE(MayEqual("1", s));
  EXPECT_FALSE(MayEqual("{", s));
  const UniqueItem o = CanonicalItem(R"({"k":"v","n":1})");
  EXPECT_TRUE(MayEqual(R"({"n":1,"k":"v)", o));  // members in another order
  EXPECT_FALSE(MayEqual(R"({"x)", o));
  EXPECT_TRUE(MayEqual("1.", CanonicalItem("1")));
  EXPECT_FALSE(MayEqual("tr", CanonicalItem("false")));
}

const std::vector<std::string>& Vocab() {
  static const std::vector<std::string> v = [] {
    std::vector<std::string> t;
    for (char c : std::string("[]{},:\" abx019.e-tnulrfs")) t.push_back(std::string(1, c));
    for (const char* s : {"\"a\"", "\",\"", "\"a\",\"a\"", "\"],", ",\"a\"", "1,1", ".0", "e0", "[1,1]", "[\"a\",\"a\"]",
                          "\":", "{\"", "\"}", "\"x\"", "ab", "\"ab\"", " \"", "\", \"", "\"b\"]", "},{", "10", "-0"})
      t.push_back(s);
    t.push_back("<eos>");
    return t;
  }();
  return v;
}

std::shared_ptr<const BoundGrammar> Bind(const std::string& schema) {
  auto g = JsonSchemaToGrammar(schema);
  EXPECT_TRUE(g.ok()) << schema << ": " << g.status().ToString();
  if (!g.ok()) return nullptr;
  auto cg = Compile(*g);
  EXPECT_TRUE(cg.ok()) << schema << ": " << cg.status().ToString();
  if (!cg.ok()) return nullptr;
  EXPECT_TRUE(cg->has_unique_items()) << schema;
  const int32_t eos = static_cast<int32_t>(Vocab().size() - 1);
  auto index = TokenIndex::FromTokens(Vocab(), {eos}, {eos}, 64);
  EXPECT_TRUE(index.ok());
  return std::make_shared<BoundGrammar>(std::make_shared<const CompiledGrammar>(std::move(*cg)), *index);
}

bool Accepts(const std::shared_ptr<const BoundGrammar>& b, const std::string& text) {
  GrammarMatcher m(b);
  return m.AcceptString(text) && m.CanTerminate();
}

struct Case {
  std::string schema;
  std::vector<std::string> yes, no;
};

TEST(UniqueItemsAtRunTime, DuplicatesByJsonEqualityAreRefused) {
  for (const Case& c : std::vector<Case>{
           {R"({"type":"array","items":{"type":"string"},"uniqueItems":true})",
            {"[]", R"(["a"])", R"(["a","b"])", R"(["a","ab","b",""])"},
            {R"(["a","a"])", R"(["a","b","a"])", R"(["\u0061","a"])", R"(["",""])"}},
           // Numbers by value: 1, 1.0 and 1e0 are one number; 0 and -0 too.
           {R"({"type":"array","items":{"type":"number"},"uniqueItems":true})", {"[1,2,1.5]", "[10,1]"},
            {"[1,1.0]", "[1e0,1]", "[0,-0]", "[2,1,2.00]"}},
           // Free-form objects: members in any order are the same object.
           {R"({"type":"array","items":{"type":"object"},"uniqueItems":true})", {R"([{"x":1},{"x":2},{}])"},
            {R"([{"x":1,"y":2},{"y":2,"x":1}])", R"([{},{}])"}},
           // Arrays of arrays: each level on its own.
           {R"({"type":"array","items":{"type":"array","items":{"type":"string"},"uniqueItems":true},"uniqueItems":true})",
            {R"([["a","b"],["b","a"],[]])"}, {R"([["a"],["a"]])", R"([["a","a"]])", R"([[],[]])"}},
           // Counts still hold.
           {R"({"type":"array","items":{"type":"string"},"uniqueItems":true,"minItems":2,"maxItems":3})",
            {R"(["a","b"])", R"(["a","b","c"])"}, {R"(["a","a"])", R"(["a"])", R"(["a","b","c","d"])", R"(["a","b","a"])"}},
           // 40 integers, up to 40 of them: too many sets to list, so checked at run time.
           {R"({"type":"object","properties":{"n":{"type":"array","items":{"type":"integer","minimum":0,"maximum":39},"uniqueItems":true}}})",
            {R"({"n":[0,39,5]})", R"({"n":[]})"}, {R"({"n":[5,5]})", R"({"n":[1,2,1]})", R"({"n":[40]})"}},
       }) {
    auto b = Bind(c.schema);
    ASSERT_NE(b, nullptr);
    for (const auto& s : c.yes) EXPECT_TRUE(Accepts(b, s)) << c.schema << " should accept " << s;
    for (const auto& s : c.no) EXPECT_FALSE(Accepts(b, s)) << c.schema << " should reject " << s;
  }
}

TEST(UniqueItemsAtRunTime, RefusedUnderExclusionsAndBesideTupleItems) {
  for (const std::string schema : {
           R"({"type":"array","prefixItems":[{"type":"string"}],"uniqueItems":true})",
           // Overlapping branches (["a"] meets both) need an exclusion of automata, which know nothing of
           // uniqueness.
           R"({"oneOf":[{"type":"array","items":{"type":"string"},"uniqueItems":true},{"type":"array","maxItems":1}]})",
       }) {
    auto g = JsonSchemaToGrammar(schema);
    Status s = g.status();
    if (g.ok()) s = Compile(*g).status();
    ASSERT_FALSE(s.ok()) << schema;
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
    const bool named = s.message().find("'uniqueItems") != std::string::npos || s.message().find("'oneOf") != std::string::npos;
    EXPECT_TRUE(named) << s.message();
  }
}

// Whether every array in `v` holds distinct items (every array of these schemas must).
bool ArraysUnique(const nlohmann::json& v) {
  if (v.is_object()) {
    for (const auto& [k, x] : v.items())
      if (!ArraysUnique(x)) return false;
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!ArraysUnique(v[i])) return false;
      for (size_t j = 0; j < i; ++j)
        if (v[i] == v[j]) return false;
    }
  }
  return true;
}

TEST(UniqueItemsAtRunTime, MaskMatchesAcceptAndEveryDuplicateIsRefused) {
  const std::vector<std::string> schemas = {
      // Item languages with no finite part: a prefix whose every completion repeats an earlier item leaves
      // an empty mask (see matcher.h), which these walks never meet.
      R"({"type":"array","items":{"type":"string","pattern":"^[ab]+$"},"uniqueItems":true,"maxItems":4})",
      R"({"type":"array","items":{"type":"number"},"uniqueItems":true,"maxItems":5})",
      R"({"type":"array","items":{"type":"object","properties":{"x":{"type":"string","maxLength":2}},"additionalProperties":false},"uniqueItems":true,"maxItems":4})",
      R"({"type":"array","items":{"type":"array","items":{"enum":["a","b",1,true]},"uniqueItems":true,"maxItems":2},"uniqueItems":true,"maxItems":4})",
  };
  const auto& vocab = Vocab();
  const int32_t eos = static_cast<int32_t>(vocab.size() - 1);
  const size_t words = 2;
  int finished = 0;
  for (const std::string& schema : schemas) {
    auto b = Bind(schema);
    ASSERT_NE(b, nullptr);
    for (uint32_t seed = 1; seed <= 12; ++seed) {
      std::mt19937 rng(seed);
      GrammarMatcher m(b);
      std::string text;
      for (int step = 0; step < 60 && !m.IsTerminated(); ++step) {
        std::vector<uint32_t> bits(words);
        ASSERT_TRUE(m.FillNextTokenBitmask(bits.data()).ok());
        std::vector<int32_t> allowed, closing;
        for (int32_t id = 0; id <= eos; ++id) {
          const bool got = bits[id / 32] >> (id % 32) & 1;
          const bool accepted = m.AcceptToken(id);
          if (accepted) m.Rollback(1);
          ASSERT_EQ(got, accepted) << schema << " after '" << text << "' token '" << vocab[id] << "'";
          if (!got) continue;
          allowed.push_back(id);
          if (id == eos || vocab[id].find_first_of("\"]}") != std::string::npos) closing.push_back(id);
        }
        ASSERT_FALSE(allowed.empty()) << schema << " after '" << text << "'";
        // Lean towards closing tokens so that walks finish.
        const auto& pool = !closing.empty() && rng() % 2 ? closing : allowed;
        const int32_t pick = pool[rng() % pool.size()];
        ASSERT_TRUE(m.AcceptToken(pick));
        if (pick != eos) text += vocab[pick];
      }
      if (!m.IsTerminated()) continue;
      ++finished;
      const nlohmann::json v = nlohmann::json::parse(text);
      EXPECT_TRUE(ArraysUnique(v)) << schema << ": " << text;
      // Each item again at each position (where maxItems leaves room): refused.
      if (!v.is_array() || v.empty() || v.size() >= 4) continue;
      for (size_t i = 0; i < v.size(); ++i) {
        for (size_t at = 0; at <= v.size(); ++at) {
          nlohmann::json d = v;
          d.insert(d.begin() + static_cast<std::ptrdiff_t>(at), v[i]);
          EXPECT_FALSE(Accepts(b, d.dump())) << schema << ": " << d.dump();
        }
      }
      EXPECT_TRUE(Accepts(b, v.dump())) << schema << ": " << v.dump();  // the dump itself is fine
    }
  }
  EXPECT_GE(finished, 24);  // most walks end in a whole instance
}

}  // namespace
}  // namespace deepinfer::grammar
