// Speculative decoding: the --speculative-config parser, the model-free drafters, and the property that
// matters: with any drafter, K, batch and schedule, every output's tokens, logprobs and finish equal those
// of speculation off, byte for byte (greedy and seeded sampling, penalties, logit_bias, scripted masks,
// stop tokens, min_tokens, n > 1, prefix hits on blocks written while verifying, preemption).
//
// The sweep runs a few rounds here; DEEPINFER_SPEC_SWEEP_ROUNDS=N runs N rounds per fixture (the long
// check, outside CI).
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <tuple>

#include "engine/drafter.h"
#include "engine/speculative_config.h"
#include "engine_test_support.h"
#include "model/deepseek_v41/v41_init.h"
#include "model/deepseek_v4/v4_init.h"
#include "support/sanitizer_scale.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::engine::speculative_test {
namespace {

using test_support::MakeEngine;
using test_support::Prompt;

// ---- the config parser ----

TEST(SpeculativeConfig, ReadsEachMethodAndItsKeys) {
  auto ngram = ParseSpeculativeConfig(R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3})");
  ASSERT_TRUE(ngram.ok()) << ngram.status().ToString();
  EXPECT_EQ(ngram->method, DraftMethod::kNgram);
  EXPECT_EQ(ngram->num_speculative_tokens, 4);
  EXPECT_EQ(ngram->prompt_lookup_max, 3);
  EXPECT_EQ(ngram->prompt_lookup_min, 2);  // the default, below the maximum
  auto low = ParseSpeculativeConfig(R"({"method": "ngram", "num_speculative_tokens": 1, "prompt_lookup_max": 1})");
  ASSERT_TRUE(low.ok());
  EXPECT_EQ(low->prompt_lookup_min, 1);  // the default follows a maximum below it
  auto synthetic = ParseSpeculativeConfig(
      R"({"num_speculative_tokens": 3, "method": "synthetic", "synthetic_acceptance_rates": [1, 0.5, 0.5]})");
  ASSERT_TRUE(synthetic.ok()) << synthetic.status().ToString();
  EXPECT_EQ(synthetic->method, DraftMethod::kSynthetic);
  EXPECT_EQ(synthetic->synthetic_acceptance_rates, (std::vector<double>{1, 0.5, 0.5}));
  auto mtp = ParseSpeculativeConfig(R"({"method": "mtp", "num_speculative_tokens": 16})");
  ASSERT_TRUE(mtp.ok());
  EXPECT_EQ(mtp->method, DraftMethod::kMtp);
  EXPECT_TRUE(mtp->uses_draft_layers());
  EXPECT_FALSE(mtp->scheduled_verification);
  auto scheduled = ParseSpeculativeConfig(
      R"({"method": "ngram", "num_speculative_tokens": 3, "scheduled_verification": true, "min_predicted_gain": 0.1})");
  ASSERT_TRUE(scheduled.ok()) << scheduled.status().ToString();
  EXPECT_TRUE(scheduled->scheduled_verification);
  EXPECT_EQ(scheduled->min_predicted_gain, 0.1);
  auto dspark = ParseSpeculativeConfig(R"({"method": "dspark", "num_speculative_tokens": 5, "calibration_path": "c.json"})");
  ASSERT_TRUE(dspark.ok()) << dspark.status().ToString();
  EXPECT_EQ(dspark->calibration_path, "c.json");
  EXPECT_FALSE(dspark->rejection_sampling);  // reproducible verification unless asked
  for (const char* name : {"rejection_sampler", "max_acceptance"}) {
    auto rs = ParseSpeculativeConfig(std::string(R"({"method": "ngram", "num_speculative_tokens": 2, "acceptance_method": ")") +
                                     name + "\"}");
    ASSERT_TRUE(rs.ok()) << name;
    EXPECT_TRUE(rs->rejection_sampling) << name;
  }
}

TEST(SpeculativeConfig, RefusesBadInputWithOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"method": "eagle", "num_speculative_tokens": 2})", "unknown method \"eagle\""},
      {R"({"method": "ngram", "num_speculative_tokens": 0})", "must be in [1, 16], got 0"},
      {R"({"method": "ngram", "num_speculative_tokens": 17})", "must be in [1, 16], got 17"},
      {R"({"method": "ngram", "num_speculative_tokens": 99999999999999999999})", "must be an integer"},
      {R"({"method": "ngram", "num_speculative_tokens": "3"})", "must be an integer"},
      {R"({"method": "ngram", "num_speculative_tokens": 2.5})", "must be an integer"},
      {R"({"method": "ngram", "num_speculative_tokens": true})", "must be an integer"},
      {R"({"method": 3, "num_speculative_tokens": 2})", "\"method\" must be a string"},
      {R"({"num_speculative_tokens": 2})", "\"method\" is required"},
      {R"({"method": "ngram"})", "\"num_speculative_tokens\" is required"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "draft_model": "x"})", "unknown key \"draft_model\""},
      {R"({"method": "synthetic", "num_speculative_tokens": 2, "prompt_lookup_max": 3})", "ngram and suffix methods only"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4, "prompt_lookup_max": 3})",
       "must not exceed"},
      {R"({"method": "synthetic", "num_speculative_tokens": 2, "synthetic_acceptance_rates": [1]})", "2) entries, got 1"},
      {R"({"method": "synthetic", "num_speculative_tokens": 2, "synthetic_acceptance_rates": [0.5, 0.9]})",
       "must not increase"},
      {R"({"method": "synthetic", "num_speculative_tokens": 1, "synthetic_acceptance_rates": [1.5]})", "in [0, 1]"},
      {R"({"method": "synthetic", "num_speculative_tokens": 1, "synthetic_acceptance_rates": ["1"]})", "array of numbers"},
      {R"({"method": "mtp", "num_speculative_tokens": 2, "calibration_path": "c.json"})", "dspark method only"},
      {R"({"method": "dspark", "num_speculative_tokens": 2, "calibration_path": 1})", "must be a non-empty string"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "acceptance_method": "typical"})",
       "unknown acceptance_method \"typical\""},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "acceptance_method": 1})", "must be a string"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "scheduled_verification": 1})", "must be true or false"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "min_predicted_gain": -1})", "in [0, 10]"},
      {R"(["ngram", 2])", "must be a JSON object"},
      {R"({"method": "ngram", "num_speculative_tokens": 2)", "invalid JSON"},
      {R"({"method": {"a": {"b": 1}}, "num_speculative_tokens": 2})", "nests deeper than 2"},
      {std::string(5000, ' '), "longer than 4096 bytes"},
  };
  for (const auto& [text, expected] : cases) {
    auto c = ParseSpeculativeConfig(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(c.status().message().find(expected), std::string::npos) << text << " -> " << c.status().message();
    EXPECT_EQ(c.status().message().find('\n'), std::string::npos) << text;
  }
}

