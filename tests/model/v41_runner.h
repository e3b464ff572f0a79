// A V4.1 fixture model with pools and an in-order block filler, for the model tests.
#pragma once

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/causal_lm.h"
#include "model/deepseek_v41/v41_model.h"
#include "model/sequential_blocks.h"
#include "v41_fixture.h"

namespace deepinfer::model::test_support {

struct Runner {
  std::unique_ptr<V41Model> model;
  kvcache::KvPools pools;
  std::unique_ptr<SequentialBlocks> blocks;

  explicit Runner(const std::string& fixture, int64_t blocks_each = 64) {
    auto m = V41Model::Load(V41FixtureDir(fixture));
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) return;
    model = std::move(*m);
    auto p = kvcache::KvPools::Create(model->cache_spec(), blocks_each);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    pools = std::move(*p);
    Reset();
  }
  void Reset() { blocks = std::make_unique<SequentialBlocks>(model->cache_spec(), pools); }

  Status Step(std::span<const SequenceChunk> chunks, ForwardOutput* out, V41Probe* probe = nullptr,
              V41Trace* trace = nullptr) {
    for (const SequenceChunk& c : chunks) DI_RETURN_IF_ERROR(blocks->Reserve(*c.state, static_cast<int64_t>(c.tokens.size())));
    return model->ForwardProbed(chunks, pools, out, trace, probe);
  }

  // All-position logits of `tokens` through a fresh sequence in chunks of the given sizes (cycled).
  std::vector<float> RunChunked(std::span<const int32_t> tokens, const std::vector<int64_t>& sizes,
                                V41Probe* probe = nullptr, V41Trace* trace = nullptr) {
    Reset();
    auto state = model->NewSequence();
    std::vector<float> logits;
    size_t at = 0, k = 0;
    while (at < tokens.size()) {
      const int64_t len = std::min<int64_t>(sizes[k++ % sizes.size()], static_cast<int64_t>(tokens.size() - at));
      SequenceChunk chunk{state.get(), tokens.subspan(at, len), LogitsWanted::kAll};
      ForwardOutput out;
      Status s = Step(std::span(&chunk, 1), &out, probe, trace);
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!s.ok()) return {};
      logits.insert(logits.end(), out.logits.begin(), out.logits.end());
      at += static_cast<size_t>(len);
    }
    return logits;
  }
};

}  // namespace deepinfer::model::test_support
