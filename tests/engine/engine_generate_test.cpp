// The engine end to end on the tiny V4 fixture: results against the model driven directly, batch and
// chunking invariance, preemption, n > 1, finish reasons, cancellation, deadlines and bad input.
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "core/clock.h"
#include "engine_test_support.h"
#include "support/sanitizer_scale.h"
#include "sampling/logits_mask.h"

namespace deepinfer::engine {
namespace {

using test_support::Ids;
using test_support::MakeEngine;
using test_support::Prompt;
using test_support::ReferenceGreedy;

RequestParams Greedy(int64_t max_tokens) {
  RequestParams p;
  p.sampling.temperature = 0;
  p.sampling.max_tokens = max_tokens;
  p.sampling.ignore_eos = true;
  return p;
}

TEST(EngineGenerate, GreedyMatchesTheModelDrivenDirectly) {
  auto engine = MakeEngine();
  ASSERT_TRUE(engine);
  const std::vector<std::vector<int32_t>> prompts = {Prompt(5, 1), Prompt(130, 2), Prompt(300, 3)};
  auto results = engine->Generate(prompts, Greedy(12));
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const GenerateOutput& r = (*results)[i];
    ASSERT_TRUE(r.status.ok());
    EXPECT_EQ(r.prompt_tokens, static_cast<int64_t>(prompts[i].size()));
    ASSERT_EQ(r.sequences.size(), 1u);
    EXPECT_EQ(r.sequences[0].finish, FinishReason::kLength);
    EXPECT_EQ(Ids(r.sequences[0]), ReferenceGreedy(prompts[i], 12)) << "prompt " << i;
  }
}

// A request's tokens and logprobs, whatever runs beside it and however its prompt is chunked.
struct Observed {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  bool operator==(const Observed&) const = default;
};

Observed Observe(const GenerateOutput& r, size_t seq = 0) {
  Observed o;
  for (const GeneratedToken& t : r.sequences[seq].tokens) {
    o.ids.push_back(t.id);
    o.logprobs.push_back(t.logprob);
  }
  return o;
}

RequestParams Seeded(int64_t max_tokens, uint64_t seed) {
  RequestParams p;
  p.sampling.temperature = 0.9;
  p.sampling.top_p = 0.95;
  p.sampling.max_tokens = max_tokens;
  p.sampling.seed = seed;
  p.sampling.logprobs = true;
  p.sampling.ignore_eos = true;
  return p;
}

TEST(EngineGenerate, PropertySeededRequestsAreBatchAndChunkInvariant) {
  const std::vector<int32_t> subject = Prompt(200, 42);
  // Alone, with whole-prompt chunks.
  Observed alone;
  {
    EngineOptions o;
    o.prefill_chunk = 512;
    auto engine = MakeEngine(o);
    ASSERT_TRUE(engine);
    auto r = engine->Generate(std::vector<std::vector<int32_t>>{subject}, Seeded(10, 7));
    ASSERT_TRUE(r.ok());
    alone = Observe((*r)[0]);
    ASSERT_EQ(alone.ids.size(), 10u);
  }
  // Among 1..64 other requests with other seeds and lengths (a third sharing its first block, so it may
  // hit their cached prefix), chunked by 7..97 tokens, budgets that mix decodes and prefill chunks
  // differently.
  uint32_t rng = 99;
  for (int trial = 0; trial < ::deepinfer::test_support::RoundsForThisBuild(6, 2); ++trial) {
    rng = rng * 1103515245u + 12345u;
    EngineOptions o;
    o.prefill_chunk = 7 + (rng >> 16) % 91;
    o.max_num_batched_tokens = 16 + (rng >> 8) % 200;
    auto engine = MakeEngine(o);
    ASSERT_TRUE(engine);
    std::vector<std::vector<int32_t>> others;
    const int count = 1 + static_cast<int>((rng >> 4) % 64);
    std::atomic<int> left{count};
    for (int i = 0; i < count; ++i) {
      // Some share the subject's first blocks, so that it may start from their cached prefix.
      std::vector<int32_t> prompt = Prompt(1 + (i * 37) % 180, 1000 + static_cast<uint32_t>(i));
      if (i % 3 == 0) prompt.insert(prompt.begin(), subject.begin(), subject.begin() + 128 + (i % 2) * 60);
      auto id = engine->AddRequest(std::move(prompt),
                                   Seeded(3 + i % 9, 100 + static_cast<uint64_t>(i)), [&](RequestUpdate u) {
                                     if (u.finished) --left;
                                   });
      ASSERT_TRUE(id.ok());
    }
    auto r = engine->Generate(std::vector<std::vector<int32_t>>{subject}, Seeded(10, 7));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(Observe((*r)[0]), alone) << "trial " << trial << " chunk " << o.prefill_chunk << " budget "
                                       << o.max_num_batched_tokens << " others " << count;
    while (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST(EngineGenerate, PreemptionByRecomputationChangesNoResult) {
  const std::vector<std::vector<int32_t>> prompts = {Prompt(150, 5), Prompt(90, 6), Prompt(260, 7), Prompt(40, 8)};
  std::vector<Observed> alone;
  {
    auto engine = MakeEngine();
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto r = engine->Generate(std::vector<std::vector<int32_t>>{prompts[i]}, Seeded(150, 11 + i));
      ASSERT_TRUE(r.ok());
      alone.push_back(Observe((*r)[0]));
    }
  }
  // A pool of a few blocks: the four cannot all hold their prompt and 150 new tokens at once. Whether
  // they overlap depends on how fast the engine runs while the requests are being added, so the run is
  // repeated until one of them preempted: every run must match the lone runs, and one must preempt.
  EngineOptions o;
  o.max_num_seqs = 4;
  o.kv_blocks = 6;
  o.window_blocks = 12;
  uint64_t preemptions = 0;
  for (int attempt = 0; attempt < 10 && preemptions == 0; ++attempt) {
    auto engine = MakeEngine(o);
    ASSERT_TRUE(engine);
    std::mutex mu;
    std::vector<Observed> got(prompts.size());
    std::atomic<int> left{static_cast<int>(prompts.size())};
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto id = engine->AddRequest(prompts[i], Seeded(150, 11 + i), [&, i](RequestUpdate u) {
        std::lock_guard<std::mutex> lock(mu);
        for (const SequenceDelta& d : u.sequences) {
          for (const GeneratedToken& t : d.tokens) {
            got[i].ids.push_back(t.id);
            got[i].logprobs.push_back(t.logprob);
          }
        }
        if (u.finished) --left;
      });
      ASSERT_TRUE(id.ok()) << id.status().ToString();
    }
    while (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], alone[i]) << "request " << i << ", attempt " << attempt;
    const EngineStats s = engine->Stats();
    EXPECT_EQ(s.kv_blocks_used, 0);
    preemptions = s.num_preemptions;
  }
  EXPECT_GT(preemptions, 0u);
}

TEST(EngineGenerate, NOutputsShareThePromptAndTheFirstEqualsASingleOutput) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Prompt(140, 9);
  RequestParams one = Seeded(8, 3);
  auto single = engine->Generate(std::vector<std::vector<int32_t>>{prompt}, one);
  RequestParams three = one;
  three.sampling.n = 3;
  auto multi = engine->Generate(std::vector<std::vector<int32_t>>{prompt}, three);
  ASSERT_TRUE(single.ok() && multi.ok());
  ASSERT_EQ((*multi)[0].sequences.size(), 3u);
  EXPECT_EQ(Observe((*multi)[0], 0), Observe((*single)[0]));
  EXPECT_NE(Observe((*multi)[0], 1).ids, Observe((*multi)[0], 2).ids);
  for (const auto& s : (*multi)[0].sequences) EXPECT_EQ(s.tokens.size(), 8u);
}