// ---- the drafters ----

TEST(NgramDrafter, ProposesWhatFollowedTheLatestLongestMatch) {
  NgramDrafter d(/*min_n=*/1, /*max_n=*/3);
  // Suffix [7 8 9] occurred at positions 1..3 (followed by 4 5) and [8 9] also at 6..7 (followed by 1):
  // the longest suffix wins, so the proposal is what followed [7 8 9]: 4 5 6 (K = 3).
  const std::vector<int32_t> t = {1, 7, 8, 9, 4, 5, 6, 8, 9, 1, 7, 8, 9};
  EXPECT_EQ(d.ProposeOne(t, 3), (std::vector<int32_t>{4, 5, 6}));
  // Only [9] recurs; its latest earlier occurrence (position 3) is followed by 4 5.
  const std::vector<int32_t> u = {2, 3, 9, 4, 5, 9};
  EXPECT_EQ(d.ProposeOne(u, 2), (std::vector<int32_t>{4, 5}));
  // The proposal stops at the end of the sequence: [5 5] at 0..1 is followed by one 5 only... and by the
  // suffix itself; the latest occurrence before the suffix is at 1..2, followed by 5 (position 3).
  const std::vector<int32_t> v = {5, 5, 5, 5};
  EXPECT_EQ(d.ProposeOne(v, 4), (std::vector<int32_t>{5}));
  // Nothing recurs: no proposal.
  EXPECT_TRUE(d.ProposeOne(std::vector<int32_t>{1, 2, 3, 4}, 4).empty());
  NgramDrafter strict(/*min_n=*/2, /*max_n=*/2);
  EXPECT_TRUE(strict.ProposeOne(u, 2).empty());  // [5 9] never occurred before
}

