// The scheduler alone, with no model: its plans are plain data (fresh and restored states, chunks, block
// tables, sampling setups) and its updates come from hand-made results, as any executor would send them.
#include <algorithm>
#include <atomic>

#include <gtest/gtest.h>

#include "engine/scheduler.h"

namespace deepinfer::engine {
namespace {

class NoBytes final : public PrefixBlockBytes {
 public:
  std::vector<std::span<uint8_t>> PrefixBlock(int32_t) override { return {}; }
};

struct Harness {
  Inbox inbox;
  EngineMetrics metrics;
  NoBytes bytes;
  std::atomic<int> finished{0};
  OutputProcessor output{nullptr, 1, 0, [](std::vector<std::pair<RequestId, int>>) {}};
  std::unique_ptr<Scheduler> scheduler;

  explicit Harness(EngineOptions options = {}, int64_t prefix_blocks = 16) {
    SchedulerConfig config;
    config.options = std::move(options);
    config.prefix_blocks = prefix_blocks;
    config.vocab_size = 256;
    config.max_model_len = 2048;
    config.eos_token_ids = {1};
    config.supports_restore = true;
    config.supports_fork = true;
    scheduler = std::make_unique<Scheduler>(std::move(config), &inbox, &metrics, &output, &bytes);
  }

  void Add(RequestId id, const std::vector<int32_t>& prompt, int64_t max_tokens, int n = 1) {
    auto r = std::make_unique<Request>();
    r->id = id;
    r->order = static_cast<int64_t>(id);
    r->prompt_tokens = static_cast<int64_t>(prompt.size());
    r->params.sampling.max_tokens = max_tokens;
    r->params.sampling.n = n;
    r->root = kvcache::RootHash({}, "exact", "f32", "");
    r->out = std::make_shared<OutputRequest>();
    r->out->id = id;
    r->out->callback = [this](RequestUpdate u) { finished += u.finished; };
    r->out->seqs.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      auto s = std::make_unique<Sequence>();
      s->request = r.get();
      s->index = i;
      s->born = i == 0;
      if (i == 0) s->tokens = prompt;
      r->seqs.push_back(std::move(s));
    }
    r->live = n;
    MutexLock lock(&inbox.mu);
    ++inbox.waiting_fresh;
    inbox.new_requests.push_back(std::move(r));
  }
};

StepResult Sampled(SeqId id, int32_t token) {
  StepResult result;
  SequenceResult r;
  r.id = id;
  r.tokens.push_back({.id = token});
  result.sequences.push_back(std::move(r));
  return result;
}

std::vector<int32_t> Prompt(int n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) p[static_cast<size_t>(i)] = 2 + i % 200;
  return p;
}