TEST(EngineGenerate, FinishReasons) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = Prompt(20, 4);
  const std::vector<int32_t> ref = ReferenceGreedy(prompt, 6);
  // A stop token id ends the output before that token.
  RequestParams p = Greedy(6);
  p.sampling.stop_token_ids = {ref[3]};
  auto r = engine->Generate(std::vector<std::vector<int32_t>>{prompt}, p);
  ASSERT_TRUE(r.ok());
  const size_t first = static_cast<size_t>(std::find(ref.begin(), ref.end(), ref[3]) - ref.begin());
  EXPECT_EQ(Ids((*r)[0].sequences[0]), std::vector<int32_t>(ref.begin(), ref.begin() + static_cast<long>(first)));
  EXPECT_EQ((*r)[0].sequences[0].finish, FinishReason::kStop);
  // min_tokens bans it until then: the first token is then the runner-up (anything but ref[0]).
  p.sampling.stop_token_ids = {ref[0]};
  p.sampling.min_tokens = 2;
  r = engine->Generate(std::vector<std::vector<int32_t>>{prompt}, p);
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE((*r)[0].sequences[0].tokens.empty());
  EXPECT_NE((*r)[0].sequences[0].tokens[0].id, ref[0]);
  // The scripted mask forces its tokens and finishes with "stop" after the last.
  RequestParams forced = Greedy(50);
  const std::vector<int32_t> script = {7, 7, 200, 3};
  forced.constraint.scripted_tokens = script;
  r = engine->Generate(std::vector<std::vector<int32_t>>{prompt}, forced);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Ids((*r)[0].sequences[0]), script);
  EXPECT_EQ((*r)[0].sequences[0].finish, FinishReason::kStop);
}

