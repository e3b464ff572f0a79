// The mask entry's bulk paths (matcher.cpp ComputeEntry): the loop shortcut takes a trie subtree whole
// when every byte below it leads the state back to itself (control bytes left out per token), and plain
// text of all categories walks only the trie's skeleton. Both must give exactly the walk's answer: on the
// real DeepSeek vocabulary every token's mask bit is compared with the matcher's acceptance of it (brute
// force over all 129K tokens), at every step of texts through looping patterns. The trie's per-node facts
// the shortcut reads are checked by hand on a small vocabulary.
#include <gtest/gtest.h>

#include <algorithm>

#include "grammar/constraint.h"
#include "grammar/matcher.h"
#include "grammar/token_index.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::grammar {
namespace {

// The node spelling `bytes` (its path from the root), or -1.
int64_t NodeOf(const TokenIndex& v, std::string_view bytes) {
  uint32_t node = 0;
  for (char c : bytes) {
    uint32_t child = node + 1;
    bool found = false;
    while (child < v.end(node)) {
      if (v.byte(child) == static_cast<uint8_t>(c)) {
        found = true;
        break;
      }
      child = v.end(child);
    }
    if (!found) return -1;
    node = child;
  }
  return node;
}

bool HasByte(const TokenIndex::ByteSet& s, uint8_t b) {
  const uint32_t k = b - 0x20u;
  return (s[k >> 6] >> (k & 63)) & 1;
}

TEST(LoopShortcut, TrieFactsOnASmallVocabulary) {
  // "a" has below it: 'b', 'c', a newline and the two bytes of é; "x\xC3" ends inside a code point.
  const std::vector<std::string> tokens = {"a", "ab", "abc", "a\n", "a\xC3\xA9", "x", "x\xC3", "x\xC3\xA9z", "\xC3"};
  auto v = TokenIndex::FromTokens(tokens, {}, {}, 0);
  ASSERT_TRUE(v.ok());
  const TokenIndex& t = **v;
  const int64_t a = NodeOf(t, "a"), ab = NodeOf(t, "ab"), x = NodeOf(t, "x"), xc3 = NodeOf(t, "x\xC3");
  ASSERT_GE(a, 0);
  ASSERT_GE(ab, 0);
  ASSERT_GE(x, 0);
  ASSERT_GE(xc3, 0);
  const auto& below_a = t.below_bytes(static_cast<uint32_t>(a));
  EXPECT_TRUE(HasByte(below_a, 'b'));
  EXPECT_TRUE(HasByte(below_a, 'c'));
  EXPECT_FALSE(HasByte(below_a, 'a'));  // its own byte is not below it
  EXPECT_TRUE(below_a[1] & TokenIndex::kControlBelow);
  EXPECT_TRUE(below_a[1] & TokenIndex::kNonAsciiBelow);
  EXPECT_TRUE(below_a[1] & TokenIndex::kUtf8Below);  // "a" ends a code point; every token below is UTF-8
  const auto& below_ab = t.below_bytes(static_cast<uint32_t>(ab));
  EXPECT_TRUE(HasByte(below_ab, 'c'));
  EXPECT_FALSE(below_ab[1] & (TokenIndex::kControlBelow | TokenIndex::kNonAsciiBelow));
  // "x" ends a code point and "x\xC3" (cut short) and "x\xC3\xA9z" are valid UTF-8 below it; the node
  // "x\xC3" is inside a code point, so nothing below it counts as whole code points.
  EXPECT_TRUE(t.below_bytes(static_cast<uint32_t>(x))[1] & TokenIndex::kUtf8Below);
  EXPECT_FALSE(t.below_bytes(static_cast<uint32_t>(xc3))[1] & TokenIndex::kUtf8Below);
  // Control depths: "a\n" holds a newline at depth 2, the others none.
  const int32_t* begin = t.tokens_begin(static_cast<uint32_t>(a));
  const uint16_t* ctl = t.control_depth_begin(static_cast<uint32_t>(a));
  size_t with_newline = 0;
  for (const int32_t* k = begin; k != t.tokens_below_end(static_cast<uint32_t>(a)); ++k, ++ctl) {
    EXPECT_EQ(*ctl, tokens[static_cast<size_t>(*k)] == "a\n" ? 2 : 0) << tokens[static_cast<size_t>(*k)];
    with_newline += *ctl != 0;
  }
  EXPECT_EQ(with_newline, 1u);
  EXPECT_EQ(t.tokens_below_end(static_cast<uint32_t>(a)) - begin, 5);  // a, ab, abc, a\n, aé
  // The skeleton holds the root's children and the children of every node with a non-plain token below
  // (the newline and the cut-short code points are not plain): here every node but "abc" (under "ab",
  // whose subtree is plain) and "x\xC3\xA9z"'s last node (under a node whose subtree is its one token).
  std::vector<uint32_t> skel;
  for (const auto& k : t.skeleton()) skel.push_back(k.node);
  EXPECT_EQ(std::count(skel.begin(), skel.end(), static_cast<uint32_t>(NodeOf(t, "abc"))), 0);
  EXPECT_EQ(std::count(skel.begin(), skel.end(), static_cast<uint32_t>(ab)), 1);
  EXPECT_EQ(std::count(skel.begin(), skel.end(), static_cast<uint32_t>(xc3)), 1);
  for (size_t k = 0; k < t.skeleton().size(); ++k) {
    // skip points past the node's subtree: the next skeleton node not below it.
    const auto& n = t.skeleton()[k];
    ASSERT_LE(n.skip, t.skeleton().size());
    if (n.skip < t.skeleton().size()) {
      EXPECT_GE(t.skeleton()[n.skip].node, t.end(n.node));
    }
    if (n.skip > k + 1) {
      EXPECT_LT(t.skeleton()[n.skip - 1].node, t.end(n.node));
    }
  }
}

class LoopShortcutReal : public ::testing::Test {
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
  static tokenizer::Tokenizer* tok_;
  static std::shared_ptr<const TokenIndex>* vocab_;
};
tokenizer::Tokenizer* LoopShortcutReal::tok_ = nullptr;
std::shared_ptr<const TokenIndex>* LoopShortcutReal::vocab_ = nullptr;

TEST_F(LoopShortcutReal, MaskEqualsAcceptForEveryToken) {
  struct Walk {
    ConstraintSpec::Kind kind;
    std::string grammar, text;
  };
  const std::vector<Walk> walks = {
      // [^,:&]* loops on most of ASCII and on every non-ASCII code point; ',' and ':' leave it.
      {ConstraintSpec::Kind::kJsonSchema,
       R"({"type":"object","properties":{"mkv":{"type":"string","pattern":"^(\\s*|((\\s*[^,:&\\s]+\\s*:[^,:&]*)(,\\s*[^,:&\\s]+\\s*:[^,:&]*)*))$"}}})",
       R"({"mkv":"color:blue é,length:350"})"},
      // Before the '/', any text but '/' loops; after it, any text (a line separator ends neither).
      {ConstraintSpec::Kind::kJsonSchema, R"({"type":"string","pattern":"^(.+)/(.+)$"})", R"("ab/c d")"},
      // An unconstrained string inside a rule that calls others: plain text of all categories, walked
      // over the skeleton; the string loops on everything but '"' and '\'.
      {ConstraintSpec::Kind::kJsonSchema,
       R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array","items":{"type":"object","properties":{"c":{"type":"string"}}}}}})",
       R"({"a":"x y\tz","b":[{"c":"q"}]})"},
      // A raw text loop outside JSON: control bytes are allowed here, so the shortcut must not drop them.
      {ConstraintSpec::Kind::kEbnf, "root ::= \"<\" [a-z]+ \">\" [^<]* \"</p>\"", "<p>one\ntwo</p>"},
  };
  std::vector<uint32_t> bits((*vocab_)->words());
  for (const Walk& w : walks) {
    ConstraintSpec spec;
    spec.kind = w.kind;
    spec.text = w.grammar;
    auto g = BuildGrammar(spec);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    auto cg = Compile(*g);
    ASSERT_TRUE(cg.ok()) << cg.status().ToString();
    auto bound = std::make_shared<const BoundGrammar>(std::make_shared<const CompiledGrammar>(std::move(*cg)), *vocab_);
    GrammarMatcher m(bound);
    const std::vector<int32_t> ids = tok_->EncodeText(w.text);
    for (size_t step = 0; step <= ids.size(); ++step) {
      ASSERT_TRUE(m.FillNextTokenBitmask(bits.data()).ok());
      size_t allowed = 0;
      for (size_t id = 0; id < tok_->vocab_size(); ++id) {
        const int32_t t = static_cast<int32_t>(id);
        if (bound->vocab().IsStop(t)) continue;
        const bool bit = (bits[id / 32] >> (id % 32)) & 1;
        const bool accepted = m.AcceptToken(t);
        if (accepted) m.Rollback(1);
        ASSERT_EQ(bit, accepted) << w.grammar << " step " << step << " token " << id << " '" << tok_->TokenBytes(t)
                                 << "'";
        allowed += bit;
      }
      if (step < ids.size()) {
        EXPECT_GT(allowed, 0u);
        ASSERT_TRUE(m.AcceptToken(ids[step])) << w.grammar << " step " << step;
      }
    }
    EXPECT_TRUE(m.CanTerminate()) << w.grammar;
  }
}

}  // namespace
}  // namespace deepinfer::grammar