TEST(SuffixIndex, ProposesWhatFollowedTheLatestLongestMatchAcrossRequests) {
  SuffixIndex index(/*min_n=*/1, /*max_n=*/3);
  index.Add(std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  index.Add(std::vector<int32_t>{9, 3, 4, 7, 8});
  int64_t matched = 0;
  // [2 3 4] occurs in the first sequence only (followed by 5 6): the longest suffix wins over the later
  // [3 4] of the second.
  EXPECT_EQ(index.Lookup(std::vector<int32_t>{0, 2, 3, 4}, 4, &matched), (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(matched, 3);
  // [0 3 4] is nowhere, [3 4] in both: the latest (second sequence, followed by 7 8), cut at max_tokens.
  EXPECT_EQ(index.Lookup(std::vector<int32_t>{0, 3, 4}, 1, &matched), (std::vector<int32_t>{7}));
  EXPECT_EQ(matched, 2);
  EXPECT_TRUE(index.Lookup(std::vector<int32_t>{42}, 4, &matched).empty());
  EXPECT_EQ(matched, 0);
  // Bounded: 3 lengths per token and 30 entries hold 10 tokens; 6 + 5 = 11 drops the first sequence, so
  // [2 3 4] is gone and only [3 4] of the second matches.
  SuffixIndex small(1, 3, /*max_entries=*/30);
  small.Add(std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  small.Add(std::vector<int32_t>{9, 3, 4, 7, 8});
  EXPECT_EQ(small.sequences(), 1);
  EXPECT_EQ(small.Lookup(std::vector<int32_t>{2, 3, 4}, 2, &matched), (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(matched, 2);
  EXPECT_EQ(small.Lookup(std::vector<int32_t>{9, 3}, 2, &matched), (std::vector<int32_t>{4, 7}));
  EXPECT_LE(small.tokens(), 10);
}

TEST(SuffixDrafter, TheLongerMatchWinsBetweenTheOutputAndTheIndex) {
  SuffixDrafter d(/*min_n=*/1, /*max_n=*/4);
  // An earlier request's tokens: ... 5 6 7 8 then 40 41.
  std::vector<int32_t> earlier = {3, 5, 6, 7, 8, 40, 41};
  d.Finished(DraftInput{.sequence = 1, .tokens = earlier, .prompt_tokens = 2});
  EXPECT_EQ(d.index().sequences(), 1);
  // This output has [8] earlier in itself (followed by 9) but [6 7 8] only in the index.
  std::vector<int32_t> now = {8, 9, 6, 7, 8};
  std::vector<DraftInput> in = {{.sequence = 2, .tokens = now, .prompt_tokens = 5, .max_tokens = 3}};
  std::vector<std::vector<int32_t>> drafts;
  d.Propose(in, &drafts);
  EXPECT_EQ(drafts[0], (std::vector<int32_t>{40, 41}));
  // With only [8] to go on, the output's own occurrence wins the tie.
  std::vector<int32_t> own = {8, 9, 1, 8};
  in = {{.sequence = 3, .tokens = own, .prompt_tokens = 4, .max_tokens = 3}};
  d.Propose(in, &drafts);
  EXPECT_EQ(drafts[0], (std::vector<int32_t>{9, 1, 8}));
}

TEST(SyntheticDrafter, ProposesTheRecordedFutureAtTheConfiguredRates) {
  const std::vector<int32_t> prompt = {10, 11, 12};
  const std::vector<int32_t> output = {20, 21, 22, 23, 24, 25};
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), output.begin(), output.end());
  auto input = [&](uint64_t seq, size_t generated, int k) {
    return DraftInput{.sequence = seq,
                      .tokens = std::span<const int32_t>(all).first(prompt.size() + generated),
                      .prompt_tokens = 3,
                      .seed = 9,
                      .index = 0,
                      .max_tokens = k};
  };
  SyntheticDrafter exact({}, 256);
  std::vector<std::vector<int32_t>> drafts;
  std::vector<DraftInput> in = {input(1, 1, 3)};
  exact.Propose(in, &drafts);
  EXPECT_TRUE(drafts[0].empty());  // nothing recorded yet
  exact.Finished(DraftInput{.sequence = 1, .tokens = all, .prompt_tokens = 3, .seed = 9, .index = 0});
  EXPECT_EQ(exact.recorded_outputs(), 1);
  in = {input(2, 2, 3)};  // a new output of the same request, two tokens in: the recording from index 2
  exact.Propose(in, &drafts);
  EXPECT_EQ(drafts[0], (std::vector<int32_t>{22, 23, 24}));
  in = {input(2, 5, 3)};  // near the end: what is left
  exact.Propose(in, &drafts);
  EXPECT_EQ(drafts[0], (std::vector<int32_t>{25}));
  // Another seed is another request: no recording.
  DraftInput other = input(3, 2, 3);
  other.seed = 10;
  in = {other};
  exact.Propose(in, &drafts);
  EXPECT_TRUE(drafts[0].empty());

  // Rates [1, 0]: the first token kept, the second always replaced (by the next id).
  SyntheticDrafter half({1.0, 0.0}, 256);
  half.Finished(DraftInput{.sequence = 1, .tokens = all, .prompt_tokens = 3, .seed = 9, .index = 0});
  in = {input(4, 1, 2)};
  half.Propose(in, &drafts);
  EXPECT_EQ(drafts[0], (std::vector<int32_t>{21, 23}));
}

TEST(SyntheticDrafter, KeepsPositionsAtTheUnconditionalRates) {
  // Rates [0.8, 0.4]: slot 0 kept with probability 0.8, slot 1 with 0.4 / 0.8 = 0.5 given slot 0 kept, so
  // both are kept (the unconditional rate of slot 1) in about 40% of proposals.
  std::vector<int32_t> all(3 + 4000);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i % 200);
  SyntheticDrafter d({0.8, 0.4}, 256);
  d.Finished(DraftInput{.sequence = 1, .tokens = all, .prompt_tokens = 3, .seed = 1, .index = 0});
  int first = 0, both = 0;
  const int trials = 3000;
  std::vector<std::vector<int32_t>> drafts;
  for (int g = 0; g < trials; ++g) {
    std::vector<DraftInput> in = {DraftInput{.sequence = 2,
                                             .tokens = std::span<const int32_t>(all).first(3 + static_cast<size_t>(g)),
                                             .prompt_tokens = 3,
                                             .seed = 1,
                                             .index = 0,
                                             .max_tokens = 2}};
    d.Propose(in, &drafts);
    const bool k0 = drafts[0][0] == all[3 + static_cast<size_t>(g)];
    const bool k1 = drafts[0][1] == all[4 + static_cast<size_t>(g)];
    first += k0;
    both += k0 && k1;
  }
  // Binomial standard deviations: sqrt(3000 · 0.8 · 0.2) ≈ 22, sqrt(3000 · 0.4 · 0.6) ≈ 27; 4 sigma bounds.
  EXPECT_NEAR(first, 2400, 90);
  EXPECT_NEAR(both, 1200, 110);
}

TEST(SpeculativeConfig, ReadsCalibrationFilesAndRefusesMalformedOnesInOneLine) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("calibration_" + std::to_string(::getpid()) + ".json")).string();
  auto write = [&](const std::string& text) {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  };
  write("[1.5, 0.8, 2]");
  auto good = ReadCalibrationTemperatures(path);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(*good, (std::vector<double>{1.5, 0.8, 2}));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[1.5, ", "invalid JSON"},
      {"{\"temperatures\": 1}", "must be a JSON array of 1 to 16"},
      {"[]", "must be a JSON array of 1 to 16"},
      {"[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]", "must be a JSON array of 1 to 16"},
      {"[1, \"2\"]", "must be numbers"},
      {"[1, 0]", "must be in [0.01, 100]"},
      {"[[1]]", "nests deeper than 1"},
      {std::string(70000, ' '), "more than the limit"},
  };
  for (const auto& [text, expected] : cases) {
    write(text);
    auto bad = ReadCalibrationTemperatures(path);
    ASSERT_FALSE(bad.ok()) << text.substr(0, 40);
    EXPECT_NE(bad.status().message().find("calibration file " + path), std::string::npos) << bad.status().message();
    EXPECT_NE(bad.status().message().find(expected), std::string::npos) << text.substr(0, 40) << " -> " << bad.status().message();
    EXPECT_EQ(bad.status().message().find('\n'), std::string::npos);
  }
  std::filesystem::remove(path);
  auto missing = ReadCalibrationTemperatures(path);
  EXPECT_FALSE(missing.ok());
  // The engine refuses a dspark config whose file is malformed before it loads anything else.
  SpeculativeConfig config;
  config.method = DraftMethod::kDspark;
  config.num_speculative_tokens = 2;
  config.calibration_path = path;
  EXPECT_EQ(MakeDrafter(config, 256).status().code(), StatusCode::kInvalidArgument);
}

TEST(ModelDrafter, CalibrationScalesEachPositionsLogit) {
  // σ(logit(c) / T): c = 0.8 has logit ln 4; T = 2 gives σ(ln 2) = 2/3, T = 0.5 gives σ(ln 16) = 16/17;
  // positions past the calibration keep their confidence.
  ModelDrafter d({2.0, 0.5});
  EXPECT_NEAR(d.Calibrated(0.8, 0), 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(d.Calibrated(0.8, 1), 16.0 / 17.0, 1e-12);
  EXPECT_NEAR(d.Calibrated(0.8, 2), 0.8, 1e-12);
}

// ---- the engine refuses what the model cannot run ----

TEST(EngineSpeculative, RefusesAMethodTheModelCannotRun) {
  for (const char* method : {"mtp", "dspark"}) {
    auto config = ParseSpeculativeConfig(std::string(R"({"method": ")") + method + R"(", "num_speculative_tokens": 2})");
    ASSERT_TRUE(config.ok());
    EngineOptions o;
    o.kv_cache_bytes = int64_t{64} << 20;
    o.speculative = *config;
    auto e = Engine::Create(test_support::LoadFixture(), o);
    ASSERT_FALSE(e.ok()) << method;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find("needs a model loaded with"), std::string::npos) << e.status().message();
  }
}

// ---- verification changes nothing ----

struct Job {
  std::vector<int32_t> prompt;
  RequestParams params;
};

struct Outcome {
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::vector<float>> logprobs;
  std::vector<std::vector<std::vector<std::pair<int32_t, float>>>> top;
  std::vector<int> reasons;
  std::vector<int32_t> stop_tokens;
  std::vector<std::string> texts, stop_strings;  // with a tokenizer
  bool ok = true;
  std::string error;
  int64_t hit_tokens = 0;  // the prompt's prefix-cache hit (depends on what ran before; not compared)
  bool operator==(const Outcome& o) const {
    return std::tie(ids, logprobs, top, reasons, stop_tokens, texts, stop_strings, ok, error) ==
           std::tie(o.ids, o.logprobs, o.top, o.reasons, o.stop_tokens, o.texts, o.stop_strings, o.ok, o.error);
  }
};

// Runs every job at once on the engine and waits for all.
std::vector<Outcome> RunAll(Engine& engine, const std::vector<Job>& jobs) {
  std::vector<Outcome> outcomes(jobs.size());
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    outcomes[j].ids.resize(static_cast<size_t>(jobs[j].params.sampling.n));
    outcomes[j].logprobs.resize(outcomes[j].ids.size());
    outcomes[j].top.resize(outcomes[j].ids.size());
    outcomes[j].reasons.assign(outcomes[j].ids.size(), -1);
    outcomes[j].stop_tokens.assign(outcomes[j].ids.size(), -1);
    outcomes[j].texts.resize(outcomes[j].ids.size());
    outcomes[j].stop_strings.resize(outcomes[j].ids.size());
    auto id = engine.AddRequest(jobs[j].prompt, jobs[j].params, [&, j](RequestUpdate u) {
      std::lock_guard<std::mutex> lock(mu);
      Outcome& o = outcomes[j];
      o.hit_tokens = u.prompt_cache_hit_tokens;
      for (const SequenceDelta& d : u.sequences) {
        const auto i = static_cast<size_t>(d.index);
        for (const GeneratedToken& t : d.tokens) {
          o.ids[i].push_back(t.id);
          o.logprobs[i].push_back(t.logprob);
          std::vector<std::pair<int32_t, float>> top;
          for (const TokenAlternative& a : t.top_logprobs) top.emplace_back(a.id, a.logprob);
          o.top[i].push_back(std::move(top));
        }
        o.texts[i] += d.text;
        if (d.finish) {
          o.reasons[i] = static_cast<int>(*d.finish);
          o.stop_tokens[i] = d.stop_token;
          o.stop_strings[i] = d.stop_string;
        }
      }
      if (!u.status.ok()) {
        o.ok = false;
        o.error = u.status.ToString();
      }
      if (u.finished) {
        ++done;
        cv.notify_all();
      }
    });
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    if (!id.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      ++done;
    }
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done == jobs.size(); });
  return outcomes;
}