TEST(EngineScheduler, PlansPrefillDecodeAndARestoredPrefixHitAsPlainData) {
  Harness h;
  const std::vector<int32_t> prompt = Prompt(300);
  h.Add(1, prompt, 2);
  ASSERT_FALSE(h.scheduler->DrainInbox(false));

  const StepPlan prefill = h.scheduler->Schedule();
  ASSERT_EQ(prefill.chunks.size(), 1u);
  const PlannedChunk& c = prefill.chunks[0];
  ASSERT_TRUE(c.setup.has_value());
  EXPECT_EQ(c.setup->kind, StateSetup::Kind::kFresh);
  EXPECT_EQ(c.start, 0);
  EXPECT_EQ(c.end, 300);
  EXPECT_EQ(c.tokens, prompt);
  EXPECT_TRUE(c.logits);
  EXPECT_EQ(c.samplers, std::vector<SeqId>{c.id});
  EXPECT_EQ(c.prefix_table.size(), 3u);  // 300 positions: three blocks
  ASSERT_EQ(prefill.new_samplers.size(), 1u);
  EXPECT_EQ(prefill.new_samplers[0].id, c.id);
  EXPECT_EQ(prefill.new_samplers[0].ending_ids, std::vector<int32_t>{1});
  EXPECT_EQ(prefill.new_samplers[0].params.max_tokens, 2);
  const SeqId first = c.id;

  h.scheduler->Update(Sampled(first, 5));
  const StepPlan decode = h.scheduler->Schedule();
  ASSERT_EQ(decode.chunks.size(), 1u);
  EXPECT_FALSE(decode.chunks[0].setup.has_value());  // it continues its state
  EXPECT_EQ(decode.chunks[0].start, 300);
  EXPECT_EQ(decode.chunks[0].end, 301);
  EXPECT_EQ(decode.chunks[0].tokens, std::vector<int32_t>{5});
  EXPECT_TRUE(decode.new_samplers.empty());

  h.scheduler->Update(Sampled(first, 7));  // max_tokens: finished
  EXPECT_TRUE(h.scheduler->Schedule().empty());

  // The same prompt again: its two full blocks are cached, so the state is restored at position 256 and
  // only the rest is computed; the finished sequence's state is released in the same plan.
  h.Add(2, prompt, 1);
  ASSERT_FALSE(h.scheduler->DrainInbox(false));
  const StepPlan hit = h.scheduler->Schedule();
  ASSERT_EQ(hit.chunks.size(), 1u);
  ASSERT_TRUE(hit.chunks[0].setup.has_value());
  EXPECT_EQ(hit.chunks[0].setup->kind, StateSetup::Kind::kRestore);
  EXPECT_EQ(hit.chunks[0].setup->position, 256);
  EXPECT_EQ(hit.chunks[0].start, 256);
  EXPECT_EQ(hit.chunks[0].end, 300);
  EXPECT_EQ(hit.chunks[0].prefix_table[0], c.prefix_table[0]);  // shared by reference
  EXPECT_EQ(hit.finished, std::vector<SeqId>{first});
  {
    MutexLock lock(&h.metrics.mu);
    EXPECT_EQ(h.metrics.counters.prefix_cache_hits, 256u);
  }

  h.scheduler->Update(Sampled(hit.chunks[0].id, 1));  // end of sequence
  h.scheduler->AbortAll();
  h.output.Stop();
  EXPECT_EQ(h.finished.load(), 2);
}

TEST(EngineScheduler, BirthsSampleFromTheParentsRowAndForkInTheNextPlan) {
  Harness h;
  const std::vector<int32_t> prompt = Prompt(200);  // one full block and a partial one
  h.Add(1, prompt, 4, /*n=*/2);
  ASSERT_FALSE(h.scheduler->DrainInbox(false));

  const StepPlan prefill = h.scheduler->Schedule();
  ASSERT_EQ(prefill.chunks.size(), 1u);  // only output 0 computes the prompt
  const PlannedChunk& c = prefill.chunks[0];
  ASSERT_EQ(c.samplers.size(), 2u);  // both outputs sample from its row
  EXPECT_EQ(c.samplers[0], c.id);
  const SeqId parent = c.id, child = c.samplers[1];
  ASSERT_EQ(prefill.new_samplers.size(), 2u);
  EXPECT_EQ(prefill.new_samplers[1].id, child);
  EXPECT_EQ(prefill.new_samplers[1].index, 1);
  EXPECT_TRUE(prefill.new_samplers[1].prompt.empty());  // its penalty counts come from its parent's

  StepResult result;
  for (const auto& [id, token] : {std::pair<SeqId, int32_t>{parent, 5}, {child, 6}}) {
    SequenceResult r;
    r.id = id;
    r.tokens.push_back({.id = token});
    result.sequences.push_back(std::move(r));
  }
  h.scheduler->Update(result);

  const StepPlan decode = h.scheduler->Schedule();
  ASSERT_EQ(decode.forks.size(), 1u);
  EXPECT_EQ(decode.forks[0].child, child);
  EXPECT_EQ(decode.forks[0].parent, parent);
  ASSERT_EQ(decode.copies.size(), 1u);  // the partial prompt block
  EXPECT_FALSE(decode.copies[0].window);
  ASSERT_EQ(decode.chunks.size(), 2u);
  const PlannedChunk& p = decode.chunks[0].id == parent ? decode.chunks[0] : decode.chunks[1];
  const PlannedChunk& k = decode.chunks[0].id == parent ? decode.chunks[1] : decode.chunks[0];
  ASSERT_EQ(k.id, child);
  EXPECT_FALSE(k.setup.has_value());  // its state is the fork
  EXPECT_EQ(p.tokens, std::vector<int32_t>{5});
  EXPECT_EQ(k.tokens, std::vector<int32_t>{6});
  EXPECT_EQ(k.start, 200);
  EXPECT_EQ(k.prefix_table[0], p.prefix_table[0]);  // the full block is shared
  EXPECT_EQ(decode.copies[0].from, p.prefix_table[1]);
  EXPECT_EQ(decode.copies[0].to, k.prefix_table[1]);
  EXPECT_NE(k.prefix_table[1], p.prefix_table[1]);

  h.scheduler->AbortAll();
  h.output.Stop();
  EXPECT_EQ(h.finished.load(), 1);
}

