// deepinfer bench engine: the engine under workloads — agent sessions (a long shared system prompt and tool
// block, turns that extend the previous turn, arrivals over time), chat and random requests — with the
// prefix cache on and off, plus the goal measurements: warm against cold TTFT of a long prompt, the
// running streams' TBT while a long prompt arrives (latency-budgeted chunks against fixed ones), decode
// throughput at batch 32 against the model driven directly in the same run, the step loop's idle gap, and
// bounded SWA replay against a cold run (greedy agreement, logit deviation).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "bench/common.h"
#include "bench/speculative.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "core/clock.h"
#include "core/hash.h"
#include "engine/engine.h"
#include "kvstore/kv_store_tier.h"
#include "kvstore/store.h"
#include "model/causal_lm.h"
#include "model/sequential_blocks.h"

namespace deepinfer::bench {
namespace {

using cli::Fail;

constexpr const char* kEngineUsage =
    "usage: deepinfer bench engine --model DIR [--workloads agent,chat,random|none] [--sessions N] [--turns N]\n"
    "                              [--system-tokens N] [--requests N] [--rate R] [--tbt-target-ms MS]\n"
    "                              [--long-prompt N] [--interference-prompt N] [--skip-goals] [--skip-cache-off]\n"
    "                              [--kv-cache-mib N] [--kv-store DIR] [--ram-fraction F] [--seed N]\n"
    "                              [--speculative-config JSON [--spec-batch N] [--spec-tokens N] [--spec-rounds N]\n"
    "                               [--spec-concurrency LIST]]\n\n"
    "Runs the engine under each workload twice, prefix cache on and off, and prints input and output\n"
    "tokens/s, TTFT and TBT p50/p99, the prefix hit rate (tokens), the window-block hit rate (hits resumed\n"
    "exactly from cached window blocks), replayed tokens per hit and the step loop's idle gap, then the\n"
    "goal measurements: warm against cold TTFT of a --long-prompt prompt (default 8192), 8 streams' TBT while\n"
    "an --interference-prompt prompt (default 16384) arrives with latency-budgeted chunks and with fixed\n"
    "512-token chunks, decode at batch 32 against the model driven directly, bounded replay against cold.\n"
    "Greedy decoding throughout. --skip-cache-off runs only the cache-on row of each workload.\n"
    "With --kv-store DIR the agent workload runs twice more with a RAM prefix pool of --ram-fraction (default\n"
    "0.1) of its working set (the distinct 128-token blocks of its prompts, at least what its longest request\n"
    "needs): RAM only, and with the KV store (a fresh store in DIR/bench-engine-PID, removed afterwards) as\n"
    "the persistent tier under it; it prints both rows, the share of hit tokens the store served, and the\n"
    "input-throughput ratio store / RAM only.\n"
    "  agent   --sessions sessions of --turns turns: a shared --system-tokens prompt, each turn adds a user or\n"
    "          tool message of 64..192 tokens to the previous turn's prompt and output; sessions start at\n"
    "          --rate per second, a turn follows its predecessor after 0..50 ms\n"
    "  chat    --requests independent requests (a 96-token system prompt, 32..480-token user message) at --rate\n"
    "  random  --requests requests of random ids, prompts 16..1024 tokens, outputs 1..96, at --rate\n"
    "With --speculative-config every engine runs with it, each workload row is followed by its speculative\n"
    "counters, and greedy decoding of --spec-batch streams (default 1) of --spec-tokens tokens (default 128)\n"
    "is measured with and without it in --spec-rounds rounds (default 3) of both back to back; the speed-up is\n"
    "the median of the rounds' ratios (runs with --skip-goals too; fails when the outputs differ).\n"
    "--spec-concurrency 1,4,16,32,64 measures instead, at each concurrency, speculation off, every fixed K up\n"
    "to the config's and (with scheduled_verification) the config itself, on engines alive at once: two warm-up\n"
    "passes each, then --spec-rounds rounds that run each engine once in turn (off and the scheduled config\n"
    "back to back); the median round, and the scheduled config's speed against off and the best fixed K as\n"
    "the median of the rounds' own ratios.\n";

struct Args {
  std::string model_dir;
  std::vector<std::string> workloads = {"agent", "chat", "random"};
  int sessions = 8, turns = 4, requests = 24;
  int64_t system_tokens = 2048;
  double rate = 4;
  double tbt_target_ms = 0;  // 0: measured (1.5 × a decode step at batch 8)
  int64_t long_prompt = 8192;
  int64_t interference_prompt = 16384;
  int64_t kv_cache_mib = 2048;
  bool skip_cache_off = false;  // only the cache-on row of each workload
  std::string kv_store_dir;
  double ram_fraction = 0.1;
  uint64_t seed = 1;
  bool goals = true;
  engine::SpeculativeConfig speculative;
  int spec_batch = 1;
  int64_t spec_tokens = 128;
  int spec_rounds = 3;
  std::vector<int> spec_concurrency;  // non-empty: the sweep instead of the single measurement
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo));
}

std::string Ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, seconds < 0.01 ? "%.2f" : seconds < 1 ? "%.1f" : "%.0f", seconds * 1e3);
  return buf;
}

