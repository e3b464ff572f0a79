// The mask entries' shortcuts (subtrees taken whole where every character loops back to the state, counted
// text taken by length where every character of a class is one unit) on the real DeepSeek vocabulary:
// every mask along seeded walks through random patterns (character classes with counts, searches for a
// word anywhere in the text) equals, bit for bit, the mask of a plain walk of the token trie that steps
// every byte through the automaton.
#include <gtest/gtest.h>

#include <random>

#include "grammar/compiler.h"
#include "grammar/constraint.h"
#include "grammar/matcher.h"
#include "support/sanitizer_scale.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::grammar {
namespace {

// The reference: every trie token stepped byte by byte from (state, count), dropping a prefix where the
// automaton or its counter dies (no extension of it can live either); stop tokens where the state may end.
// Only for automata without calls, where one (state, count) is the whole parse.
std::vector<uint32_t> PlainMask(const CompiledGrammar& g, const TokenIndex& v, uint32_t state, uint32_t count) {
  std::vector<uint32_t> bits(v.words(), 0);
  std::vector<uint32_t> states(v.max_depth() + 1), counts(v.max_depth() + 1);
  states[0] = state;
  counts[0] = count;
  for (uint32_t i = 1; i < v.end(0);) {
    const uint16_t d = v.depth(i);
    uint32_t c = counts[d - 1];
    const uint32_t t = g.Step(states[d - 1], v.byte(i), &c);
    if (t == CompiledGrammar::kDead || !g.CountLive(t, c)) {
      i = v.end(i);
      continue;
    }
    states[d] = t;
    counts[d] = c;
    for (const int32_t* k = v.tokens_begin(i); k != v.tokens_end(i); ++k) bits[*k >> 5] |= 1u << (*k & 31);
    ++i;
  }
  if (g.accepting(state))
    for (int32_t s : v.stop_ids()) bits[s >> 5] |= 1u << (s & 31);
  return bits;
}

// (state, count) after `text` from the start; false when the text is rejected.
bool RunText(const CompiledGrammar& g, const std::string& text, uint32_t* state, uint32_t* count) {
  *state = g.start();
  *count = 0;
  for (char ch : text) {
    *state = g.Step(*state, static_cast<uint8_t>(ch), count);
    if (*state == CompiledGrammar::kDead || !g.CountLive(*state, *count)) return false;
  }
  return true;
}

// A random pattern of character classes with counts and words; an "unanchored" one is wrapped in ".*"
// on both sides, so it searches for its pieces anywhere (as a JSON Schema pattern without ^ and $ does).
std::string RandomPattern(std::mt19937& rng) {
  const std::vector<std::string> classes = {"[a-z]", "[a-z0-9_-]", "\\w", "\\S", "[^/]", ".", "[A-Fa-f0-9]",
                                            "[^,\"]", "\\d", "[\\w.\\- ]", "[^@\\s]", "[ -~]", "[^a-c]"};
  const std::vector<std::string> counts = {"+", "*", "{1,3}", "{2,8}", "?", "", "{10}"};
  const std::vector<std::string> words = {"Hpt_", "customer", "ab", "-", "/", "\\.php", " ", "er", "(maker|admin)"};
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  std::string pattern;
  const int pieces = 1 + static_cast<int>(rng() % 3);
  for (int k = 0; k < pieces; ++k) {
    if (rng() % 3 == 0) pattern += pick(words);
    else pattern += pick(classes) + pick(counts);
  }
  return rng() % 2 == 0 ? pattern : ".*" + pattern + ".*";
}

TEST(MaskShortcuts, EqualThePlainTrieWalkOnTheRealVocabulary) {
  auto tok = tokenizer::LoadTokenizer("deepseek-v3");
  ASSERT_TRUE(tok.ok());
  TokenIndex::Options options;
  options.mask_width = 129280;
  auto vocab = TokenIndex::FromTokenizer(*tok, options);
  ASSERT_TRUE(vocab.ok());
  const TokenIndex& v = **vocab;
  std::mt19937 rng(27);
  const int patterns = ::deepinfer::test_support::RoundsForThisBuild(30, 5);
  int compared = 0;
  for (int n = 0; n < patterns; ++n) {
    const std::string pattern = RandomPattern(rng);
    ConstraintSpec spec;
    spec.kind = ConstraintSpec::Kind::kRegex;
    spec.text = pattern;
    auto g = BuildGrammar(spec);
    if (!g.ok()) continue;  // a pattern the front end refuses (none is expected, but the property is the mask)
    auto compiled = Compile(*g);
    ASSERT_TRUE(compiled.ok()) << pattern << ": " << compiled.status().ToString();
    ASSERT_EQ(compiled->num_call_edges(), 0u) << pattern;
    auto cg = std::make_shared<const CompiledGrammar>(std::move(*compiled));
    GrammarMatcher m(std::make_shared<const BoundGrammar>(cg, *vocab));
    std::string text;
    std::vector<uint32_t> bits(v.words());
    for (int step = 0; step < 5 && !m.IsTerminated(); ++step) {
      ASSERT_TRUE(m.FillNextTokenBitmask(bits.data()).ok()) << pattern;
      uint32_t state = 0, count = 0;
      ASSERT_TRUE(RunText(*cg, text, &state, &count)) << pattern << " after '" << text << "'";
      const std::vector<uint32_t> want = PlainMask(*cg, v, state, count);
      for (size_t w = 0; w < bits.size(); ++w) {
        if (bits[w] == want[w]) continue;
        const uint32_t diff = bits[w] ^ want[w];
        const int32_t id = static_cast<int32_t>(w * 32 + static_cast<size_t>(__builtin_ctz(diff)));
        FAIL() << pattern << " after '" << text << "': token " << id << " '" << v.Bytes(id) << "' is "
               << (((bits[w] >> (id & 31)) & 1) ? "allowed" : "masked") << " by the matcher only";
      }
      ++compared;
      // Next: a random allowed token other than the stop token (most of them continue the text).
      std::vector<int32_t> allowed;
      for (size_t w = 0; w < bits.size(); ++w)
        for (uint32_t word = bits[w]; word; word &= word - 1) {
          const auto id = static_cast<int32_t>(w * 32 + static_cast<size_t>(__builtin_ctz(word)));
          if (!v.IsStop(id)) allowed.push_back(id);
        }
      if (allowed.empty()) break;
      const int32_t pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.AcceptToken(pick));
      text += v.Bytes(pick);
    }
  }
  // Most walks go several steps into their text: the comparisons are many states, not a few starts.
  EXPECT_GE(compared, 3 * patterns);
}

}  // namespace
}  // namespace deepinfer::grammar
