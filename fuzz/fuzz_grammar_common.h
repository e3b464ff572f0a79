// Shared by the grammar fuzzers: compile a constraint with small limits; when it compiles, drive a
// matcher over a tiny byte vocabulary with the remaining input as token choices. Nothing may crash, hang
// or grow without bound; a mask must only allow tokens the matcher then accepts.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "grammar/constraint.h"
#include "grammar/matcher.h"

// With `dsml_marker`, the vocabulary also holds the DSML marker's bytes (TokenIndex::MarkerBytes(0)) as a
// token, so a tool-call grammar can open its block.
inline void FuzzConstraint(deepinfer::grammar::ConstraintSpec spec, const uint8_t* choices, size_t n,
                           bool dsml_marker = false) {
  using namespace deepinfer::grammar;
  CompileLimits limits;
  limits.max_nfa_states = 200'000;
  limits.max_dfa_states = 20'000;
  limits.max_compile_ms = 500;
  auto g = BuildGrammar(spec);
  if (!g.ok()) return;
  auto cg = Compile(*g, limits);
  if (!cg.ok()) return;
  auto make_vocab = [](bool marker) {
    std::vector<std::string> tokens;
    for (int b = 0; b < 128; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
    for (const char* t : {"\"", "\":", "{\"", "},", "ab", "12", "é", "\xe4\xb8", "\xad", "null", "true", " "}) tokens.push_back(t);
    if (marker) {
      tokens.push_back(TokenIndex::MarkerBytes(0));
      for (const char* t : {"<", "</", "invoke", " name=\"", "parameter", " string=\"true\">", " string=\"false\">", ">\n"})
        tokens.push_back(t);
    }
    tokens.push_back("<eos>");
    auto v = TokenIndex::FromTokens(tokens, {static_cast<int32_t>(tokens.size() - 1)},
                                    {static_cast<int32_t>(tokens.size() - 1)}, tokens.size());
    return *v;
  };
  static std::shared_ptr<const TokenIndex> plain_vocab = make_vocab(false);
  static std::shared_ptr<const TokenIndex> marker_vocab = make_vocab(true);
  const std::shared_ptr<const TokenIndex>& vocab = dsml_marker ? marker_vocab : plain_vocab;
  MatcherLimits ml;
  ml.max_walk_nodes = 200'000;
  auto bound = std::make_shared<const BoundGrammar>(std::make_shared<const CompiledGrammar>(std::move(*cg)), vocab, ml);
  GrammarMatcher m(bound);
  std::vector<uint32_t> bits(vocab->words());
  for (size_t i = 0; i < n && i < 64; ++i) {
    if (!m.FillNextTokenBitmask(bits.data()).ok()) return;
    std::vector<int32_t> allowed;
    for (size_t id = 0; id < vocab->width(); ++id)
      if ((bits[id / 32] >> (id % 32)) & 1) allowed.push_back(static_cast<int32_t>(id));
    if (allowed.empty()) return;
    int32_t pick = allowed[choices[i] % allowed.size()];
    if (!m.AcceptToken(pick)) std::abort();  // the mask allowed it
    if (choices[i] % 7 == 0) m.Rollback(1);
    if (m.IsTerminated()) return;
  }
  (void)m.ForcedBytes(32);
}
