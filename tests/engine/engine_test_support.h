// Shared pieces of the engine tests: the tiny V4 fixture model of tests/model/data, a reference greedy
// loop that drives the model directly (no engine), and prompt makers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "model/causal_lm.h"
#include "model/sequential_blocks.h"

namespace deepinfer::engine::test_support {

// A fixture of tests/model/data by name, or a checkpoint a test wrote (an absolute path).
inline std::string FixtureDir(const std::string& name = "v4_mixed") {
  if (name.starts_with("/")) return name;
  return std::string(DEEPINFER_SOURCE_DIR) + "/tests/model/data/" + name;
}

inline std::unique_ptr<model::CausalLM> LoadFixture(const std::string& name = "v4_mixed", bool drafting = false) {
  model::LoadOptions options;
  options.prefault = false;
  options.drafting = drafting;
  auto m = model::LoadCausalLM(FixtureDir(name), options);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

// The model is loaded with its draft layers when the options' speculative method runs them.
inline std::unique_ptr<Engine> MakeEngine(EngineOptions options = {}, const std::string& name = "v4_mixed") {
  if (options.kv_cache_bytes == (int64_t{1} << 30)) options.kv_cache_bytes = int64_t{64} << 20;
  auto e = Engine::Create(LoadFixture(name, options.speculative.uses_draft_layers()), options);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

// Tokens from a small LCG over [2, vocab) (0 and 1 are BOS/EOS in the fixtures).
inline std::vector<int32_t> Prompt(int64_t n, uint32_t seed, int32_t vocab = 256) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 12345;
  for (auto& v : t) {
    x = x * 1664525u + 1013904223u;
    v = 2 + static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(vocab - 2));
  }
  return t;
}

// Greedy decoding with the model alone: one sequence, prefill in one chunk, argmax (lowest id on ties),
// no end-of-sequence handling: the reference every engine run is compared with.
inline std::vector<int32_t> ReferenceGreedy(const std::vector<int32_t>& prompt, int64_t max_tokens,
                                            const std::string& name = "v4_mixed") {
  auto m = LoadFixture(name);
  if (!m) return {};
  auto pools = kvcache::KvPools::Create(m->cache_spec(), kvcache::BlocksFor(static_cast<int64_t>(prompt.size()) + max_tokens) + 2);
  EXPECT_TRUE(pools.ok());
  model::SequentialBlocks blocks(m->cache_spec(), *pools);
  auto state = m->NewSequence();
  std::vector<int32_t> out;
  std::vector<int32_t> input = prompt;
  model::ForwardOutput fo;
  for (int64_t i = 0; i < max_tokens; ++i) {
    EXPECT_TRUE(blocks.Reserve(*state, static_cast<int64_t>(input.size())).ok());
    model::SequenceChunk c{state.get(), input, model::LogitsWanted::kLast};
    Status s = m->Forward(std::span(&c, 1), *pools, &fo);
    EXPECT_TRUE(s.ok()) << s.ToString();
    const float* row = fo.row(0);
    int32_t best = 0;
    for (int32_t v = 1; v < fo.vocab_size; ++v)
      if (row[v] > row[best]) best = v;
    out.push_back(best);
    input = {best};
  }
  return out;
}

// Greedy decoding of `max_tokens` with EOS ignored, logprobs and `top_logprobs` alternatives of every step:
// the default 20 of the fixtures' 256-token vocabulary fingerprint the logits for a bit-identity check.
inline RequestParams GreedyProbe(int64_t max_tokens, int top_logprobs = 20) {
  RequestParams p;
  p.sampling.temperature = 0;
  p.sampling.max_tokens = max_tokens;
  p.sampling.ignore_eos = true;
  p.sampling.logprobs = true;
  p.sampling.top_logprobs = top_logprobs;
  return p;
}

// Every generated token's id, logprob and top-20 alternatives (of the first sequence), flattened.
inline std::vector<float> Fingerprint(const GenerateOutput& r) {
  std::vector<float> v;
  for (const GeneratedToken& t : r.sequences[0].tokens) {
    v.push_back(static_cast<float>(t.id));
    v.push_back(t.logprob);
    for (const TokenAlternative& a : t.top_logprobs) {
      v.push_back(static_cast<float>(a.id));
      v.push_back(a.logprob);
    }
  }
  return v;
}

inline std::vector<int32_t> Ids(const GenerateOutput::Sequence& s) {
  std::vector<int32_t> ids;
  for (const GeneratedToken& t : s.tokens) ids.push_back(t.id);
  return ids;
}

}  // namespace deepinfer::engine::test_support
