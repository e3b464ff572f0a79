// DeepSeek-V4.1 logits against transformers' deepseek_v41 (the fixtures of tests/model/data, see its README):
// full prefill, the collapsed sublayer inputs of every layer, teacher-forced decode and the greedy
// continuation. (Slow: the search below reruns whole sequences; the invariances are in v41_forward_test.)
//
// Tolerance. Both sides compute in fp32 from identical weights, so the arithmetic differs only by summation
// order: a few fp32 ulps per operation, ~1e-6 relative after ten layers, ~1e-5 on the logits. We allow
// 1e-4 · (1 + max |ref row|) per position, ten times that and far below any real mistake (a wrong mask,
// rope angle, scale rule or routing moves logits by 1e-2 … 1 on most positions).
// But the model is not continuous: its FP8/FP4 quantizers round to a grid and its top-k selections pick
// sets, so whenever a value lies within that ~1e-6 noise of its boundary (a rounding midpoint, a scale's
// power of two, the k-th/(k+1)-th score) the two sides may decide differently, and every later position
// that reads the result differs by 1e-4 … 1e-1. transformers disagrees with itself this way between runs of
// different shapes (README `checks`: chunked vs one-shot 2.9e-4, prefix recompute vs decode 0.13). So a
// comparison that fails is searched for such decisions (v41_probe.h): those within kEpsilon (relative) of
// their boundary are taken the other way one at a time (the closest ones), keeping the flip that moves the
// first mismatching position furthest. The test passes when at most kMaxFlips flips make every position agree — i.e. we equal the
// reference except for decisions that fp32 noise could take either way — and prints the flips it needed.
// Greedy tokens are then compared exactly (the smallest top-1/top-2 margin in the fixtures is 0.0009).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <tuple>
#include <memory>
#include <span>

#include <gtest/gtest.h>

#include "model/causal_lm.h"
#include "model/deepseek_v41/v41_model.h"
#include "model/sequential_blocks.h"
#include "v41_fixture.h"
#include "v41_runner.h"