TEST(EngineGenerate, AbortFreesEverythingAndReportsAbort) {
  auto engine = MakeEngine();
  std::atomic<bool> finished{false};
  std::atomic<int> reason{-1};
  std::atomic<int> tokens{0};
  auto id = engine->AddRequest(Prompt(100, 1), Greedy(100000), [&](RequestUpdate u) {
    for (const SequenceDelta& d : u.sequences) {
      tokens += static_cast<int>(d.tokens.size());
      if (d.finish) reason = static_cast<int>(*d.finish);
    }
    if (u.finished) finished = true;
  });
  ASSERT_TRUE(id.ok());
  while (tokens < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  engine->Abort(*id);
  engine->Abort(*id);  // idempotent
  while (!finished) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(reason, static_cast<int>(FinishReason::kAbort));
  // Blocks are back before the next step: poll Stats until the step thread published them.
  for (int i = 0; i < 1000 && engine->Stats().kv_blocks_used != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(engine->Stats().kv_blocks_used, 0);
  EXPECT_EQ(engine->Stats().window_blocks_used, 0);
}

// Every update says when the step thread handed its tokens over: after the request was added, before
// the callback saw it, and in order. With a short output-thread slice asked for (a server's setting).
TEST(EngineGenerate, UpdatesCarryTheTimeTheirTokensWereHandedOver) {
  EngineOptions options;
  options.output_thread_slice_us = 100;
  auto engine = MakeEngine(options);
  std::atomic<bool> finished{false};
  std::atomic<int> updates{0}, bad{0};
  int64_t last = 0;  // the output thread's only
  const int64_t added = NowNanos();
  auto id = engine->AddRequest(Prompt(20, 3), Greedy(8), [&](RequestUpdate u) {
    const int64_t now = NowNanos();
    if (u.emitted_nanos < added || u.emitted_nanos > now || u.emitted_nanos < last) ++bad;
    last = u.emitted_nanos;
    ++updates;
    if (u.finished) finished = true;
  });
  ASSERT_TRUE(id.ok());
  while (!finished) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GE(updates.load(), 2);  // 8 tokens come in more than one update
  EXPECT_EQ(bad.load(), 0);
}

// Several output threads: every request's updates come from one thread, in order, and the tokens are
// the ones a single output thread delivers; a step's requests are spread over the threads.
TEST(EngineGenerate, OutputThreadsKeepEachRequestInOrderAndChangeNoToken) {
  struct Seen {
    std::vector<int32_t> ids;
    std::set<std::thread::id> threads;
    int64_t last_emitted = 0;
    int out_of_order = 0;
    bool finished = false;
  };
  auto run = [](int output_threads, std::vector<Seen>* seen, std::set<std::thread::id>* all_threads) {
    EngineOptions options;
    options.output_threads = output_threads;
    auto engine = MakeEngine(options);
    ASSERT_TRUE(engine);
    constexpr int kRequests = 8;
    seen->assign(kRequests, Seen{});
    std::mutex mu;  // guards `seen` across the output threads (each entry is written by one thread)
    std::atomic<int> finished{0};
    for (int i = 0; i < kRequests; ++i) {
      RequestParams p = Greedy(12);
      auto id = engine->AddRequest(Prompt(10 + i, static_cast<uint32_t>(i + 1)), p, [&, i](RequestUpdate u) {
        std::lock_guard lock(mu);
        Seen& s = (*seen)[static_cast<size_t>(i)];
        s.threads.insert(std::this_thread::get_id());
        all_threads->insert(std::this_thread::get_id());
        if (u.emitted_nanos < s.last_emitted) ++s.out_of_order;
        s.last_emitted = u.emitted_nanos;
        for (const SequenceDelta& d : u.sequences)
          for (const GeneratedToken& t : d.tokens) s.ids.push_back(t.id);
        if (u.finished) {
          s.finished = true;
          ++finished;
        }
      });
      ASSERT_TRUE(id.ok());
    }
    while (finished < kRequests) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  std::vector<Seen> one, three;
  std::set<std::thread::id> one_threads, three_threads;
  run(1, &one, &one_threads);
  run(3, &three, &three_threads);
  ASSERT_EQ(one.size(), three.size());
  EXPECT_EQ(one_threads.size(), 1u);
  EXPECT_EQ(three_threads.size(), 3u);  // request ids 1..8 modulo 3 reach every thread
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(three[i].ids, one[i].ids) << "request " << i;
    EXPECT_EQ(three[i].ids.size(), 12u);
    EXPECT_EQ(three[i].threads.size(), 1u) << "request " << i;
    EXPECT_EQ(three[i].out_of_order, 0) << "request " << i;
  }
}

TEST(EngineGenerate, BadOutputThreadCountsAreRefused) {
  for (int n : {0, 65}) {
    EngineOptions options;
    options.output_threads = n;
    options.kv_cache_bytes = int64_t{64} << 20;
    EXPECT_FALSE(Engine::Create(test_support::LoadFixture("v4_mixed"), options).ok()) << n;
  }
}

TEST(EngineGenerate, ConcurrencyIsDerivedFromTheKvBudgetOrCreateRefuses) {
  auto model = test_support::LoadFixture("v4_mixed");
  ASSERT_NE(model, nullptr);
  int64_t window_bytes = 0, window = 0;
  for (const kvcache::CacheGroupSpec& g : model->cache_spec().groups) {
    if (g.retention == kvcache::CacheRetention::kPrefix) continue;
    window_bytes += g.bytes_per_block;
    window = std::max(window, g.window);
  }
  ASSERT_GT(window_bytes, 0);
  // Window blocks a running sequence holds (decode), and a prefilling one with a 512-token chunk (the
  // default prefill_chunk): the engine keeps room for 2 of the latter beside the decoding ones.
  const int64_t per_decode = (window - 1 + 127) / 128 + 1;
  const int64_t per_prefill = (window - 1 + 512 + 127) / 128 + 1;
  // A budget whose half holds exactly 10 decoding sequences' window state (and the 2 prefills).
  const int64_t budget = 2 * (10 * per_decode + 2 * per_prefill) * window_bytes;
  EngineOptions options;
  options.kv_cache_bytes = budget;
  options.max_num_seqs = 256;  // as given: more than the budget holds
  EXPECT_EQ(Engine::Create(test_support::LoadFixture("v4_mixed"), options).status().code(),
            StatusCode::kResourceExhausted);
  options.max_num_seqs = 0;
  auto derived = Engine::Create(std::move(model), options);
  ASSERT_TRUE(derived.ok()) << derived.status().ToString();
  EXPECT_EQ((*derived)->info().max_num_seqs, 10);
  (*derived)->Shutdown();
  // Not even one sequence: refused, saying so.
  options.kv_cache_bytes = window_bytes;
  auto refused = Engine::Create(test_support::LoadFixture("v4_mixed"), options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("one running sequence"), std::string::npos) << refused.status().message();
}

TEST(EngineGenerate, DeadlinesFinishRequests) {
  auto engine = MakeEngine();
  RequestParams p = Greedy(100000);
  p.deadline_nanos = NowNanos() + 20'000'000;
  auto r = engine->Generate(std::vector<std::vector<int32_t>>{Prompt(30, 2)}, p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].sequences[0].finish, FinishReason::kDeadline);
}

TEST(EngineGenerate, BadInputIsRefusedWithTheParameterNamed) {
  auto engine = MakeEngine();
  auto expect = [&](std::vector<int32_t> prompt, RequestParams p, const std::string& param) {
    auto id = engine->AddRequest(std::move(prompt), std::move(p), [](RequestUpdate) {});
    ASSERT_FALSE(id.ok()) << param;
    EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(id.status().message().rfind(param + ":", 0), 0u) << id.status().message();
  };
  RequestParams p;
  expect({}, p, "prompt");
  expect({1, 2, 999}, p, "prompt");
  expect(std::vector<int32_t>(static_cast<size_t>(engine->info().max_prompt_tokens + 1), 3), p, "prompt");
  p.sampling.temperature = -1;
  expect({1, 2}, p, "temperature");
  p = {};
  p.sampling.n = 0;
  expect({1, 2}, p, "n");
  p = {};
  p.sampling.max_tokens = 0;
  expect({1, 2}, p, "max_tokens");
  p = {};
  p.sampling.logit_bias = {{256, 1.0f}};
  expect({1, 2}, p, "logit_bias");
  p = {};
  p.sampling.stop = {"x"};  // no tokenizer
  expect({1, 2}, p, "stop");
}

TEST(EngineGenerate, AFullQueueRefusesWithUnavailable) {
  EngineOptions o;
  o.max_waiting = 0;
  auto engine = MakeEngine(o);
  auto id = engine->AddRequest(Prompt(3, 1), Greedy(2), [](RequestUpdate) {});
  EXPECT_EQ(id.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(engine->Stats().requests_rejected, 1u);
}

TEST(EngineGenerate, ShutdownFinishesEverythingInFlight) {
  auto engine = MakeEngine();
  std::atomic<int> finished{0};
  for (int i = 0; i < 5; ++i) {
    auto id = engine->AddRequest(Prompt(50, static_cast<uint32_t>(i)), Greedy(100000), [&](RequestUpdate u) {
      if (u.finished) ++finished;
    });
    ASSERT_TRUE(id.ok());
  }
  engine->Shutdown();
  EXPECT_EQ(finished, 5);
  EXPECT_EQ(engine->AddRequest(Prompt(3, 1), Greedy(2), [](RequestUpdate) {}).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace deepinfer::engine