// A mixed batch of requests: shared and repetitive prompts (so that prompt lookup finds matches and
// prefixes hit), greedy and seeded sampling, logprobs with alternatives, stop tokens, min_tokens,
// penalties, logit_bias, n > 1 and scripted masks that end inside a run.
std::vector<Job> MakeJobs(std::mt19937& rng, int count, int32_t vocab) {
  auto between = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const uint32_t salt = static_cast<uint32_t>(rng());
  const std::vector<std::vector<int32_t>> shared = {Prompt(300, salt, vocab), Prompt(140, salt + 1, vocab)};
  std::vector<Job> jobs;
  for (int i = 0; i < count; ++i) {
    Job j;
    switch (between(0, 2)) {
      case 0: {  // a shared prefix (warm after the first) and a tail of its own
        j.prompt = shared[static_cast<size_t>(between(0, 1))];
        for (int32_t t : Prompt(between(1, 40), salt + 10 + static_cast<uint32_t>(i), vocab)) j.prompt.push_back(t);
        break;
      }
      case 1: {  // a short pattern repeated: prompt lookup proposes it
        const std::vector<int32_t> unit = Prompt(between(2, 9), salt + 100 + static_cast<uint32_t>(i), vocab);
        for (int r = between(3, 30); r > 0; --r) j.prompt.insert(j.prompt.end(), unit.begin(), unit.end());
        break;
      }
      default: j.prompt = Prompt(between(1, 60), salt + 200 + static_cast<uint32_t>(i), vocab);
    }
    sampling::SamplingParams& sp = j.params.sampling;
    sp.max_tokens = between(0, 4) == 0 ? between(1, 4) : between(5, 48);
    if (between(0, 1)) {
      sp.temperature = 0;
    } else {
      sp.temperature = between(0, 1) ? 0.7 : 1.3;
      sp.top_k = between(0, 1) ? 0 : 40;
      sp.top_p = between(0, 1) ? 1.0 : 0.9;
      sp.seed = static_cast<uint64_t>(between(0, 1 << 20));
    }
    sp.logprobs = true;
    sp.top_logprobs = between(0, 2) == 0 ? 3 : 0;
    sp.ignore_eos = between(0, 3) != 0;
    if (between(0, 2) == 0) {
      for (int s = 0; s < 4; ++s) sp.stop_token_ids.push_back(between(2, vocab - 1));
      if (between(0, 1)) sp.min_tokens = std::min<int64_t>(between(1, 6), sp.max_tokens);
    }
    if (between(0, 4) == 0) {
      sp.repetition_penalty = 1.3;
      sp.presence_penalty = 0.5;
      sp.frequency_penalty = 0.2;
    }
    if (between(0, 4) == 0) sp.logit_bias = {{static_cast<int32_t>(between(2, vocab - 1)), 3.0f}};
    if (between(0, 5) == 0) sp.n = between(2, 3);
    // A script with min_tokens could force a banned stop token: scripts go with no stop tokens.
    if (sp.n == 1 && sp.stop_token_ids.empty() && between(0, 7) == 0) {
      std::vector<int32_t> script = Prompt(between(2, 8), salt + 300 + static_cast<uint32_t>(i), vocab);
      j.params.constraint.scripted_tokens = script;
    }
    jobs.push_back(std::move(j));
  }
  return jobs;
}