// One request of a workload: submitted at `at` seconds after the start (or when its session's previous
// turn finished, plus `at` as think time).
struct Job {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 32;
  double at = 0;
  int session = -1;
};

struct RunResult {
  double wall = 0;
  int64_t prompt_tokens = 0, output_tokens = 0, requests = 0;
  int64_t distinct_blocks = 0;  // full 128-token blocks of the prompts, each distinct prefix counted once
  int64_t longest = 0;          // the longest prompt + its max_tokens
  std::vector<double> ttft, tbt;
  engine::EngineStats before, after;
  double input_tps() const { return wall > 0 ? static_cast<double>(prompt_tokens) / wall : 0; }
  double output_tps() const { return wall > 0 ? static_cast<double>(output_tokens) / wall : 0; }
};

class Tokens {
 public:
  Tokens(int64_t vocab, uint64_t seed) : vocab_(vocab), rng_(seed) {}
  std::vector<int32_t> Make(int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    std::uniform_int_distribution<int32_t> d(2, static_cast<int32_t>(vocab_ - 1));
    for (int32_t& x : t) x = d(rng_);
    return t;
  }
  int64_t Between(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  double Exponential(double rate) { return std::exponential_distribution<double>(rate)(rng_); }

 private:
  int64_t vocab_;
  std::mt19937_64 rng_;
};

// Submits jobs at their times, follows agent sessions turn by turn, and records client-side latencies.
class Driver {
 public:
  Driver(engine::Engine& engine, Tokens& tokens) : engine_(engine), tokens_(tokens) {}

  // `follow(session, prompt + output)` returns the session's next turn, or a job with an empty prompt.
  RunResult Run(std::vector<Job> jobs, const std::function<Job(int, std::vector<int32_t>)>& follow) {
    RunResult result;
    result.before = engine_.Stats();
    const int64_t t0 = NowNanos();
    using Entry = std::pair<int64_t, size_t>;  // due time, index into pending_
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> due;
    for (Job& j : jobs) {
      pending_.push_back(std::move(j));
      due.push({t0 + static_cast<int64_t>(pending_.back().at * 1e9), pending_.size() - 1});
    }
    int64_t last_finish = t0;
    while (true) {
      std::unique_lock<std::mutex> lock(mu_);
      // Follow-up turns of finished requests.
      for (auto& [session, context] : finished_sessions_) {
        lock.unlock();
        Job next = follow(session, std::move(context));
        lock.lock();
        if (next.prompt.empty()) continue;
        pending_.push_back(std::move(next));
        due.push({NowNanos() + static_cast<int64_t>(pending_.back().at * 1e9), pending_.size() - 1});
      }
      finished_sessions_.clear();
      if (due.empty() && in_flight_ == 0) {
        last_finish = last_finish_;
        break;
      }
      const int64_t now = NowNanos();
      if (!due.empty() && due.top().first <= now) {
        const size_t index = due.top().second;
        due.pop();
        ++in_flight_;
        lock.unlock();
        Submit(index, &result);
        continue;
      }
      const int64_t wait = due.empty() ? 50'000'000 : std::min<int64_t>(due.top().first - now, 50'000'000);
      cv_.wait_for(lock, std::chrono::nanoseconds(wait));
    }
    result.wall = static_cast<double>(last_finish - t0) * 1e-9;
    result.after = engine_.Stats();
    std::lock_guard<std::mutex> lock(mu_);
    result.ttft = ttft_;
    result.tbt = tbt_;
    result.output_tokens = output_tokens_;
    result.distinct_blocks = static_cast<int64_t>(blocks_.size());
    return result;
  }

 private:
  void Submit(size_t index, RunResult* result) {
    Job& job = pending_[index];
    engine::RequestParams p;
    p.sampling.temperature = 0;
    p.sampling.max_tokens = job.max_tokens;
    p.sampling.ignore_eos = true;
    result->prompt_tokens += static_cast<int64_t>(job.prompt.size());
    result->longest = std::max<int64_t>(result->longest, static_cast<int64_t>(job.prompt.size()) + job.max_tokens);
    ++result->requests;
    {
      // The prompt's full blocks, each named by the hash of all tokens up to its end (as the engine's
      // chained names distinguish them): the workload's working set.
      Hasher128 h;
      const size_t full = job.prompt.size() / kvcache::kBlockTokens * kvcache::kBlockTokens;
      for (size_t at = 0; at < full; at += kvcache::kBlockTokens) {
        h.Update(job.prompt.data() + at, kvcache::kBlockTokens * sizeof(int32_t));
        blocks_.insert(h.Digest());
      }
    }
    struct State {
      int64_t submitted = 0, last = 0;
      std::vector<int32_t> context;
      int session = -1;
    };
    auto state = std::make_shared<State>();
    state->submitted = NowNanos();
    state->context = job.prompt;
    state->session = job.session;
    auto id = engine_.AddRequest(job.prompt, p, [this, state](engine::RequestUpdate u) {
      const int64_t now = NowNanos();
      std::lock_guard<std::mutex> lock(mu_);
      for (const engine::SequenceDelta& d : u.sequences) {
        for (const engine::GeneratedToken& t : d.tokens) {
          if (state->last == 0) ttft_.push_back(static_cast<double>(now - state->submitted) * 1e-9);
          else tbt_.push_back(static_cast<double>(now - state->last) * 1e-9);
          state->last = now;
          state->context.push_back(t.id);
          ++output_tokens_;
        }
      }
      if (u.finished) {
        --in_flight_;
        last_finish_ = std::max(last_finish_, now);
        if (state->session >= 0) finished_sessions_.push_back({state->session, std::move(state->context)});
        cv_.notify_all();
      }
    });
    if (!id.ok()) {
      std::fprintf(stderr, "bench engine: request refused: %s\n", id.status().message().c_str());
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_;
      cv_.notify_all();
    }
  }

