// The matcher on the real DeepSeek vocabulary (129,280-wide masks): at every step of a walk through valid
// instances, the mask bit of a token equals whether the matcher accepts that token (brute force on every
// allowed token, every eighth under the sanitizers, and on a seeded sample of the others, tokens that span
// several grammar elements and multi-byte characters included), added tokens are never allowed inside
// constrained text, and seeded generations under the mask with random choices always end in text the grammar
// accepts.
#include <gtest/gtest.h>

#include <random>

#include "grammar/constraint.h"
#include "grammar/matcher.h"
#include "support/sanitizer_scale.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::grammar {
namespace {

class RealVocab : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto t = tokenizer::LoadTokenizer("deepseek-v3");
    ASSERT_TRUE(t.ok());
    tok_ = new tokenizer::Tokenizer(std::move(*t));
    TokenIndex::Options o;
    o.mask_width = 129280;
    auto v = TokenIndex::FromTokenizer(*tok_, o);
    ASSERT_TRUE(v.ok());
    vocab_ = new std::shared_ptr<const TokenIndex>(*v);
  }
  void SetUp() override { ASSERT_NE(tok_, nullptr); }
  std::shared_ptr<const BoundGrammar> Bind(ConstraintSpec::Kind kind, const std::string& text) {
    ConstraintSpec spec;
    spec.kind = kind;
    spec.text = text;
    auto b = cache_.Get(spec, *vocab_);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? *b : nullptr;
  }
  static tokenizer::Tokenizer* tok_;
  static std::shared_ptr<const TokenIndex>* vocab_;
  ConstraintCache cache_;
};
tokenizer::Tokenizer* RealVocab::tok_ = nullptr;
std::shared_ptr<const TokenIndex>* RealVocab::vocab_ = nullptr;

bool Bit(const std::vector<uint32_t>& bits, int32_t id) { return (bits[static_cast<size_t>(id) / 32] >> (id % 32)) & 1; }

TEST_F(RealVocab, MaskEqualsAcceptOnEveryStep) {
  struct Walk {
    ConstraintSpec::Kind kind;
    std::string grammar, text;
  };
  const std::vector<Walk> walks = {
      {ConstraintSpec::Kind::kJsonSchema,
       R"({"type":"object","properties":{"name":{"type":"string","maxLength":40},"tags":{"type":"array","items":{"enum":["a","b c"]}},"n":{"type":"integer","minimum":-3}},"required":["name"]})",
       R"({"name":"Zoë \"q\" 数据\n","tags":["b c","a"],"n":-2,"extra":{"k":[1.5e3,null]}})"},
      {ConstraintSpec::Kind::kJsonObject, "", R"({"a":[{"b":"\u00e9"}],"c":true})"},
      {ConstraintSpec::Kind::kRegex, "(\\d{3}-){2}[A-Z][a-z]+ ?", "123-456-Hello "},
      {ConstraintSpec::Kind::kEbnf, "root ::= \"<\" tag \">\" [^<]* \"</\" tag \">\"\ntag ::= [a-z]+", "<div>text 文字</div>"},
  };
  std::mt19937 rng(2026);
  std::vector<uint32_t> bits((*vocab_)->words());
  // Inside a string most of the vocabulary is allowed, so accepting every allowed token is most of this test's
  // time. The Release pass accepts them all; under the sanitizers (several times slower) every eighth one,
  // which still reaches every kind of token, many times per step.
  const size_t allowed_stride = static_cast<size_t>(::deepinfer::test_support::RoundsForThisBuild(1, 8));
  for (const Walk& w : walks) {
    auto bound = Bind(w.kind, w.grammar);
    ASSERT_NE(bound, nullptr);
    GrammarMatcher m(bound);
    std::vector<int32_t> ids = tok_->EncodeText(w.text);
    for (size_t step = 0; step <= ids.size(); ++step) {
      ASSERT_TRUE(m.FillNextTokenBitmask(bits.data()).ok());
      for (int k = 0; k < 3000; ++k) {
        int32_t id = static_cast<int32_t>(rng() % tok_->vocab_size());
        if (bound->vocab().IsStop(id)) continue;
        bool accepted = m.AcceptToken(id);
        if (accepted) m.Rollback(1);
        ASSERT_EQ(accepted, Bit(bits, id)) << w.grammar << " step " << step << " token " << id << " '"
                                            << tok_->TokenBytes(id) << "'";
        if (tok_->IsAddedToken(id)) {
          EXPECT_FALSE(Bit(bits, id));
        }
      }
      size_t allowed_seen = 0;
      for (size_t id = 0; id < tok_->vocab_size(); ++id) {
        if (!Bit(bits, static_cast<int32_t>(id)) || bound->vocab().IsStop(static_cast<int32_t>(id))) continue;
        if (allowed_seen++ % allowed_stride != 0) continue;
        ASSERT_FALSE(tok_->IsAddedToken(static_cast<int32_t>(id)));
        ASSERT_TRUE(m.AcceptToken(static_cast<int32_t>(id))) << w.grammar << " step " << step << " token " << id;
        m.Rollback(1);
      }
      if (step < ids.size()) {
        ASSERT_TRUE(Bit(bits, ids[step])) << w.grammar << ": the instance's token " << step << " is masked";
        ASSERT_TRUE(m.AcceptToken(ids[step]));
      } else {
        EXPECT_TRUE(Bit(bits, bound->vocab().stop_ids()[0]));
      }
    }
  }
}

TEST_F(RealVocab, RandomGenerationsUnderTheMaskAreValid) {
  const std::vector<std::string> schemas = {
      R"({"type":"object","properties":{"id":{"type":"string","format":"uuid"},"when":{"type":"string","format":"date-time"},"score":{"type":"number","minimum":0,"maximum":10},"kind":{"enum":["x","y"]}},"required":["id","when","kind"],"additionalProperties":false})",
      R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
      R"({"type":"array","items":{"type":"string","pattern":"^[a-z]{2,5}$"},"minItems":1,"maxItems":4})",
  };
  std::vector<uint32_t> bits((*vocab_)->words());
  for (const auto& schema : schemas) {
    auto bound = Bind(ConstraintSpec::Kind::kJsonSchema, schema);
    ASSERT_NE(bound, nullptr);
    auto g = BuildGrammar({ConstraintSpec::Kind::kJsonSchema, schema, {}, {}});
    ASSERT_TRUE(g.ok());
    auto cg = Compile(*g);
    ASSERT_TRUE(cg.ok());
    for (uint32_t seed = 0; seed < 25; ++seed) {
      std::mt19937 rng(seed);
      GrammarMatcher m(bound);
      std::string text;
      for (int step = 0; step < 400 && !m.IsTerminated(); ++step) {
        ASSERT_TRUE(m.FillNextTokenBitmask(bits.data()).ok());
        std::vector<int32_t> allowed;
        for (size_t w = 0; w < bits.size(); ++w)
          for (uint32_t word = bits[w]; word; word &= word - 1) allowed.push_back(static_cast<int32_t>(w * 32 + __builtin_ctz(word)));
        ASSERT_FALSE(allowed.empty());
        // Random weights: prefer the stop token once in a while so generations end.
        int32_t pick = allowed[rng() % allowed.size()];
        int32_t stop = bound->vocab().stop_ids()[0];
        if (Bit(bits, stop) && rng() % 3 == 0) pick = stop;
        ASSERT_TRUE(m.AcceptToken(pick));
        if (pick != stop) text += tok_->TokenBytes(pick);
      }
      if (m.IsTerminated()) {
        EXPECT_TRUE(cg->Matches(text)) << schema << " seed " << seed << ": " << text;
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::grammar
