#include "bench/speculative.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "core/clock.h"
#include "model/causal_lm.h"

namespace deepinfer::bench {
namespace {

constexpr int kWarmUpPasses = 2;

// The q-quantile of `values` (nearest rank; 0 when empty).
double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1) + 0.5)];
}

// "1-min/5-min/15-min" load averages, so that a figure can be read against the machine's other load.
std::string LoadAverageText() {
  double load[3] = {};
  if (getloadavg(load, 3) != 3) return "unknown";
  char text[64];
  std::snprintf(text, sizeof text, "%.2f/%.2f/%.2f", load[0], load[1], load[2]);
  return text;
}

struct DecodeRun {
  std::vector<std::vector<int32_t>> ids;  // per stream
  double seconds = 0;                     // from the last stream's first token to the last token
  double cpu_seconds = 0;                 // the process's CPU time over the same span
  engine::EngineStats before, after;
  Status status;
};

// CPU time of every thread of this process. Another process's load stretches a pass's wall time but not
// the CPU time its own work takes, so it compares configurations more steadily on a shared machine (with
// DEEPINFER_POOL_SPIN_US=0, so that waiting pool workers burn none).
int64_t ProcessCpuNanos() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

// The streams, all at once (in_flight 0: timed from the last stream's first token to the last token, the
// decode alone), or `in_flight` at a time, each next one added as one finishes (timed from the first
// submission to the last token, prefills included).
DecodeRun Decode(engine::Engine& e, const std::vector<std::vector<int32_t>>& prompts, int64_t tokens,
                 size_t in_flight = 0) {
  DecodeRun run;
  run.ids.resize(prompts.size());
  engine::RequestParams p;
  p.sampling.temperature = 0;
  p.sampling.max_tokens = tokens;
  p.sampling.ignore_eos = true;
  p.detokenize = false;
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0, started = 0;
  int64_t all_started = 0, last = 0, cpu_started = 0, cpu_last = 0;
  const size_t window = in_flight ? in_flight : prompts.size();
  run.before = e.Stats();
  const int64_t first_submitted = NowNanos(), cpu_first_submitted = ProcessCpuNanos();
  auto submit = [&](size_t i) {
    auto id = e.AddRequest(prompts[i], p, [&, i](engine::RequestUpdate u) {
      const int64_t now = NowNanos(), cpu = ProcessCpuNanos();
      std::lock_guard<std::mutex> lock(mu);
      for (const engine::SequenceDelta& d : u.sequences) {
        if (d.tokens.empty()) continue;
        if (run.ids[i].empty() && ++started == prompts.size()) all_started = now, cpu_started = cpu;
        for (const engine::GeneratedToken& t : d.tokens) run.ids[i].push_back(t.id);
        last = now, cpu_last = cpu;
      }
      if (!u.status.ok()) run.status = u.status;
      if (u.finished) {
        ++done;
        cv.notify_all();
      }
    });
    if (!id.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      run.status = id.status();
      ++done;
      cv.notify_all();
    }
  };
  size_t submitted = 0;
  std::unique_lock<std::mutex> lock(mu);
  while (done < prompts.size()) {
    while (submitted < prompts.size() && submitted - done < window) {
      lock.unlock();
      submit(submitted++);
      lock.lock();
    }
    cv.wait(lock, [&] { return done == prompts.size() || (submitted < prompts.size() && submitted - done < window); });
  }
  if (in_flight) all_started = first_submitted, cpu_started = cpu_first_submitted;
  run.seconds = static_cast<double>(last - all_started) * 1e-9;
  run.cpu_seconds = static_cast<double>(cpu_last - cpu_started) * 1e-9;
  run.after = e.Stats();
  return run;
}