  engine::Engine& engine_;
  Tokens& tokens_;
  std::deque<Job> pending_;
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;
  int64_t last_finish_ = 0;
  std::vector<std::pair<int, std::vector<int32_t>>> finished_sessions_;
  std::vector<double> ttft_, tbt_;
  int64_t output_tokens_ = 0;
  std::unordered_set<Hash128, Hash128Hasher> blocks_;  // Submit runs on the driver's thread only
};

struct Workload {
  std::vector<Job> jobs;
  std::function<Job(int, std::vector<int32_t>)> follow;
};

Workload MakeWorkload(const std::string& name, const Args& a, Tokens& tokens) {
  Workload w;
  w.follow = [](int, std::vector<int32_t>) { return Job{}; };
  if (name == "agent") {
    auto system = std::make_shared<std::vector<int32_t>>(tokens.Make(a.system_tokens));
    auto turns_left = std::make_shared<std::vector<int>>(static_cast<size_t>(a.sessions), a.turns - 1);
    double at = 0;
    for (int s = 0; s < a.sessions; ++s) {
      Job j;
      j.prompt = *system;
      for (int32_t t : tokens.Make(tokens.Between(64, 192))) j.prompt.push_back(t);
      j.max_tokens = tokens.Between(16, 48);
      j.at = at;
      j.session = s;
      at += tokens.Exponential(a.rate);
      w.jobs.push_back(std::move(j));
    }
    w.follow = [&tokens, turns_left](int session, std::vector<int32_t> context) {
      Job j;
      if ((*turns_left)[static_cast<size_t>(session)]-- <= 0) return j;
      j.prompt = std::move(context);
      for (int32_t t : tokens.Make(tokens.Between(64, 192))) j.prompt.push_back(t);
      j.max_tokens = tokens.Between(16, 48);
      j.at = static_cast<double>(tokens.Between(0, 50)) * 1e-3;
      j.session = session;
      return j;
    };
  } else if (name == "chat") {
    const std::vector<int32_t> system = tokens.Make(96);
    double at = 0;
    for (int i = 0; i < a.requests; ++i) {
      Job j;
      j.prompt = system;
      for (int32_t t : tokens.Make(tokens.Between(32, 480))) j.prompt.push_back(t);
      j.max_tokens = tokens.Between(32, 96);
      j.at = at;
      at += tokens.Exponential(a.rate);
      w.jobs.push_back(std::move(j));
    }
  } else {
    double at = 0;
    for (int i = 0; i < a.requests; ++i) {
      Job j;
      j.prompt = tokens.Make(tokens.Between(16, 1024));
      j.max_tokens = tokens.Between(1, 96);
      j.at = at;
      at += tokens.Exponential(a.rate);
      w.jobs.push_back(std::move(j));
    }
  }
  return w;
}

Result<std::unique_ptr<engine::Engine>> MakeEngine(const Args& a, bool cache, double tbt_target_ms,
                                                   int64_t prefill_chunk = 512, int64_t max_seqs = 64,
                                                   int64_t kv_blocks = 0, kvcache::LowerTier* tier = nullptr) {
  model::LoadOptions load;
  load.prefault = false;  // the page cache is warm after the first load
  load.drafting = a.speculative.uses_draft_layers();
  auto m = model::LoadCausalLM(a.model_dir, load);
  if (!m.ok()) return m.status();
  engine::EngineOptions o;
  o.kv_cache_bytes = a.kv_cache_mib << 20;
  o.enable_prefix_caching = cache;
  o.tbt_target_ms = tbt_target_ms;
  o.prefill_chunk = prefill_chunk;
  o.max_num_seqs = max_seqs;
  o.max_num_batched_tokens = 4096;
  o.max_waiting = 1 << 20;
  o.kv_blocks = kv_blocks;
  o.lower_tier = tier;
  o.speculative = a.speculative;
  return engine::Engine::Create(std::move(m).value(), o);
}

void PrintRow(const std::string& workload, const std::string& cache, const RunResult& r) {
  const engine::EngineStats& b = r.before;
  const engine::EngineStats& e = r.after;
  const double queries = static_cast<double>(e.prefix_cache_queries - b.prefix_cache_queries);
  const double hits = static_cast<double>(e.prefix_cache_hits - b.prefix_cache_hits);
  const uint64_t window_hits = e.window_block_hits - b.window_block_hits;
  const uint64_t replay_hits = e.replay_hits - b.replay_hits;
  const uint64_t replayed = e.replayed_tokens - b.replayed_tokens;
  const double forward = e.forward_seconds - b.forward_seconds;
  const double gap = e.idle_gap_seconds - b.idle_gap_seconds;
  const double steps = static_cast<double>(e.steps - b.steps);
  std::printf("%-7s %-5s %9.0f %9.1f %8s %8s %7s %7s %7.1f%% %7s %8s %7.1fus %5.2f%%\n", workload.c_str(),
              cache.c_str(), r.input_tps(), r.output_tps(), Ms(Percentile(r.ttft, 0.5)).c_str(),
              Ms(Percentile(r.ttft, 0.99)).c_str(), Ms(Percentile(r.tbt, 0.5)).c_str(),
              Ms(Percentile(r.tbt, 0.99)).c_str(), queries > 0 ? 100 * hits / queries : 0.0,
              window_hits + replay_hits > 0
                  ? (std::to_string(100 * window_hits / (window_hits + replay_hits)) + "%").c_str()
                  : "-",
              replay_hits > 0 ? std::to_string(replayed / replay_hits).c_str() : "-",
              steps > 0 ? 1e6 * gap / steps : 0.0, forward > 0 ? 100 * gap / forward : 0.0);
  std::fflush(stdout);
}

// ---- goal measurements -------------------------------------------------------------------------------

double TimeToFirstToken(engine::Engine& e, const std::vector<int32_t>& prompt) {
  engine::RequestParams p;
  p.sampling.temperature = 0;
  p.sampling.max_tokens = 1;
  p.sampling.ignore_eos = true;
  const int64_t t0 = NowNanos();
  auto r = e.Generate(std::vector<std::vector<int32_t>>{prompt}, p);
  return r.ok() ? static_cast<double>(NowNanos() - t0) * 1e-9 : -1;
}

// Streams' TBT while a long prompt arrives: `streams` requests decode; once they run, the long prompt is
// added; TBT samples are those of the streams between its arrival and its first token.
struct Interference {
  double tbt_p50 = 0, tbt_p99 = 0, long_ttft = 0;
};
Interference MeasureInterference(engine::Engine& e, Tokens& tokens, int streams, int64_t long_prompt) {
  std::mutex mu;
  std::vector<double> during;
  std::atomic<bool> window{false};
  std::atomic<int> running{0};
  std::atomic<bool> stop{false};
  std::vector<engine::RequestId> ids;
  std::vector<std::shared_ptr<int64_t>> lasts;
  for (int i = 0; i < streams; ++i) {
    engine::RequestParams p;
    p.sampling.temperature = 0;
    p.sampling.max_tokens = 1 << 20;
    p.sampling.ignore_eos = true;
    auto last = std::make_shared<int64_t>(0);
    lasts.push_back(last);
    auto id = e.AddRequest(tokens.Make(64), p, [&, last](engine::RequestUpdate u) {
      const int64_t now = NowNanos();
      for (const auto& d : u.sequences) {
        if (d.tokens.empty()) continue;
        if (*last == 0) ++running;
        if (*last != 0 && window) {
          std::lock_guard<std::mutex> lock(mu);
          during.push_back(static_cast<double>(now - *last) * 1e-9);
        }
        *last = now;
      }
    });
    if (id.ok()) ids.push_back(*id);
  }
  while (running < streams) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // steady decoding
  Interference out;
  window = true;
  out.long_ttft = TimeToFirstToken(e, tokens.Make(long_prompt));
  window = false;
  for (engine::RequestId id : ids) e.Abort(id);
  stop = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::lock_guard<std::mutex> lock(mu);
  out.tbt_p50 = Percentile(during, 0.5);
  out.tbt_p99 = Percentile(during, 0.99);
  return out;
}

// Decode tokens/s at batch b: the engine (b requests with short prompts, steady state) and the model
// driven directly on the same shapes (b sequences, one Forward per step), in this process.
std::pair<double, double> MeasureDecode(engine::Engine& e, model::CausalLM& direct, Tokens& tokens, int batch,
                                        int64_t context, int steps) {
  // The model alone.
  const kvcache::KvCacheSpec& spec = direct.cache_spec();
  auto pools = kvcache::KvPools::Create(spec, batch * (kvcache::BlocksFor(context + steps + 8) + 2));
  double model_tps = 0;
  if (pools.ok()) {
    model::SequentialBlocks blocks(spec, *pools);
    std::vector<std::unique_ptr<model::SequenceState>> states;
    model::ForwardOutput out;
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < batch; ++i) {
      states.push_back(direct.NewSequence());
      prompts.push_back(tokens.Make(context));
      (void)blocks.Reserve(*states.back(), context);
      model::SequenceChunk c{states.back().get(), prompts.back(), model::LogitsWanted::kLast};
      (void)direct.Forward(std::span(&c, 1), *pools, &out);
    }
    std::vector<double> times;
    std::vector<int32_t> next(static_cast<size_t>(batch), 5);
    for (int s = 0; s < steps; ++s) {
      std::vector<model::SequenceChunk> chunks;
      for (int i = 0; i < batch; ++i) {
        (void)blocks.Reserve(*states[static_cast<size_t>(i)], 1);
        chunks.push_back({states[static_cast<size_t>(i)].get(), std::span<const int32_t>(&next[static_cast<size_t>(i)], 1),
                          model::LogitsWanted::kLast});
      }
      const int64_t t0 = NowNanos();
      if (!direct.Forward(chunks, *pools, &out).ok()) break;
      times.push_back(static_cast<double>(NowNanos() - t0) * 1e-9);
    }
    const double median = Percentile(times, 0.5);
    model_tps = median > 0 ? batch / median : 0;
  }
  // The engine: b requests decoding together; each stream's time between tokens once all have started
  // and before any finishes, and b over its median (the median step, as for the model alone).
  std::mutex mu;
  std::vector<double> gaps;
  std::atomic<int> started{0}, finished{0};
  engine::RequestParams p;
  p.sampling.temperature = 0;
  p.sampling.max_tokens = steps + 4;
  p.sampling.ignore_eos = true;
  for (int i = 0; i < batch; ++i) {
    auto last = std::make_shared<int64_t>(0);
    (void)e.AddRequest(tokens.Make(context), p, [&, last](engine::RequestUpdate u) {
      const int64_t now = NowNanos();
      for (const auto& d : u.sequences) {
        if (d.tokens.empty()) continue;
        if (*last == 0) {
          ++started;
        } else if (started == batch && finished == 0) {
          std::lock_guard<std::mutex> lock(mu);
          gaps.push_back(static_cast<double>(now - *last) * 1e-9);
        }
        *last = now;
      }
      if (u.finished) ++finished;
    });
  }
  while (finished < batch) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double median_gap = Percentile(gaps, 0.5);
  const double engine_tps = median_gap > 0 ? batch / median_gap : 0;
  return {engine_tps, model_tps};
}