// A machine whose every step costs 10 ms plus 1 ms per token (so the cost model's fit is exact), fed to
// the scheduler as plain step costs: the executor's forward-pass start and end.
double MachineSeconds(const StepPlan& plan) {
  int64_t tokens = 0;
  for (const PlannedChunk& c : plan.chunks) tokens += c.end - c.start;
  return 0.010 + 0.001 * static_cast<double>(tokens);
}

StepResult Ran(const StepPlan& plan, int32_t token) {
  StepResult result;
  result.forward_start_nanos = 1;
  result.forward_end_nanos = 1 + static_cast<int64_t>(MachineSeconds(plan) * 1e9);
  for (const PlannedChunk& c : plan.chunks) {
    if (!c.logits) continue;
    SequenceResult r;
    r.id = c.id;
    r.tokens.push_back({.id = token});
    result.sequences.push_back(std::move(r));
  }
  return result;
}

TEST(EngineScheduler, PromptsSharingAPrefixArrivingTogetherComputeItOnce) {
  // Three requests with the same 600-token prompt arrive together (agents' first turns under one system
  // prompt). The first computes it (a chunk of 512, then 88); the others wait while it computes the blocks
  // they lack, then resume from its four cached full blocks (the last, partial block is always computed):
  // 600 + 2 × 88 = 776 prompt positions computed, not 3 × 600.
  Harness h({}, /*prefix_blocks=*/32);
  std::vector<int32_t> prompt(600);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(2 + (i * 7) % 250);
  for (RequestId id = 1; id <= 3; ++id) h.Add(id, prompt, 2);
  ASSERT_FALSE(h.scheduler->DrainInbox(false));
  int64_t prompt_positions = 0, steps = 0;
  for (; steps < 100; ++steps) {
    const StepPlan plan = h.scheduler->Schedule();
    if (plan.empty()) break;
    for (const PlannedChunk& c : plan.chunks) prompt_positions += std::max<int64_t>(0, std::min<int64_t>(c.end, 600) - c.start);
    h.scheduler->Update(Ran(plan, 5));
  }
  EXPECT_LT(steps, 100);
  EXPECT_EQ(prompt_positions, 600 + 2 * 88);
  h.output.Stop();
  EXPECT_EQ(h.finished.load(), 3);
}