Result<std::unique_ptr<engine::Engine>> MakeEngine(const SpeculativeDecodeOptions& o, bool speculative,
                                                   bool prefix_caching = true) {
  auto m = model::LoadCausalLM(o.model_dir, {.drafting = speculative && o.config.uses_draft_layers(), .prefault = false});
  if (!m.ok()) return m.status();
  engine::EngineOptions eo;
  eo.kv_cache_bytes = o.kv_cache_mib << 20;
  eo.max_num_seqs = std::max(o.batch, 1);
  eo.enable_prefix_caching = prefix_caching;
  if (speculative) eo.speculative = o.config;
  return engine::Engine::Create(std::move(m).value(), eo);
}


}  // namespace

std::string SpeculativeSummary(const engine::EngineStats& b, const engine::EngineStats& a) {
  const uint64_t drafts = a.spec_decode_num_drafts - b.spec_decode_num_drafts;
  const uint64_t drafted = a.spec_decode_num_draft_tokens - b.spec_decode_num_draft_tokens;
  const uint64_t accepted = a.spec_decode_num_accepted_tokens - b.spec_decode_num_accepted_tokens;
  auto share = [](uint64_t part, uint64_t whole) {
    return whole ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
  };
  char line[256];
  std::snprintf(line, sizeof line,
                "spec decode: drafts %llu, draft tokens %llu, accepted %llu (%.1f%%), acceptance length %.2f, "
                "per position",
                static_cast<unsigned long long>(drafts), static_cast<unsigned long long>(drafted),
                static_cast<unsigned long long>(accepted), 100 * share(accepted, drafted),
                drafts ? 1 + share(accepted, drafts) : 0.0);
  std::string out = line;
  for (int i = 0; i < a.num_speculative_tokens && i < engine::kMaxSpeculativeTokens; ++i) {
    const uint64_t at = a.spec_decode_num_accepted_tokens_per_pos[i] - b.spec_decode_num_accepted_tokens_per_pos[i];
    std::snprintf(line, sizeof line, "%s%.2f", i ? "/" : " ", share(at, drafts));
    out += line;
  }
  return out;
}