// Bounded replay against a cold run, with the model directly, as the engine does it: sequence A prefills
// the prompt cold; sequence B shares A's prefix blocks for [0, 128·m), restores with no window state at
// 128·(m − 1), replays those 128 positions state-only and prefills the rest; then both decode greedily
// `steps` tokens (each its own choice), comparing logit rows while their tokens agree.
struct ReplayDeviation {
  int agree = 0, compared = 0;
  double max_abs = 0, mean_abs = 0;
};
Result<ReplayDeviation> MeasureBoundedReplay(model::CausalLM& m, Tokens& tokens, int64_t prompt_len, int steps) {
  const kvcache::KvCacheSpec& spec = m.cache_spec();
  const int64_t blocks = kvcache::BlocksFor(prompt_len + steps) + 2;
  DI_ASSIGN_OR_RETURN(kvcache::KvPools pools, kvcache::KvPools::Create(spec, 2 * blocks));
  const std::vector<int32_t> prompt = tokens.Make(prompt_len);
  const int64_t hit = (prompt_len - 1) / kvcache::kBlockTokens;  // blocks B takes from A
  auto a = m.NewSequence();
  auto b = m.NewSequence();
  // A owns blocks [0, blocks) of every group; B shares A's prefix blocks below the hit, else [blocks, 2·blocks).
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    const bool prefix = spec.groups[g].retention == kvcache::CacheRetention::kPrefix;
    for (int32_t i = 0; i < blocks; ++i) {
      a->block_table(g).push_back(i);
      b->block_table(g).push_back(prefix && i < hit ? i : static_cast<int32_t>(blocks + i));
    }
  }
  model::ForwardOutput oa, ob;
  model::SequenceChunk ca{a.get(), prompt, model::LogitsWanted::kLast};
  DI_RETURN_IF_ERROR(m.Forward(std::span(&ca, 1), pools, &oa));
  const int64_t restore = (hit - 1) * kvcache::kBlockTokens;
  DI_RETURN_IF_ERROR(m.RestoreAt(*b, restore, model::RestoreFrom::kNoWindow, pools));
  model::SequenceChunk replay{b.get(), std::span<const int32_t>(prompt).subspan(static_cast<size_t>(restore), 128),
                              model::LogitsWanted::kNone};
  replay.state_only = true;
  DI_RETURN_IF_ERROR(m.Forward(std::span(&replay, 1), pools, &ob));
  model::SequenceChunk rest{b.get(), std::span<const int32_t>(prompt).subspan(static_cast<size_t>(hit * 128)),
                            model::LogitsWanted::kLast};
  DI_RETURN_IF_ERROR(m.Forward(std::span(&rest, 1), pools, &ob));
  ReplayDeviation d;
  const int64_t v = m.info().vocab_size;
  double sum = 0;
  int64_t count = 0;
  for (int s = 0; s < steps; ++s) {
    const float* ra = oa.row(0);
    const float* rb = ob.row(0);
    int32_t ta = 0, tb = 0;
    for (int64_t i = 0; i < v; ++i) {
      const double diff = std::abs(static_cast<double>(ra[i]) - rb[i]);
      d.max_abs = std::max(d.max_abs, diff);
      sum += diff;
      ++count;
      if (ra[i] > ra[ta]) ta = static_cast<int32_t>(i);
      if (rb[i] > rb[tb]) tb = static_cast<int32_t>(i);
    }
    ++d.compared;
    if (ta != tb) break;  // after a divergence the continuations are different texts
    ++d.agree;
    model::SequenceChunk na{a.get(), std::span<const int32_t>(&ta, 1), model::LogitsWanted::kLast};
    model::SequenceChunk nb{b.get(), std::span<const int32_t>(&tb, 1), model::LogitsWanted::kLast};
    DI_RETURN_IF_ERROR(m.Forward(std::span(&na, 1), pools, &oa));
    DI_RETURN_IF_ERROR(m.Forward(std::span(&nb, 1), pools, &ob));
  }
  d.mean_abs = count > 0 ? sum / static_cast<double>(count) : 0;
  return d;
}