TEST(EngineScheduler, ASlowMachinesCalibrationStillHoldsAStepOfSeveralSequences) {
  // A machine whose every step costs 1 s, 100 ms per sequence and 2 ms per token: the profile's budget of
  // forward time is spent by its first two steps (2.124 s and 1.228 s). Its one step of eight sequences a
  // token each still runs, so the fit knows a sequence's own cost: the first real step, sixteen prompts of
  // 8 tokens, is predicted at the machine's 1 + 1.6 + 0.256 = 2.856 s. From single-sequence steps alone it
  // would be 1.1 + 0.256 s.
  auto slow = [](const StepPlan& plan) {
    StepResult result = Ran(plan, 5);
    int64_t tokens = 0;
    for (const PlannedChunk& c : plan.chunks) tokens += c.end - c.start;
    const double seconds = 1 + 0.1 * static_cast<double>(plan.chunks.size()) + 0.002 * static_cast<double>(tokens);
    result.forward_end_nanos = result.forward_start_nanos + static_cast<int64_t>(seconds * 1e9);
    return result;
  };
  Harness h({}, /*prefix_blocks=*/64);
  int64_t profile_steps = 0;
  h.scheduler->Calibrate([&](const StepPlan& plan) {
    ++profile_steps;
    return slow(plan);
  });
  EXPECT_EQ(profile_steps, 5);  // 512, 64, 1, 1 and the eight sequences' step; then the budget stops it
  for (RequestId id = 1; id <= 16; ++id) {
    std::vector<int32_t> prompt(8);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(2 + (i * 5 + id * 11) % 250);
    h.Add(id, prompt, 2);
  }
  ASSERT_FALSE(h.scheduler->DrainInbox(false));
  const StepPlan plan = h.scheduler->Schedule();
  ASSERT_EQ(plan.chunks.size(), 16u);
  EXPECT_NEAR(h.scheduler->PredictedStepSeconds(), 2.856, 0.03);
  h.scheduler->Update(slow(plan));
  h.scheduler->AbortAll();
  h.output.Stop();
}

TEST(EngineScheduler, PromptsArrivingTogetherBesideAStreamKeepItsStepsWithinTheDerivedTarget) {
  // One stream decodes when fifteen prompts of 300 tokens arrive together. With k streams decoding, the
  // derived target is 1.5 × the larger of their decode step (10 + k ms) and that of 8 streams (18 ms). Every
  // step the streams wait on stays within it, but for the best prompt's minimal chunk of 16 tokens when the
  // decodes alone fill it: at most max(1.5 × max(10 + k, 18), 10 + k + 16) ms. A minimal chunk for every
  // prompt would make the first such step 10 + 1 + 15 × 16 = 251 ms against a target of 27 ms.
  EngineOptions options;
  options.tbt_target_ms = kDerivedTbtTarget;
  Harness h(options, /*prefix_blocks=*/96);
  h.scheduler->Calibrate([](const StepPlan& plan) { return Ran(plan, 5); });
  // Prompts of their own (no prefix hits between them).
  auto prompt = [](RequestId id) {
    std::vector<int32_t> p(300);
    for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int32_t>(2 + (i * 7 + id * 13) % 250);
    return p;
  };
  h.Add(1, prompt(1), 40);
  ASSERT_FALSE(h.scheduler->DrainInbox(false));
  h.scheduler->Update(Ran(h.scheduler->Schedule(), 5));  // nobody waits on its prompt: one chunk
  for (RequestId id = 2; id <= 16; ++id) h.Add(id, prompt(id), 8);
  ASSERT_FALSE(h.scheduler->DrainInbox(false));

  int64_t steps = 0, mixed = 0;
  for (; steps < 1000; ++steps) {
    const StepPlan plan = h.scheduler->Schedule();
    if (plan.empty()) break;  // all done
    if (plan.chunks.empty()) continue;  // a step of finished sequences' snapshots only
    int64_t decodes = 0, prompt_chunks = 0;
    for (const PlannedChunk& c : plan.chunks) (c.end - c.start == 1 ? decodes : prompt_chunks) += 1;  // as the scheduler counts them
    if (decodes > 0) {
      const double k = static_cast<double>(decodes);
      const double bound = std::max(1.5 * std::max(0.010 + 0.001 * k, 0.018), 0.010 + 0.001 * (k + 16));
      EXPECT_LE(MachineSeconds(plan), bound + 1e-9) << "step " << steps << ": " << decodes << " decodes, "
                                                    << prompt_chunks << " prompt chunks";
      mixed += prompt_chunks > 0;
    }
    h.scheduler->Update(Ran(plan, 5));
  }
  EXPECT_LT(steps, 1000);  // the scheduler ran out of work: every request got through
  EXPECT_GT(mixed, 0);
  h.scheduler->AbortAll();  // nothing left to abort
  h.output.Stop();
  EXPECT_EQ(h.finished.load(), 16);
}

}  // namespace
}  // namespace deepinfer::engine