struct SweepTotals {
  uint64_t drafts = 0, accepted = 0, preemptions = 0, scheduled_steps = 0, trimmed_positions = 0;
  uint64_t requests = 0, tokens = 0;  // compared with speculation off
};

void ExpectSame(const std::vector<Outcome>& off, const std::vector<Outcome>& on, const std::string& what,
                SweepTotals* totals = nullptr) {
  ASSERT_EQ(off.size(), on.size());
  for (size_t j = 0; j < off.size(); ++j) {
    if (totals) {
      ++totals->requests;
      for (const auto& ids : off[j].ids) totals->tokens += ids.size();
    }
    EXPECT_TRUE(off[j].ok) << what << " job " << j << ": " << off[j].error;
    EXPECT_TRUE(on[j] == off[j]) << what << " job " << j << " differs (" << on[j].error << ")";
  }
}

// DEEPINFER_SPEC_SWEEP_ROUNDS runs the long sweep; CI's Release pass runs `in_ci` rounds, its sanitizer pass one.
int SweepRounds(int in_ci) {
  const char* env = std::getenv("DEEPINFER_SPEC_SWEEP_ROUNDS");
  return env ? std::max(1, std::atoi(env)) : ::deepinfer::test_support::RoundsForThisBuild(in_ci, 1);
}

EngineOptions Options(std::mt19937& rng, bool small_pool) {
  EngineOptions o;
  o.max_num_seqs = std::uniform_int_distribution<int>(1, 16)(rng);
  o.prefill_chunk = std::uniform_int_distribution<int>(0, 1)(rng) ? 512 : 64;
  o.kv_cache_bytes = int64_t{64} << 20;
  if (small_pool) {  // preemption: a few sequences fill the pool
    o.kv_blocks = 5;
    o.max_num_seqs = 16;
  }
  o.check_invariants = true;
  return o;
}


// The configs a sweep takes turns with: "ngram", "synthetic" (full acceptance), "synthetic_rates"
// (acceptance falling from 0.9), "suffix" (prompt lookup and the suffix index), or a model's draft layers
// ("mtp", "dspark", "mtp_suffix": mtp with long suffix-index matches replacing its drafts).
const std::vector<std::string> kModelFree = {"ngram", "synthetic", "synthetic_rates", "suffix"};