namespace deepinfer::model {
namespace {

using test_support::V41FixtureDir;
using test_support::V41FixtureNames;
using test_support::Runner;
using test_support::V41Reference;

constexpr double kRelativeTolerance = 1e-4;
constexpr double kEpsilon = 5e-6;
constexpr int kMaxFlips = 4;
constexpr int kCandidatesPerRound = 24;

double MaxAbsDiff(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

double Tolerance(const float* ref, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(static_cast<double>(ref[i])));
  return kRelativeTolerance * (1 + m);
}

// A comparison against reference rows: `run(probe)` returns our rows (in the order of `positions`).
struct Comparison {
  std::string what;
  std::vector<int64_t> positions;  // the token position each row's logits are for
  std::vector<float> want;         // rows × vocab
  int64_t vocab = 0;
  std::function<std::vector<float>(V41Probe*)> run;
};

// The first row that disagrees (rows.size() if none), and how many do.
std::pair<size_t, int> FirstMismatch(const Comparison& c, const std::vector<float>& ours) {
  size_t first = c.positions.size();
  int bad = 0;
  for (size_t k = 0; k < c.positions.size(); ++k) {
    const float* a = ours.data() + k * c.vocab;
    const float* b = c.want.data() + k * c.vocab;
    if (MaxAbsDiff(a, b, c.vocab) > Tolerance(b, c.vocab)) {
      first = std::min(first, k);
      ++bad;
    }
  }
  return {first, bad};
}

// The position a decision's effect first reaches.
int64_t Reach(const V41Model& m, const V41Decision& d) {
  if (d.kind != V41DecisionKind::kLatent && d.kind != V41DecisionKind::kKey) return d.position;
  const int64_t r = m.config().compress_ratios[d.layer];
  return (d.position + 1) * r - 1;
}

// Searches the flips that make `c` agree (see the file comment); returns them, or fails the test.
std::vector<V41Decision> AgreeUpToFlips(const V41Model& m, const Comparison& c) {
  std::vector<V41Decision> flips;
  for (int round = 0;; ++round) {
    V41Probe probe;
    probe.epsilon = kEpsilon;
    probe.flips = flips;
    std::vector<float> ours = c.run(&probe);
    if (ours.size() != c.want.size()) {
      ADD_FAILURE() << c.what << ": got " << ours.size() / std::max<int64_t>(1, c.vocab) << " rows";
      return flips;
    }
    auto [first, bad] = FirstMismatch(c, ours);
    if (bad == 0) {
      std::printf("%s: %zu positions agree", c.what.c_str(), c.positions.size());
      if (flips.empty()) std::printf("\n");
      else std::printf(" with %zu flips:", flips.size());
      for (const V41Decision& f : flips) std::printf(" [%s]", f.ToString().c_str());
      if (!flips.empty()) std::printf("\n");
      return flips;
    }
    if (round == kMaxFlips) {
      ADD_FAILURE() << c.what << ": " << bad << " positions still disagree after " << flips.size()
                    << " flips; first at position " << c.positions[first];
      return flips;
    }
    // Candidates that can reach the first mismatching position, closest to their boundary first.
    std::vector<V41Decision> candidates;
    for (const V41Decision& d : probe.near)
      if (Reach(m, d) <= c.positions[first]) candidates.push_back(d);
    std::sort(candidates.begin(), candidates.end(), [](const V41Decision& a, const V41Decision& b) {
      return std::tie(a.margin, a.position, a.layer, a.element) < std::tie(b.margin, b.position, b.layer, b.element);
    });
    if (candidates.size() > static_cast<size_t>(kCandidatesPerRound)) candidates.resize(kCandidatesPerRound);
    // The candidate that moves the first mismatch furthest (then leaves the fewest mismatches).
    size_t best_first = first;
    int best_bad = bad;
    std::optional<V41Decision> best;
    for (const V41Decision& cand : candidates) {
      V41Probe trial;
      trial.flips = flips;
      trial.flips.push_back(cand);
      const std::vector<float> tried = c.run(&trial);
      if (tried.size() != c.want.size()) continue;
      auto [f, b] = FirstMismatch(c, tried);
      if (f > best_first || (f == best_first && b < best_bad)) {
        best_first = f;
        best_bad = b;
        best = cand;
        if (b == 0) break;
      }
    }
    if (!best) {
      ADD_FAILURE() << c.what << ": " << bad << " positions disagree, first at position " << c.positions[first]
                    << " (max |diff| "
                    << MaxAbsDiff(ours.data() + first * c.vocab, c.want.data() + first * c.vocab, c.vocab)
                    << "), and no decision within " << kEpsilon << " of its boundary explains it ("
                    << candidates.size() << " tried)";
      return flips;
    }
    flips.push_back(*best);
    if (getenv("V41_TEST_VERBOSE")) std::printf("  round %d: first mismatch at %lld (%d bad), flip %s\n", round, static_cast<long long>(c.positions[first]), bad, best->ToString().c_str());
  }
}

class V41ReferenceTest : public ::testing::TestWithParam<std::string> {};

Comparison PrefillComparison(Runner& run, const V41Reference& ref, const std::string& seq) {
  Comparison c;
  c.what = seq;
  c.positions = ref.Int64s(seq + ".logit_positions");
  c.want = ref.Floats(seq + ".logits");
  c.vocab = run.model->vocab_size();
  const std::vector<int32_t> tokens = ref.Tokens(seq + ".input_ids");
  c.run = [&run, tokens, positions = c.positions, vocab = c.vocab](V41Probe* probe) {
    std::vector<float> all = run.RunChunked(tokens, {static_cast<int64_t>(tokens.size())}, probe);
    std::vector<float> rows;
    for (int64_t p : positions) rows.insert(rows.end(), all.begin() + p * vocab, all.begin() + (p + 1) * vocab);
    return rows;
  };
  return c;
}

TEST_P(V41ReferenceTest, FullPrefillMatchesReference) {
  Runner run(GetParam());
  ASSERT_TRUE(run.model);
  V41Reference ref(GetParam());
  for (const char* seq : {"seq_len5", "seq_len150", "seq_len400"}) {
    Comparison c = PrefillComparison(run, ref, seq);
    c.what = GetParam() + " " + seq + " prefill";
    AgreeUpToFlips(*run.model, c);
  }
}

// The collapsed input of every attention and FFN site and of the final norm, at the stored positions of
// seq_len150 (with the flips the logits needed): a mistake shows as the first layer that differs.
TEST_P(V41ReferenceTest, SublayerInputsMatchReference) {
  Runner run(GetParam());
  ASSERT_TRUE(run.model);
  V41Reference ref(GetParam());
  Comparison c = PrefillComparison(run, ref, "seq_len150");
  c.what = GetParam() + " seq_len150 prefill";
  V41Probe probe;
  probe.flips = AgreeUpToFlips(*run.model, c);
  const std::vector<int32_t> tokens = ref.Tokens("seq_len150.input_ids");
  V41Trace trace;
  ASSERT_FALSE(run.RunChunked(tokens, {static_cast<int64_t>(tokens.size())}, &probe, &trace).empty());
  const int64_t layers = run.model->config().num_layers, d = run.model->config().hidden_size;
  const int64_t n = static_cast<int64_t>(tokens.size());
  const std::vector<int64_t>& positions = c.positions;
  const int64_t p = static_cast<int64_t>(positions.size());
  auto check = [&](const std::vector<float>& ours, const std::vector<float>& want, int64_t layer, const char* what) {
    for (int64_t k = 0; k < p; ++k) {
      const float* a = ours.data() + (layer * n + positions[k]) * d;
      const float* b = want.data() + (layer * p + k) * d;
      EXPECT_LE(MaxAbsDiff(a, b, d), Tolerance(b, d)) << what << " of layer " << layer << " at " << positions[k];
    }
  };
  const std::vector<float> attn_in = ref.Floats("seq_len150.attn_in"), ffn_in = ref.Floats("seq_len150.ffn_in");
  for (int64_t l = 0; l < layers; ++l) {
    check(trace.attn_in, attn_in, l, "attention input");
    check(trace.ffn_in, ffn_in, l, "FFN input");
  }
  check(trace.final_norm_in, ref.Floats("seq_len150.final_norm_in"), 0, "final norm input");
}

// Teacher-forced decode over the reference's greedy tokens: prefill the prompt, then one token per step.
TEST_P(V41ReferenceTest, DecodeStepsAndGreedyContinuationMatchReference) {
  Runner run(GetParam());
  ASSERT_TRUE(run.model);
  V41Reference ref(GetParam());
  const std::vector<int32_t> prompt = ref.Tokens("greedy.prompt_ids"), output = ref.Tokens("greedy.output_ids");
  Comparison c;
  c.what = GetParam() + " greedy decode";
  c.want = ref.Floats("greedy.step_logits");
  c.vocab = run.model->vocab_size();
  for (size_t k = 0; k < output.size(); ++k) c.positions.push_back(static_cast<int64_t>(prompt.size() + k) - 1);
  // free == true: feed our own argmax instead of the reference's tokens.
  auto decode = [&](V41Probe* probe, bool free, std::vector<int32_t>* tokens) {
    run.Reset();
    auto state = run.model->NewSequence();
    std::vector<float> rows;
    ForwardOutput out;
    SequenceChunk chunk{state.get(), prompt, LogitsWanted::kLast};
    if (!run.Step(std::span(&chunk, 1), &out, probe).ok()) return rows;
    for (size_t k = 0; k < output.size(); ++k) {
      rows.insert(rows.end(), out.logits.begin(), out.logits.end());
      const int32_t argmax = static_cast<int32_t>(std::max_element(out.logits.begin(), out.logits.end()) - out.logits.begin());
      if (tokens) tokens->push_back(argmax);
      int32_t next = free ? argmax : output[k];
      SequenceChunk step{state.get(), std::span(&next, 1), LogitsWanted::kLast};
      if (!run.Step(std::span(&step, 1), &out, probe).ok()) return std::vector<float>{};
    }
    return rows;
  };
  c.run = [&](V41Probe* probe) { return decode(probe, false, nullptr); };
  V41Probe probe;
  probe.flips = AgreeUpToFlips(*run.model, c);
  std::vector<int32_t> greedy;
  decode(&probe, true, &greedy);
  EXPECT_EQ(greedy, output) << "greedy continuation";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, V41ReferenceTest, ::testing::ValuesIn(V41FixtureNames()));

}  // namespace
}  // namespace deepinfer::model