// The agent workload with a RAM prefix pool of a fraction of its working set, RAM only and with the KV
// store under it. `reference` is the cache-on run with the full pool: its working set
// and longest request size the small pool. Returns a process exit code.
int RunAgentWithStore(const Args& a, const RunResult& reference) {
  const int64_t working = reference.distinct_blocks;
  // A lone request must fit (the engine refuses prompts the pool can never hold), with a block to spare.
  const int64_t floor_blocks = kvcache::BlocksFor(reference.longest) + 1;
  const int64_t pool = std::max<int64_t>(static_cast<int64_t>(std::ceil(a.ram_fraction * static_cast<double>(working))),
                                         floor_blocks);
  std::printf("agent   RAM prefix pool %lld blocks = 1/%.1f of the working set's %lld blocks (floor %lld: the "
              "longest request)\n",
              static_cast<long long>(pool), pool > 0 ? static_cast<double>(working) / static_cast<double>(pool) : 0.0,
              static_cast<long long>(working), static_cast<long long>(floor_blocks));
  std::error_code ec;
  const std::filesystem::path dir =
      std::filesystem::path(a.kv_store_dir) / ("bench-engine-" + std::to_string(static_cast<long long>(getpid())));
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(a.kv_store_dir, ec);
  if (ec) return Fail("bench engine", "--kv-store " + a.kv_store_dir + ": " + ec.message());
  RunResult rows[2];
  for (int with_store = 0; with_store < 2; ++with_store) {
    std::unique_ptr<kvstore::KvStoreTier> tier;  // outlives the engine, which calls it
    if (with_store) {
      auto probe = model::LoadCausalLM(a.model_dir, {.prefault = false});
      if (!probe.ok()) return Fail("bench engine", probe.status().message());
      const model::ModelInfo& info = (*probe)->info();
      const kvstore::StoreModel store_model{info.architecture, info.weights_fingerprint,
                                            model::ComputePrecisionName(model::ComputePrecision::kExact),
                                            model::KvPrecisionName(model::KvPrecision::kF32)};
      auto layout = kvstore::StoreLayoutFor((*probe)->cache_spec(), store_model);
      if (!layout.ok()) return Fail("bench engine", "--kv-store: " + layout.status().message());
      kvstore::StoreOptions so;
      so.dir = dir.string();
      so.layout = std::move(*layout);
      so.sweep_interval_s = 0;  // the run is short; nothing to sweep
      auto store = kvstore::Store::Open(std::move(so));
      if (!store.ok()) return Fail("bench engine", "--kv-store " + a.kv_store_dir + ": " + store.status().message());
      tier = std::make_unique<kvstore::KvStoreTier>(std::move(*store), kvstore::TtlClass::kAgent);
    }
    {
      auto e = MakeEngine(a, true, 0, 512, 64, pool, tier.get());
      if (!e.ok()) return Fail("bench engine", e.status().message());
      Tokens tokens((*e)->info().vocab_size, a.seed);
      Workload load = MakeWorkload("agent", a, tokens);
      Driver driver(**e, tokens);
      rows[with_store] = driver.Run(std::move(load.jobs), load.follow);
      PrintRow("agent", with_store ? "store" : "ram", rows[with_store]);
    }
    if (tier) {
      // The engine reads from the store only where its read is predicted faster than recomputing
      // (tier_loading.cpp): on a small model the store may see lookups but few reads.
      const kvstore::StoreStats st = tier->store().stats();
      std::printf("agent   store: %llu blocks written, %llu looked up (%llu present), %llu read and verified, "
                  "%.1f MB read\n",
                  static_cast<unsigned long long>(st.writes_done), static_cast<unsigned long long>(st.lookups),
                  static_cast<unsigned long long>(st.lookup_present), static_cast<unsigned long long>(st.hit_blocks),
                  static_cast<double>(st.bytes_read) * 1e-6);
    }
  }
  std::filesystem::remove_all(dir, ec);
  const engine::EngineStats& b = rows[1].before;
  const engine::EngineStats& e = rows[1].after;
  std::printf("agent   tier: %llu prompts looked up, %llu missed their first block, %llu blocks held but "
              "recomputed (%llu predicted faster, %llu no free pool block), %llu waits timed out\n",
              static_cast<unsigned long long>(e.lower_tier_lookups - b.lower_tier_lookups),
              static_cast<unsigned long long>(e.lower_tier_lookup_misses - b.lower_tier_lookup_misses),
              static_cast<unsigned long long>(e.lower_tier_skipped_blocks - b.lower_tier_skipped_blocks +
                                              e.lower_tier_no_room_blocks - b.lower_tier_no_room_blocks),
              static_cast<unsigned long long>(e.lower_tier_skipped_blocks - b.lower_tier_skipped_blocks),
              static_cast<unsigned long long>(e.lower_tier_no_room_blocks - b.lower_tier_no_room_blocks),
              static_cast<unsigned long long>(e.lower_tier_timeouts - b.lower_tier_timeouts));
  const double hits = static_cast<double>(e.prefix_cache_hits - b.prefix_cache_hits);
  const double external = static_cast<double>(e.external_prefix_cache_hits - b.external_prefix_cache_hits);
  std::printf("agent   store: %.1f%% of the hit tokens came from the store; input tokens/s store / RAM only: %s\n",
              hits > 0 ? 100 * external / hits : 0.0, Ratio(rows[1].input_tps(), rows[0].input_tps()).c_str());
  return 0;
}