std::string ConfigFor(const std::string& method, int k) {
  // "<method>_scheduled": verify lengths from the cost model, used whenever predicted to be faster.
  if (method.ends_with("_scheduled")) {
    std::string config = ConfigFor(method.substr(0, method.size() - 10), k);
    config.pop_back();
    return config + R"(, "scheduled_verification": true, "min_predicted_gain": 0})";
  }
  const std::string head = R"({"num_speculative_tokens": )" + std::to_string(k) + R"(, "method": ")";
  if (method == "ngram") return head + R"(ngram", "prompt_lookup_min": 1, "prompt_lookup_max": 4})";
  if (method == "suffix") return head + R"(suffix", "prompt_lookup_min": 2, "prompt_lookup_max": 6})";
  if (method == "mtp_suffix") return head + R"(mtp", "suffix_override_tokens": 3})";
  if (method == "synthetic_rates") {
    std::string config = head + R"(synthetic", "synthetic_acceptance_rates": [)";
    double rate = 0.9;
    for (int i = 0; i < k; ++i, rate *= 0.8) config += (i ? ", " : "") + std::to_string(rate);
    return config + "]}";
  }
  return head + method + R"("})";
}

// `max_jobs` bounds the requests of a round on the full pool (for the slower drafters).
void Sweep(const std::string& fixture, uint32_t seed, int rounds, const std::vector<std::string>& methods = kModelFree,
           int max_jobs = 14) {
  std::mt19937 rng(seed);
  SweepTotals totals;
  for (int round = 0; round < rounds; ++round) {
    const int k = std::uniform_int_distribution<int>(1, 7)(rng);
    // Every third round runs on a pool a few sequences fill (preemption, lookahead blocks refused).
    const bool small_pool = round % 3 == 1;
    const int count = small_pool ? 10 : std::min(max_jobs, std::uniform_int_distribution<int>(1, 14)(rng));
    std::vector<Job> jobs = MakeJobs(rng, count, 256);
    EngineOptions off_options = Options(rng, small_pool);
    auto off_engine = MakeEngine(off_options, fixture);
    ASSERT_TRUE(off_engine);
    const std::vector<Outcome> off = RunAll(*off_engine, jobs);
    // A second turn: each conversation goes on from its first answer, so its prefix hits blocks that
    // were written while verifying.
    std::vector<Job> turn2;
    for (size_t j = 0; j < jobs.size(); ++j) {
      Job next = jobs[j];
      next.prompt.insert(next.prompt.end(), off[j].ids[0].begin(), off[j].ids[0].end());
      for (int32_t t : Prompt(5, seed + static_cast<uint32_t>(j), 256)) next.prompt.push_back(t);
      next.params.constraint = {};
      turn2.push_back(std::move(next));
    }
    const std::vector<Outcome> off2 = RunAll(*off_engine, turn2);

    const std::string config = ConfigFor(methods[(static_cast<size_t>(round) + seed) % methods.size()], k);
    const std::string what = fixture + " round " + std::to_string(round) + " " + config;
    EngineOptions on_options = Options(rng, small_pool);
    auto parsed = ParseSpeculativeConfig(config);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    on_options.speculative = *parsed;
    auto on_engine = MakeEngine(on_options, fixture);
    ASSERT_TRUE(on_engine);
    // The synthetic drafter proposes from a recording of the same request: the first pass records it.
    ExpectSame(off, RunAll(*on_engine, jobs), what + " first pass", &totals);
    ExpectSame(off, RunAll(*on_engine, jobs), what + " second pass", &totals);
    const std::vector<Outcome> on2 = RunAll(*on_engine, turn2);
    ExpectSame(off2, on2, what + " second turn", &totals);
    // Blocks written while verifying are cached as plain decoding's are: a pool that evicts nothing gives
    // the second turn at least the hit it gets without speculation (this engine ran the first turn twice).
    if (!small_pool) {
      for (size_t j = 0; j < turn2.size(); ++j) EXPECT_GE(on2[j].hit_tokens, off2[j].hit_tokens) << what << " job " << j;
    }
    const EngineStats stats = on_engine->Stats();
    EXPECT_EQ(stats.invariant_violations, 0u) << what;
    EXPECT_LE(stats.spec_decode_num_accepted_tokens, stats.spec_decode_num_draft_tokens) << what;
    totals.drafts += stats.spec_decode_num_drafts;
    totals.accepted += stats.spec_decode_num_accepted_tokens;
    totals.preemptions += stats.num_preemptions;
    totals.scheduled_steps += stats.spec_decode_scheduled_steps;
    totals.trimmed_positions += stats.spec_decode_trimmed_positions;
  }
  if (std::getenv("DEEPINFER_SPEC_SWEEP_ROUNDS")) {
    std::printf("%s: %d rounds, %llu requests (%llu tokens) equal to speculation off; %llu drafts, %llu draft "
                "tokens accepted, %llu preemptions, %llu scheduled steps\n",
                fixture.c_str(), rounds, static_cast<unsigned long long>(totals.requests),
                static_cast<unsigned long long>(totals.tokens), static_cast<unsigned long long>(totals.drafts),
                static_cast<unsigned long long>(totals.accepted), static_cast<unsigned long long>(totals.preemptions),
                static_cast<unsigned long long>(totals.scheduled_steps));
  }
  // The sweep verified drafts (and accepted some: the model-free drafters propose repeats and the recorded
  // future; random draft layers propose noise), and preempted sequences (rounds 1, 4, ...).
  EXPECT_GT(totals.drafts, 0u);
  if (!methods[0].starts_with("mtp") && !methods[0].starts_with("dspark")) {
    EXPECT_GT(totals.accepted, 0u);
  }
  // Scheduled verification verified less than the full block in some steps (it measures plain decoding
  // among its first budgets), each such step at least one position less.
  if (methods[0].ends_with("_scheduled")) {
    EXPECT_GT(totals.scheduled_steps, 0u);
    EXPECT_GE(totals.trimmed_positions, totals.scheduled_steps);
  }
  // Whether the small pool preempts depends on when requests arrive relative to steps; the model-free
  // sweeps' seeds preempt reliably, and the others share the same preemption path.
  if (rounds >= 2 && methods == kModelFree) {
    EXPECT_GT(totals.preemptions, 0u);
  }
}