int MeasureSpeculativeDecode(const SpeculativeDecodeOptions& o) {
  auto off_engine = MakeEngine(o, false);
  if (!off_engine.ok()) return std::printf("  speculative decoding: %s\n", off_engine.status().message().c_str()), 1;
  auto on_engine = MakeEngine(o, true);
  if (!on_engine.ok()) return std::printf("  speculative decoding: %s\n", on_engine.status().message().c_str()), 1;
  std::mt19937 rng(static_cast<uint32_t>(o.seed));
  std::uniform_int_distribution<int32_t> token(2, static_cast<int32_t>((*off_engine)->info().vocab_size - 1));
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(o.batch));
  for (auto& p : prompts) {
    p.resize(static_cast<size_t>(o.context));
    for (int32_t& t : p) t = token(rng);
  }
  const int rounds = std::max(o.rounds, 1);
  const std::string load_before = LoadAverageText();
  // The synthetic drafter's recording comes from a first pass, and each engine runs a warm-up pass; then
  // each round runs both back to back, off first in even rounds and on first in odd ones, so that a
  // shared machine's load swings reach both alike, and the speed-up is the median of the rounds' own
  // ratios (a pair of passes a moment apart sees nearly the same load; separate medians of each side
  // need not come from the same moment).
  if (o.config.method == engine::DraftMethod::kSynthetic) Decode(**on_engine, prompts, o.tokens);
  Decode(**off_engine, prompts, o.tokens);
  Decode(**on_engine, prompts, o.tokens);
  DecodeRun off, on;
  std::vector<double> off_seconds, on_seconds, ratios, cpu_ratios;
  for (int round = 0; round < rounds; ++round) {
    DecodeRun a, b;
    if (round % 2 == 0) {
      a = Decode(**off_engine, prompts, o.tokens);
      b = Decode(**on_engine, prompts, o.tokens);
    } else {
      b = Decode(**on_engine, prompts, o.tokens);
      a = Decode(**off_engine, prompts, o.tokens);
    }
    if (!a.status.ok() || !b.status.ok()) {
      off = std::move(a), on = std::move(b);
      break;
    }
    off_seconds.push_back(a.seconds);
    on_seconds.push_back(b.seconds);
    if (b.seconds > 0) ratios.push_back(a.seconds / b.seconds);
    if (b.cpu_seconds > 0) cpu_ratios.push_back(a.cpu_seconds / b.cpu_seconds);
    const bool equal = a.ids == b.ids;
    off = std::move(a), on = std::move(b);
    if (!equal) break;
  }
  if (!off.status.ok() || !on.status.ok())
    return std::printf("  speculative decoding: %s\n", (off.status.ok() ? on.status : off.status).ToString().c_str()),
           1;
  if (on.ids != off.ids) {
    std::printf("    FAILED: the outputs with speculation differ from those without\n");
    return 1;
  }
  const double streams = static_cast<double>(o.batch);
  const double per_stream = static_cast<double>(o.tokens - 1);
  auto tps = [&](const std::vector<double>& seconds) {
    const double s = Quantile(seconds, 0.5);
    return s > 0 ? per_stream / s : 0.0;
  };
  const double off_tps = tps(off_seconds), on_tps = tps(on_seconds);
  const double speedup = Quantile(ratios, 0.5);
  std::printf("  speculative decoding %s K=%d, batch %d, context %lld, %lld tokens per stream (greedy; a warm-up pass "
              "each, then %d rounds of both back to back, alternating which goes first):\n",
              std::string(engine::DraftMethodName(o.config.method)).c_str(), o.config.num_speculative_tokens, o.batch,
              static_cast<long long>(o.context), static_cast<long long>(o.tokens), rounds);
  std::printf("    off %.2f tok/s per stream (%.2f total), on %.2f tok/s per stream (%.2f total) (median rounds)\n",
              off_tps, off_tps * streams, on_tps, on_tps * streams);
  std::printf("    speed-up %.2fx (median of the rounds' on/off ratios; quartiles %.2f-%.2fx, range %.2f-%.2fx)\n",
              speedup, Quantile(ratios, 0.25), Quantile(ratios, 0.75), Quantile(ratios, 0.0), Quantile(ratios, 1.0));
  std::printf("    in CPU time %.2fx (median of the rounds' ratios of this process's CPU time; quartiles %.2f-%.2fx)\n",
              Quantile(cpu_ratios, 0.5), Quantile(cpu_ratios, 0.25), Quantile(cpu_ratios, 0.75));
  // The forward time of a step (decode steps dominate; the prompt's one step is in both).
  auto step_ms = [](const DecodeRun& r) {
    const double steps = static_cast<double>(r.after.steps - r.before.steps);
    return steps > 0 ? 1e3 * (r.after.forward_seconds - r.before.forward_seconds) / steps : 0.0;
  };
  std::printf("    forward time per step (last round): off %.2f ms, on %.2f ms (a verify step costs %.2fx a decode step)\n",
              step_ms(off), step_ms(on), step_ms(off) > 0 ? step_ms(on) / step_ms(off) : 0.0);
  std::printf("    %s\n", SpeculativeSummary(on.before, on.after).c_str());
  std::printf("    load average before %s, after %s\n", load_before.c_str(), LoadAverageText().c_str());
  if (speedup > o.config.num_speculative_tokens + 1.0) {
    std::printf("    FAILED: a speed-up beyond K + 1 is impossible (the measurement is broken)\n");
    return 1;
  }
  std::printf("    outputs equal speculation off (%d x %lld tokens, every round)\n", o.batch,
              static_cast<long long>(o.tokens));
  std::fflush(stdout);
  return 0;
}

Result<std::vector<int>> ParseConcurrencyList(const std::string& text) {
  std::vector<int> list;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    char* end = nullptr;
    const long n = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || n < 1 || n > 256 || list.size() >= 16)
      return Status::InvalidArgument("takes up to 16 comma-separated concurrencies in [1, 256] (got '" +
                                     item.substr(0, 16) + "')");
    list.push_back(static_cast<int>(n));
    at = comma + 1;
  }
  return list;
}