std::string LoadAverage() {
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) < 0) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %.2f %.2f", load[0], load[1], load[2]);
  return buf;
}

int RunBenchEngine(const std::vector<std::string>& argv) {
  Args a;
  std::string workloads;
  cli::Flags flags("bench engine");
  flags.Path("--model", &a.model_dir).Required();
  flags.String("--workloads", &workloads);
  flags.Int<int>("--sessions", &a.sessions, 1, 4096);
  flags.Int<int>("--turns", &a.turns, 1, 1000);
  flags.Int<int64_t>("--system-tokens", &a.system_tokens, 1, 1 << 20);
  flags.Int<int>("--requests", &a.requests, 1, 100000);
  flags.Double("--rate", &a.rate, 1e-3, 1e6);
  flags.Double("--tbt-target-ms", &a.tbt_target_ms, 0, 1e6);
  flags.Int<int64_t>("--long-prompt", &a.long_prompt, 256, 1 << 20);
  flags.Int<int64_t>("--interference-prompt", &a.interference_prompt, 256, 1 << 20);
  flags.Int<int64_t>("--kv-cache-mib", &a.kv_cache_mib, 16, int64_t{1} << 24);
  flags.Path("--kv-store", &a.kv_store_dir);
  flags.Double("--ram-fraction", &a.ram_fraction, 1e-4, 1);
  flags.Int<uint64_t>("--seed", &a.seed, 0, UINT64_MAX);
  bool skip_goals = false;
  flags.Switch("--skip-goals", &skip_goals);
  flags.Switch("--skip-cache-off", &a.skip_cache_off);
  flags.Custom("--speculative-config", "JSON", [&a](const std::string& v) {
    DI_ASSIGN_OR_RETURN(a.speculative, engine::ParseSpeculativeConfig(v));
    return Status::Ok();
  });
  flags.Int<int>("--spec-batch", &a.spec_batch, 1, 256);
  flags.Int<int64_t>("--spec-tokens", &a.spec_tokens, 2, 1 << 16);
  flags.Int<int>("--spec-rounds", &a.spec_rounds, 1, 100);
  flags.Custom("--spec-concurrency", "LIST", [&a](const std::string& v) {
    DI_ASSIGN_OR_RETURN(a.spec_concurrency, ParseConcurrencyList(v));
    return Status::Ok();
  });
  if (int rc = flags.Parse(argv)) return rc;
  a.goals = !skip_goals;
  if (!workloads.empty()) {
    a.workloads.clear();
    size_t at = 0;
    while (at <= workloads.size()) {
      const size_t comma = std::min(workloads.find(',', at), workloads.size());
      const std::string w = workloads.substr(at, comma - at);
      if (w != "agent" && w != "chat" && w != "random" && w != "none")
        return cli::UsageError("bench engine", "--workloads takes agent, chat, random or none (got '" + w + "')");
      if (w != "none") a.workloads.push_back(w);
      at = comma + 1;
    }
  }
  if (!a.kv_store_dir.empty() && std::find(a.workloads.begin(), a.workloads.end(), "agent") == a.workloads.end())
    return cli::UsageError("bench engine", "--kv-store measures the agent workload: include it in --workloads");
  std::printf("deepinfer bench engine --model %s (load average %s)\n", a.model_dir.c_str(), LoadAverage().c_str());

  // Workloads, cache on and off.
  std::printf("\n%-7s %-5s %9s %9s %8s %8s %7s %7s %8s %7s %8s %9s %6s\n", "load", "cache", "in tok/s", "out tok/s",
              "TTFTp50", "TTFTp99", "TBTp50", "TBTp99", "hit", "window", "replay/h", "idle gap", "gap%");
  std::printf("%-7s %-5s %9s %9s %8s %8s %7s %7s %8s %7s %8s %9s %6s\n", "", "", "", "", "ms", "ms", "ms", "ms",
              "tokens", "hits", "tokens", "per step", "fwd");
  for (const std::string& w : a.workloads) {
    RunResult on_off[2];
    for (int cache = 1; cache >= (a.skip_cache_off ? 1 : 0); --cache) {
      auto e = MakeEngine(a, cache == 1, 0);
      if (!e.ok()) return Fail("bench engine", e.status().message());
      Tokens tokens((*e)->info().vocab_size, a.seed);
      Workload load = MakeWorkload(w, a, tokens);
      Driver driver(**e, tokens);
      on_off[cache] = driver.Run(std::move(load.jobs), load.follow);
      PrintRow(w, cache ? "on" : "off", on_off[cache]);
      if (a.speculative.enabled())
        std::printf("%-7s %s\n", "", SpeculativeSummary(on_off[cache].before, on_off[cache].after).c_str());
    }
    if (!a.skip_cache_off) {
      std::printf("%-7s ratio input tokens/s on/off: %s, output tokens/s: %s\n", w.c_str(),
                  Ratio(on_off[1].input_tps(), on_off[0].input_tps()).c_str(),
                  Ratio(on_off[1].output_tps(), on_off[0].output_tps()).c_str());
    }
    if (w == "agent" && !a.kv_store_dir.empty()) {
      if (int rc = RunAgentWithStore(a, on_off[1])) return rc;
    }
  }
  if (a.speculative.enabled()) {
    std::printf("\nspeculative decoding\n");
    const SpeculativeDecodeOptions spec{.model_dir = a.model_dir,
                                        .kv_cache_mib = a.kv_cache_mib,
                                        .config = a.speculative,
                                        .batch = a.spec_batch,
                                        .tokens = a.spec_tokens,
                                        .seed = a.seed,
                                        .rounds = a.spec_rounds};
    if (int rc = a.spec_concurrency.empty() ? MeasureSpeculativeDecode(spec)
                                            : SweepSpeculativeDecode(spec, a.spec_concurrency))
      return rc;
  }
  if (!a.goals) return 0;

  std::printf("\ngoals\n");
  {
    auto e = MakeEngine(a, true, 0);
    if (!e.ok()) return Fail("bench engine", e.status().message());
    Tokens tokens((*e)->info().vocab_size, a.seed + 1);
    const std::vector<int32_t> prompt = tokens.Make(a.long_prompt);
    const double cold = TimeToFirstToken(**e, prompt);
    const double warm = TimeToFirstToken(**e, prompt);
    std::printf("  warm %lld-token prompt TTFT: cold %s ms, warm %s ms = %.1f%% of cold (goal <= 5%%)\n",
                static_cast<long long>(a.long_prompt), Ms(cold).c_str(), Ms(warm).c_str(), 100 * warm / cold);
    // Decode at batch 32 against the model driven directly.
    auto direct = model::LoadCausalLM(a.model_dir, {.prefault = false});
    if (!direct.ok()) return Fail("bench engine", direct.status().message());
    const auto [engine_tps, model_tps] = MeasureDecode(**e, **direct, tokens, 32, 256, 12);
    std::printf("  decode at batch 32 (context 256, median step): engine %.1f tok/s, model alone %.1f tok/s = %.2fx "
                "(goal >= 0.90)\n",
                engine_tps, model_tps, model_tps > 0 ? engine_tps / model_tps : 0.0);
    const engine::EngineStats s = (*e)->Stats();
    std::printf("  idle gap over this engine's life: %.1f us per step, %.2f%% of forward time (goal < 2%%)\n",
                s.steps ? 1e6 * s.idle_gap_seconds / static_cast<double>(s.steps) : 0.0,
                s.forward_seconds > 0 ? 100 * s.idle_gap_seconds / s.forward_seconds : 0.0);
    auto replay = MeasureBoundedReplay(**direct, tokens, std::min<int64_t>(a.long_prompt, 2048) + 17, 16);
    if (replay.ok()) {
      std::printf("  bounded replay (128 positions) vs cold, %lld-token prompt: greedy agreement %d/%d tokens, "
                  "logits max |diff| %.3g, mean |diff| %.3g\n",
                  static_cast<long long>(std::min<int64_t>(a.long_prompt, 2048) + 17), replay->agree, replay->compared,
                  replay->max_abs, replay->mean_abs);
    } else {
      std::printf("  bounded replay: %s\n", replay.status().message().c_str());
    }
  }
  {
    // The TBT target: 1.5 × a decode step at batch 8 (unless given).
    double target_ms = a.tbt_target_ms;
    const int64_t long_prompt = a.interference_prompt;
    for (int chunked = 0; chunked < 2; ++chunked) {
      auto e = chunked ? MakeEngine(a, false, 0, 512, 64) : MakeEngine(a, false, 0);
      if (!e.ok()) return Fail("bench engine", e.status().message());
      Tokens tokens((*e)->info().vocab_size, a.seed + 2);
      if (!chunked && target_ms <= 0) {
        const Interference base = MeasureInterference(**e, tokens, 8, 256);
        target_ms = 1.5 * base.tbt_p50 * 1e3;
      }
      if (!chunked) {
        e->reset();
        e = MakeEngine(a, false, target_ms);
        if (!e.ok()) return Fail("bench engine", e.status().message());
      }
      const Interference r = MeasureInterference(**e, tokens, 8, long_prompt);
      std::printf("  %lld-token prompt beside 8 streams, %s: streams' TBT p50 %s ms, p99 %s ms (%.2fx the %.1f ms "
                  "target; goal <= 1.2x with the target), its TTFT %s ms\n",
                  static_cast<long long>(long_prompt), chunked ? "fixed 512-token chunks" : "latency-budgeted chunks",
                  Ms(r.tbt_p50).c_str(), Ms(r.tbt_p99).c_str(), r.tbt_p99 * 1e3 / target_ms, target_ms,
                  Ms(r.long_ttft).c_str());
    }
  }
  std::printf("\nload average at the end: %s\n", LoadAverage().c_str());
  return 0;
}

const cli::BenchRegistration kEngineRegistration(
    {"engine", "the engine under agent, chat and random workloads", kEngineUsage, RunBenchEngine});

}  // namespace
}  // namespace deepinfer::bench