TEST(EngineSpeculative, PropertyOutputsEqualSpeculationOffOnV4) { Sweep("v4_mixed", 1, SweepRounds(2)); }

// One round in CI (the V4 sweep preempts; the DSpark sweep below runs V4.1 twice more).
TEST(EngineSpeculative, PropertyOutputsEqualSpeculationOffOnV41) { Sweep("v41_tiny_a_bf16", 2, SweepRounds(1)); }

// V4's MTP layer (the fixture has one): K autoregressive draft steps per output and step.
TEST(EngineSpeculative, PropertyMtpOutputsEqualSpeculationOffOnV4) {
  Sweep("v4_mixed", 5, SweepRounds(2), {"mtp", "mtp_suffix"});
}

// Verify budgets from measured step times and predicted survival: random MTP drafts are almost never
// accepted, so the schedule learns to verify less than K (down to plain decoding, not drafting then); the
// synthetic drafter's recorded future is, and its budgets are ranked by the online estimate.
TEST(EngineSpeculative, PropertyScheduledVerificationOutputsEqualSpeculationOff) {
  Sweep("v4_mixed", 9, SweepRounds(1), {"mtp_scheduled"});
  Sweep("v4_mixed", 10, SweepRounds(1), {"synthetic_scheduled"});
}

// The suffix index over the engine's finished requests: a request's second run finds its first.
TEST(EngineSpeculative, PropertySuffixOutputsEqualSpeculationOffOnV4) { Sweep("v4_mixed", 8, SweepRounds(1), {"suffix"}); }

// V4.1's DSpark draft layers (the V4.1 fixtures have none: a random tiny checkpoint with two, a 512-token
// vocabulary and no Engram): the parallel block from the anchor, the Markov bias, the confidence head.
TEST(EngineSpeculative, PropertyDsparkOutputsEqualSpeculationOffOnV41) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("engine_spec_dspark_" + std::to_string(::getpid()))).string();
  auto config = model::V41PresetConfig("tiny");
  ASSERT_TRUE(config.ok());
  auto& t = (*config)["text_config"];
  t["vocab_size"] = 512;
  t["engram_layer_ids"] = nlohmann::ordered_json::array();
  t["engram_num_embeddings"] = nlohmann::ordered_json::array();
  t["num_nextn_predict_layers"] = 2;
  t["dspark_noise_token_id"] = 2;
  ASSERT_TRUE(model::WriteRandomV41Checkpoint(*config, dir, 7, model::V41InitFormat::kQuantized).ok());
  Sweep(dir, 13, SweepRounds(2), {"dspark"}, 6);
  // The drafter predicts survival from the confidence head: probabilities that fall along the draft.
  model::LoadOptions load;
  load.prefault = false;
  load.drafting = true;
  auto m = model::LoadCausalLM(dir, load);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto pools = kvcache::KvPools::Create((*m)->cache_spec(), 8);
  ASSERT_TRUE(pools.ok());
  model::SequentialBlocks blocks((*m)->cache_spec(), *pools);
  auto state = (*m)->NewSequence();
  const std::vector<int32_t> prompt = Prompt(40, 3, 512);
  ASSERT_TRUE(blocks.Reserve(*state, static_cast<int64_t>(prompt.size()) + 8).ok());
  model::SequenceChunk chunk{state.get(), std::span(prompt).first(prompt.size() - 1), model::LogitsWanted::kNone};
  model::ForwardOutput out;
  ASSERT_TRUE((*m)->Forward(std::span(&chunk, 1), *pools, &out).ok());
  ModelDrafter drafter;
  drafter.Attach(m->get(), &*pools);
  std::vector<DraftInput> in = {{.sequence = 1, .tokens = prompt, .prompt_tokens = 40, .max_tokens = 7,
                                 .state = state.get(), .room = 8}};
  std::vector<std::vector<int32_t>> drafts;
  drafter.Propose(in, &drafts);
  EXPECT_EQ(drafts[0].size(), 5u);  // the block size bounds K = 7
  const std::vector<float>& survival = (*drafter.survival())[0];
  ASSERT_EQ(survival.size(), 5u);
  for (size_t i = 0; i < survival.size(); ++i) {
    EXPECT_GT(survival[i], 0.0f);
    EXPECT_LE(survival[i], i ? survival[i - 1] : 1.0f);
  }
  std::filesystem::remove_all(dir);
}

