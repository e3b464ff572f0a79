// The token-level property the grammar tests check by brute force on small vocabularies: along a random
// walk of allowed tokens, the mask allows exactly the tokens whose bytes keep the text a valid prefix.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/matcher.h"

namespace deepinfer::grammar::test_support {

// Whether some completion of `prefix` by at most `extra` bytes of `alphabet` is in `g`'s language (the
// depth is the test's small constant, not input).
inline bool ValidPrefixByCompletion(const CompiledGrammar& g, const std::string& prefix, const std::string& alphabet,
                                    int extra) {
  if (g.Matches(prefix)) return true;
  if (extra == 0) return false;
  for (char c : alphabet)
    if (ValidPrefixByCompletion(g, prefix + c, alphabet, extra - 1)) return true;
  return false;
}

// Up to `steps` times: fills `m`'s mask of `words` 32-bit words, expects each token of `vocab` allowed
// exactly when `valid_prefix(text + token)`, then accepts an allowed token picked by `seed` (the walk
// ends early where none is allowed). `label` names the case in failure messages.
inline void ExpectMaskIsValidPrefixesAlongWalk(GrammarMatcher& m, const std::vector<std::string>& vocab, size_t words,
                                               uint32_t seed, int steps,
                                               const std::function<bool(const std::string&)>& valid_prefix,
                                               const std::string& label = "") {
  std::mt19937 rng(seed);
  std::string text;
  for (int step = 0; step < steps; ++step) {
    std::vector<uint32_t> bits(words);
    ASSERT_TRUE(m.FillNextTokenBitmask(bits.data()).ok());
    std::vector<int32_t> allowed;
    for (size_t id = 0; id < vocab.size(); ++id) {
      const bool want = valid_prefix(text + vocab[id]);
      const bool got = (bits[id / 32] >> (id % 32)) & 1;
      EXPECT_EQ(want, got) << label << " after '" << text << "' token '" << vocab[id] << "'";
      if (got) allowed.push_back(static_cast<int32_t>(id));
    }
    if (allowed.empty()) return;
    const int32_t pick = allowed[rng() % allowed.size()];
    ASSERT_TRUE(m.AcceptToken(pick));
    text += vocab[pick];
  }
}

}  // namespace deepinfer::grammar::test_support