namespace {

// One row of the sweep: `streams` streams (the engines' max_num_seqs) of the prompts, `in_flight` at a time
// (0: all at once, timed from the last stream's first token), on speculation off, every fixed K and the
// scheduled configuration; tok/s per stream is `tokens_per_stream` over the round's time.
struct SweepRow {
  std::string label;
  int streams = 1;
  std::vector<std::vector<int32_t>> prompts;
  int64_t tokens = 0;
  size_t in_flight = 0;
  bool prefix_caching = true;
  double tokens_per_stream = 0;
};

int RunSweepRow(const SpeculativeDecodeOptions& o, SweepRow& row, uint32_t seed) {
  const int top_k = o.config.num_speculative_tokens;
  const int rounds = std::max(o.rounds, 1);
  SpeculativeDecodeOptions run_options = o;
  run_options.batch = row.streams;
  std::mt19937 rng(seed);
  // The configurations: speculation off, every fixed K, and the scheduled configuration.
  std::vector<engine::SpeculativeConfig> configs(1);
  for (int k = 1; k <= top_k; ++k) {
    engine::SpeculativeConfig fixed = o.config;
    fixed.num_speculative_tokens = k;
    fixed.scheduled_verification = false;
    if (!fixed.synthetic_acceptance_rates.empty()) fixed.synthetic_acceptance_rates.resize(static_cast<size_t>(k));
    configs.push_back(fixed);
  }
  if (o.config.scheduled_verification) configs.push_back(o.config);
  auto failed = [&](size_t i, const Status& st) {
    const std::string what = i == 0 ? "off" : i <= static_cast<size_t>(top_k) ? "K=" + std::to_string(i) : "scheduled";
    std::printf("    FAILED (%s, %s): %s\n", row.label.c_str(), what.c_str(), st.message().c_str());
    return 1;
  };
  // Every engine lives through the whole row, so that the rounds can alternate them (a shared machine's
  // load then slows each configuration alike); the first warm-up pass records the synthetic drafter's
  // future, the second lets a scheduled configuration measure its budgets.
  std::vector<std::unique_ptr<engine::Engine>> engines;
  std::vector<std::vector<double>> seconds(configs.size()), cpu_seconds(configs.size());
  std::vector<DecodeRun> last(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    run_options.config = configs[i];
    auto e = MakeEngine(run_options, i > 0, row.prefix_caching);
    if (!e.ok()) return failed(i, e.status());
    engines.push_back(std::move(e).value());
    for (auto& p : row.prompts) {
      if (!p.empty()) continue;  // random prompts of the length asked
      std::uniform_int_distribution<int32_t> token(2, static_cast<int32_t>(engines[0]->info().vocab_size - 1));
      p.resize(static_cast<size_t>(o.context));
      for (int32_t& t : p) t = token(rng);
    }
    for (int pass = 0; pass < kWarmUpPasses; ++pass) {
      DecodeRun r = Decode(*engines[i], row.prompts, row.tokens, row.in_flight);
      if (!r.status.ok()) return failed(i, r.status);
    }
  }
  auto check = [&](size_t i, const DecodeRun& r) -> Status {
    DI_RETURN_IF_ERROR(r.status);
    for (const auto& ids : r.ids) {
      if (static_cast<int64_t>(ids.size()) != row.tokens)
        return Status::Internal("a stream has " + std::to_string(ids.size()) + " tokens, not " + std::to_string(row.tokens));
    }
    if (i > 0 && r.ids != last[0].ids) return Status::Internal("outputs differ from speculation off");
    return Status::Ok();
  };
  engine::EngineStats sched_before;
  if (o.config.scheduled_verification) sched_before = engines.back()->Stats();
  // Each round runs off and the scheduled configuration back to back (off first in even rounds, the
  // reference for the checks, second in odd ones), then the fixed K from a rotating start; the scheduled
  // run's speed against off is the median of the rounds' own ratios, two passes a moment apart.
  const size_t scheduled = o.config.scheduled_verification ? configs.size() - 1 : 0;
  std::vector<size_t> order;
  for (int round = 0; round < rounds; ++round) {
    order.clear();
    order.push_back(0);
    if (scheduled) order.insert(round % 2 ? order.begin() : order.end(), scheduled);
    for (int n = 0; n < top_k; ++n) order.push_back(1 + static_cast<size_t>((n + round) % top_k));
    for (size_t i : order) {
      DecodeRun r = Decode(*engines[i], row.prompts, row.tokens, row.in_flight);
      if (Status st = check(i, r); !st.ok()) return failed(i, st);
      seconds[i].push_back(r.seconds);
      cpu_seconds[i].push_back(r.cpu_seconds);
      last[i] = std::move(r);
    }
  }
  // Tokens/s per stream of each configuration: its median round, and its slowest and fastest.
  auto tps = [&](size_t i, double q) {
    const double sec = Quantile(seconds[i], q);
    return sec > 0 ? row.tokens_per_stream / sec : 0.0;
  };
  const double off_tps = tps(0, 0.5);
  // The median over the rounds of off's CPU time over configuration i's, in the same round.
  auto cpu_speedup = [&](size_t i) {
    std::vector<double> ratios;
    for (size_t r = 0; r < cpu_seconds[i].size(); ++r) {
      if (cpu_seconds[i][r] > 0) ratios.push_back(cpu_seconds[0][r] / cpu_seconds[i][r]);
    }
    return Quantile(ratios, 0.5);
  };
  // A speed-up beyond K + 1 is impossible; judged in CPU time (wall time swings with a shared machine's
  // load), with a quarter of slack.
  for (size_t i = 1; i < configs.size(); ++i) {
    if (cpu_speedup(i) > 1.25 * (configs[i].num_speculative_tokens + 1.0))
      return failed(i, Status::Internal("a speed-up beyond K + 1 is impossible (the measurement is broken)"));
  }
  std::printf("  %5s %12.2f %12.2f", row.label.c_str(), off_tps, off_tps * row.streams);
  double best = off_tps;
  int best_k = 0;
  for (int k = 1; k <= top_k; ++k) {
    const double v = tps(static_cast<size_t>(k), 0.5);
    std::printf("  %12.2f", v);
    if (v > best) best = v, best_k = k;
  }
  // The best by CPU time (on a shared machine, wall time's ranking of close configurations is the load's).
  size_t best_cpu = 0;
  for (size_t k = 1; k <= static_cast<size_t>(top_k); ++k) {
    if (Quantile(cpu_seconds[k], 0.5) < Quantile(cpu_seconds[best_cpu], 0.5)) best_cpu = k;
  }
  if (scheduled) {
    const size_t i = scheduled;
    const double v = tps(i, 0.5);
    const engine::EngineStats after = engines.back()->Stats();
    // Per round: off's time over the scheduled run's, and the best configuration's (by median) over it.
    // The same in CPU time.
    std::vector<double> vs_off, vs_best, cpu_vs_off, cpu_vs_best;
    const auto b = static_cast<size_t>(best_k);
    for (size_t r = 0; r < seconds[i].size(); ++r) {
      if (seconds[i][r] > 0) vs_off.push_back(seconds[0][r] / seconds[i][r]), vs_best.push_back(seconds[b][r] / seconds[i][r]);
      if (cpu_seconds[i][r] > 0)
        cpu_vs_off.push_back(cpu_seconds[0][r] / cpu_seconds[i][r]),
            cpu_vs_best.push_back(cpu_seconds[best_cpu][r] / cpu_seconds[i][r]);
    }
    std::printf(" %12.2f %7.3fx %7.3fx %7.3fx %7.3fx %+4.0f/%+.0f%% %llu/%llu", v, Quantile(vs_off, 0.5),
                Quantile(vs_best, 0.5), Quantile(cpu_vs_off, 0.5), Quantile(cpu_vs_best, 0.5), 100 * (tps(i, 0.0) / v - 1), 100 * (tps(i, 1.0) / v - 1),
                static_cast<unsigned long long>(after.spec_decode_scheduled_steps - sched_before.spec_decode_scheduled_steps),
                static_cast<unsigned long long>(after.steps - sched_before.steps));
  }
  auto name = [](size_t k) { return k ? "K=" + std::to_string(k) : std::string("off"); };
  std::printf("   best fixed: %s (in CPU time %s), load %s\n", name(static_cast<size_t>(best_k)).c_str(),
              name(best_cpu).c_str(), LoadAverageText().c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int SweepSpeculativeDecode(const SpeculativeDecodeOptions& o, const std::vector<int>& concurrency, int prefill_mix) {
  const int top_k = o.config.num_speculative_tokens;
  const int rounds = std::max(o.rounds, 1);
  std::printf("  speculative decoding sweep: %s up to K=%d%s, context %lld, %lld tokens per stream (greedy; %d warm-up "
              "passes, then %d rounds alternating the engines; tok/s: the median round; vs off / vs best: the median "
              "of the rounds' own ratios, in wall time and in this process's CPU time, against the best in each)\n",
              std::string(engine::DraftMethodName(o.config.method)).c_str(), top_k,
              o.config.scheduled_verification ? ", scheduled" : "", static_cast<long long>(o.context),
              static_cast<long long>(o.tokens), kWarmUpPasses, rounds);
  if (prefill_mix > 0)
    std::printf("  mixN: the prefill-heavy mix: %d requests of %lld-token prompts and %lld output tokens, N at a time "
                "(each next one added as one finishes; prefix caching off), timed from the first submission\n",
                kPrefillMixRequestsPerStream * prefill_mix, static_cast<long long>(kPrefillMixPromptTokens),
                static_cast<long long>(kPrefillMixOutputTokens));
  std::printf("  %5s %12s %12s", "conc", "off tok/s/u", "off total");
  for (int k = 1; k <= top_k; ++k) std::printf("  K=%-2d tok/s/u", k);
  if (o.config.scheduled_verification) std::printf(" %12s %8s %8s %8s %8s %8s %s", "sched tok/s/u", "vs off", "vs best", "cpu off", "cpu best", "spread", "trimmed");
  std::printf("\n");
  for (int c : concurrency) {
    SweepRow row{.label = std::to_string(c),
                 .streams = c,
                 .prompts = std::vector<std::vector<int32_t>>(static_cast<size_t>(c)),
                 .tokens = o.tokens,
                 .tokens_per_stream = static_cast<double>(o.tokens - 1)};
    if (int rc = RunSweepRow(o, row, static_cast<uint32_t>(o.seed) + static_cast<uint32_t>(c))) return rc;
  }
  if (prefill_mix > 0) {
    const int requests = kPrefillMixRequestsPerStream * prefill_mix;
    SpeculativeDecodeOptions mix = o;
    mix.context = kPrefillMixPromptTokens;
    SweepRow row{.label = "mix" + std::to_string(prefill_mix),
                 .streams = prefill_mix,
                 .prompts = std::vector<std::vector<int32_t>>(static_cast<size_t>(requests)),
                 .tokens = kPrefillMixOutputTokens,
                 .in_flight = static_cast<size_t>(prefill_mix),
                 .prefix_caching = false,
                 .tokens_per_stream = static_cast<double>(kPrefillMixOutputTokens * requests) / prefill_mix};
    if (int rc = RunSweepRow(mix, row, static_cast<uint32_t>(o.seed) + 7919u)) return rc;
  }
  std::printf("  outputs of every run equal speculation off's\n");
  std::fflush(stdout);
  return 0;
}

}  // namespace deepinfer::bench