// Rejection sampling (max_acceptance): greedy outputs are still those of speculation off; sampled ones are
// distribution-exact rather than identical (the sampler's chi-square tests), so here they only have to run
// to their length, with drafts verified and some accepted.
TEST(EngineSpeculative, RejectionSamplingKeepsGreedyOutputsAndRunsSampledOnes) {
  std::vector<Job> jobs;
  for (int i = 0; i < 6; ++i) {
    Job j;
    j.prompt = Prompt(20 + i, 900 + static_cast<uint32_t>(i));
    j.params.sampling.max_tokens = 24;
    j.params.sampling.ignore_eos = true;
    j.params.sampling.logprobs = true;
    if (i % 2) {
      j.params.sampling.temperature = 0.8;
      j.params.sampling.seed = 50 + static_cast<uint64_t>(i);
    } else {
      j.params.sampling.temperature = 0;
    }
    jobs.push_back(std::move(j));
  }
  auto off_engine = MakeEngine({});
  const std::vector<Outcome> off = RunAll(*off_engine, jobs);
  EngineOptions o;
  auto parsed = ParseSpeculativeConfig(
      R"({"method": "synthetic", "num_speculative_tokens": 3, "acceptance_method": "rejection_sampler"})");
  ASSERT_TRUE(parsed.ok());
  o.speculative = *parsed;
  o.check_invariants = true;
  auto on_engine = MakeEngine(o);
  RunAll(*on_engine, jobs);  // records each output for the synthetic drafter
  const std::vector<Outcome> on = RunAll(*on_engine, jobs);
  for (size_t j = 0; j < jobs.size(); ++j) {
    ASSERT_TRUE(on[j].ok) << on[j].error;
    EXPECT_EQ(on[j].ids[0].size(), 24u) << j;
    if (j % 2 == 0) {
      EXPECT_TRUE(on[j] == off[j]) << "greedy job " << j;
    }
  }
  const EngineStats stats = on_engine->Stats();
  EXPECT_GT(stats.spec_decode_num_drafts, 0u);
  EXPECT_GT(stats.spec_decode_num_accepted_tokens, 0u);
  EXPECT_EQ(stats.invariant_violations, 0u);
}

// Grammar masks at every verified position and the bonus token: structured output on the tiny preset with
// the V4 tokenizer (a real vocabulary), greedy and seeded, with full-acceptance synthetic drafts (every
// draft token passes through the mask) and prompt lookup (whose drafts the grammar mostly rejects).
TEST(EngineSpeculative, GrammarOutputsEqualSpeculationOff) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("engine_spec_" + std::to_string(::getpid()))).string();
  auto preset = model::V4PresetConfig("tiny");
  ASSERT_TRUE(preset.ok());
  ASSERT_TRUE(model::WriteRandomV4Checkpoint(*preset, dir, 11, model::V4InitFormat::kBF16).ok());
  auto loaded = tokenizer::LoadTokenizer("deepseek-v4");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const tokenizer::Tokenizer tok = std::move(loaded).value();
  auto make = [&](const std::string& config) {
    model::LoadOptions load;
    load.prefault = false;
    auto m = model::LoadCausalLM(dir, load);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    EngineOptions o;
    o.kv_cache_bytes = int64_t{256} << 20;
    o.tokenizer = &tok;
    o.check_invariants = true;
    if (!config.empty()) {
      auto parsed = ParseSpeculativeConfig(config);
      EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
      o.speculative = *parsed;
    }
    auto e = Engine::Create(std::move(m).value(), o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return std::move(e).value();
  };
  auto grammar = [](grammar::ConstraintSpec::Kind kind, std::string text, std::vector<std::string> choices = {}) {
    grammar::ConstraintSpec spec;
    spec.kind = kind;
    spec.text = std::move(text);
    spec.choices = std::move(choices);
    return spec;
  };
  std::vector<Job> jobs;
  const std::vector<grammar::ConstraintSpec> specs = {
      grammar(grammar::ConstraintSpec::Kind::kRegex, "[a-z]{2,12}( [a-z]{1,9}){2,9}\\."),
      grammar(grammar::ConstraintSpec::Kind::kJsonObject, ""),
      grammar(grammar::ConstraintSpec::Kind::kChoice, "", {"alpha beta gamma", "alpha beta delta epsilon"}),
      grammar(grammar::ConstraintSpec::Kind::kJsonSchema,
              R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                  "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3}},
                  "required": ["name", "tags"], "additionalProperties": false})"),
  };
  for (size_t i = 0; i < specs.size(); ++i) {
    for (int sampled = 0; sampled < 2; ++sampled) {
      Job j;
      j.prompt = tok.EncodeText("Write " + std::to_string(i) + " words: the quick brown fox, the quick brown fox");
      sampling::SamplingParams& sp = j.params.sampling;
      sp.max_tokens = 40;
      sp.logprobs = true;
      sp.top_logprobs = 2;
      if (sampled) {
        sp.temperature = 0.9;
        sp.seed = 100 + i;
        sp.n = i == 0 ? 2 : 1;
      } else {
        sp.temperature = 0;
      }
      if (i == 0) sp.stop = {"e", "q"};  // stop strings inside an accepted run: the text and tokens end there
      j.params.constraint.grammar = specs[i];
      jobs.push_back(std::move(j));
    }
  }
  auto off_engine = make("");
  const std::vector<Outcome> off = RunAll(*off_engine, jobs);
  for (const Outcome& o : off) ASSERT_TRUE(o.ok) << o.error;
  // The stop strings ended both regex outputs (greedy and sampled) early.
  EXPECT_FALSE(off[0].stop_strings[0].empty());
  EXPECT_FALSE(off[1].stop_strings[0].empty());
  for (const std::string config : {R"({"method": "synthetic", "num_speculative_tokens": 4})",
                                   R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1})"}) {
    auto on_engine = make(config);
    ExpectSame(off, RunAll(*on_engine, jobs), config + " first pass");
    ExpectSame(off, RunAll(*on_engine, jobs), config + " second pass");
    const EngineStats stats = on_engine->Stats();
    EXPECT_GT(stats.spec_decode_num_drafts, 0u) << config;
    if (config.find("synthetic") != std::string::npos) {
      // The recorded future is the output itself: every draft token verified is accepted.
      EXPECT_GT(stats.spec_decode_num_accepted_tokens, 0u);
      EXPECT_EQ(stats.spec_decode_num_accepted_tokens, stats.spec_decode_num_draft_tokens);
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace deepinfer::engine::speculative_test
