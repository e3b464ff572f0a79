// deepinfer generate: requests through the whole pipeline on the engine, without a server. A protocol
// request (from --prompt, --request or each line of --requests) goes through the request pipeline that
// `deepinfer serve` uses (src/pipeline: parsed, rendered, tokenized, its parameters set), is generated
// under continuous batching, and its output becomes the protocol's response body (or SSE stream); raw
// token ids (--prompt-ids) skip the codec and print the generated ids, text and logprobs as JSON.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/recipe_flags.h"
#include "core/clock.h"
#include "core/hf_config.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "core/utf8.h"
#include "engine/engine.h"
#include "model/causal_lm.h"
#include "parallel/unit.h"
#include "pipeline/default_model.h"
#include "pipeline/prepare.h"
#include "pipeline/sse.h"
#include "pipeline/update_translator.h"
#include "recipe/request.h"
#include "recipe/stream_events.h"
#include "sampling/constraint_masks.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kGenerateUsage =
    "usage: deepinfer generate --model DIR (--prompt TEXT | --request FILE|- | --requests FILE.jsonl |\n"
    "                          --prompt-ids IDS...) [options]\n\n"
    "Runs requests through the whole pipeline on the engine, without a server. Protocol requests are parsed,\n"
    "rendered into the DeepSeek prompt, tokenized, generated under continuous batching and printed as the\n"
    "protocol's response body (or its SSE stream with --stream). --requests runs every line of a JSONL file\n"
    "together and prints one response body per line, in input order (an invalid line prints the protocol's\n"
    "error body on its line). --prompt-ids takes comma-separated token ids (repeat it for several prompts)\n"
    "and prints {prompt_tokens, prompt_cache_hit_tokens, seed, outputs: [{token_ids, text, finish_reason,\n"
    "logprobs}]} per prompt, for any model whatever its tokenizer.\n"
    "Sampling follows each request; the flags below are the defaults for what a request leaves unset (the\n"
    "protocols default to temperature 1, and thinking mode forces it, as deepseek-recipe does; --prompt puts a\n"
    "given --temperature / --top-p into its request; --prompt-ids is greedy unless --temperature says\n"
    "otherwise). Runs are reproducible: requests without a seed use --seed.\n\n"
    "  --model DIR                    Hugging Face checkpoint directory (config.json, safetensors, tokenizer.json)\n"
    "  --prompt TEXT                  a single user message (Chat Completions request)\n"
    "  --request FILE|-               the request body as JSON\n"
    "  --requests FILE.jsonl          one request body per line, run together\n"
    "  --prompt-ids IDS               comma-separated token ids (repeatable)\n"
    "  --protocol chat|responses|messages    the requests' API (default chat; anthropic = messages)\n"
    "  --model-version v3.2|v4|v4.1   prompt encoding (default: from config.json's model_type, as serve)\n"
    "  --no-thinking                  with --prompt: chat mode instead of thinking mode\n"
    "  --stream                       print the SSE event stream as tokens are generated (one request)\n"
    "  --tokenizer PATH               tokenizer.json (default: DIR/tokenizer.json)\n"
    "sampling defaults:\n"
    "  --max-tokens N                 generation limit (default 64)\n"
    "  --temperature T (0)  --top-p P (1)  --top-k K (0: off)  --min-p P (0)\n"
    "  --repetition-penalty R (1)  --presence-penalty P (0)  --frequency-penalty F (0)\n"
    "  --seed N                       seed of requests without one (default 0); 'random' draws one per request\n"
    "  --logprobs K                   report each token's logprob and K alternatives (0..20)\n"
    "  --n N                          outputs per prompt (--prompt-ids)\n"
    "  --stop TEXT                    stop string (--prompt-ids; repeatable)\n"
    "  --stop-id ID                   stop token id (--prompt-ids; repeatable)\n"
    "  --ignore-eos                   keep generating after end-of-sequence tokens\n"
    "engine:\n"
    "  --precision exact|bf16         matrix-product arithmetic (default exact; bf16 rounds activations)\n"
    "  --prefill-chunk N              prompt tokens per step and sequence (default 512)\n"
    "  --max-num-seqs N               sequences running at once (default 64)\n"
    "  --max-num-batched-tokens N     tokens per step (default 2048)\n"
    "  --kv-cache-memory-bytes N      bytes of KV block pools (default 1 GiB; --kv-cache-mib N: in MiB)\n"
    "  --tbt-target-ms MS|auto        size prefill chunks to keep steps within this time (auto: 1.5 x the\n"
    "                                 calibrated decode step; default 0: fixed --prefill-chunk chunks)\n"
    "  --window-ttl-s S               cached window state also expires S seconds after its last use\n"
    "                                 (default 0: kept until the KV budget needs the room)\n"
    "  --no-prefix-cache              never reuse cached prefix blocks\n"
    "  --swa-replay exact|bounded     prefix hits without window blocks (default exact for DeepSeek-V4,\n"
    "                                 bounded for V4.1)\n"
    "  --speculative-config JSON      speculative decoding, e.g. '{\"method\": \"ngram\", \"num_speculative_tokens\": 3}'\n"
    "                                 (ngram, suffix, synthetic, mtp, dspark; outputs equal speculation off)\n"
    "parallel (under `mpirun -n N`; docs/parallel.md):\n"
    "  --data-parallel-size N         ranks of the unit (default: as many as mpirun started); requests are\n"
    "                                 spread over them round robin, rank 0 prints every output in input order\n"
    "  --enable-expert-parallel       shard the routed experts over the ranks (each loads only its own) and\n"
    "                                 exchange tokens at every MoE layer; outputs are bit-identical to one process\n"
    "  --ep-timeout-s S               the least time a rank waits for the others in a collective before it ends\n"
    "                                 the unit naming the rank it waited for (default 1)\n"
    "  --enable-eplb                  balance the experts' load over the ranks (with --enable-expert-parallel):\n"
    "                                 every --eplb-step-interval steps (default 3000) DeepSeek's load balancer\n"
    "                                 places them by their load over the last --eplb-window-size steps\n"
    "                                 (default 1000) and the ranks switch to it between steps; outputs stay\n"
    "                                 bit-identical\n"
    "  --num-redundant-experts R      extra expert copies the balancer places (implies --enable-eplb; the\n"
    "                                 experts plus R must be a multiple of the ranks)\n"
    "  --ep-stats                     each rank prints its expert exchanges, bytes sent and time spent (against\n"
    "                                 memcpy of the same bytes) and where it waited per layer, rank 0 the unit's\n"
    "                                 expert load balance per layer\n";

struct GenerateArgs {
  std::string model_dir, prompt, request_path, requests_path, tokenizer_path;
  std::vector<std::string> prompt_ids;
  recipe::Protocol protocol = recipe::Protocol::kChatCompletions;
  recipe::ModelVersion version = recipe::ModelVersion::kV4;
  bool version_given = false;  // else config.json's model_type tells it
  // --prompt writes these into the request it builds: the protocols fill an unset temperature or top_p with 1,
  // so a default alone would never reach a --prompt request.
  bool temperature_given = false, top_p_given = false;
  bool thinking = true, stream = false;
  // Sampling defaults.
  int64_t max_tokens = 64;
  double temperature = 0, top_p = 1, min_p = 0, repetition = 1, presence = 0, frequency = 0;
  int64_t top_k = 0;
  std::optional<uint64_t> seed = 0;
  int logprobs = -1;
  int n = 1;
  std::vector<std::string> stops;
  std::vector<int32_t> stop_ids;
  bool ignore_eos = false;
  // Engine.
  model::ComputePrecision precision = model::ComputePrecision::kExact;
  int64_t prefill_chunk = 512, max_num_seqs = 64, max_batched = 2048;
  int64_t kv_cache_bytes = int64_t{1} << 30;
  double tbt_target_ms = 0;
  double window_ttl_s = 0;
  bool prefix_cache = true;
  std::optional<engine::SwaReplay> replay;  // unset: the model family's (engine::DefaultSwaReplay)
  engine::SpeculativeConfig speculative;
  parallel::UnitOptions unit;
  bool ep_stats = false;
};

Status ParseIds(const std::string& text, std::vector<int32_t>* out) {
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    if (item.empty() || item.size() > 10 || item.find_first_not_of("0123456789") != std::string::npos)
      return Status::InvalidArgument("takes comma-separated token ids (got '" + item + "')");
    const int64_t v = std::stoll(item);
    if (v > INT32_MAX) return Status::InvalidArgument("token id " + item + " is too large");
    out->push_back(static_cast<int32_t>(v));
  }
  if (out->empty()) return Status::InvalidArgument("takes at least one token id");
  if (out->size() > (size_t{1} << 22)) return Status::InvalidArgument("at most 4194304 ids");
  return Status::Ok();
}

int ParseArgs(const std::vector<std::string>& args, GenerateArgs* out) {
  Flags flags("generate");
  flags.Path("--model", &out->model_dir).Required();
  flags.String("--prompt", &out->prompt);
  flags.Path("--request", &out->request_path);
  flags.Path("--requests", &out->requests_path);
  flags.Strings("--prompt-ids", &out->prompt_ids);
  flags.Path("--tokenizer", &out->tokenizer_path);
  flags.Switch("--stream", &out->stream);
  flags.Switch("--no-thinking", &out->thinking, false);
  AddProtocolFlag(flags, &out->protocol);
  AddModelVersionFlag(flags, &out->version);
  flags.Int<int64_t>("--max-tokens", &out->max_tokens, 1, 1 << 24);
  flags.Double("--temperature", &out->temperature, 0, sampling::kMaxTemperature);
  flags.Double("--top-p", &out->top_p, 1e-9, 1);
  flags.Int<int64_t>("--top-k", &out->top_k, -1, INT32_MAX);
  flags.Double("--min-p", &out->min_p, 0, 1);
  flags.Double("--repetition-penalty", &out->repetition, 1e-6, 100);
  flags.Double("--presence-penalty", &out->presence, -2, 2);
  flags.Double("--frequency-penalty", &out->frequency, -2, 2);
  flags.Custom("--seed", "N", [out](const std::string& v) {
    if (v == "random") {
      out->seed.reset();
      return Status::Ok();
    }
    if (v.empty() || v.size() > 20 || v.find_first_not_of("0123456789") != std::string::npos)
      return Status::InvalidArgument("takes a non-negative integer (got '" + v + "')");
    uint64_t seed = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), seed);
    if (ec != std::errc() || end != v.data() + v.size())
      return Status::InvalidArgument("takes an integer below 2^64 (got '" + v + "')");
    out->seed = seed;
    return Status::Ok();
  });
  flags.Int<int>("--logprobs", &out->logprobs, 0, sampling::kMaxTopLogprobs);
  flags.Int<int>("--n", &out->n, 1, sampling::kMaxN);
  flags.Strings("--stop", &out->stops);
  flags.Custom("--stop-id", "ID", [out](const std::string& v) {
    std::vector<int32_t> ids;
    DI_RETURN_IF_ERROR(ParseIds(v, &ids));
    out->stop_ids.insert(out->stop_ids.end(), ids.begin(), ids.end());
    return Status::Ok();
  });
  flags.Switch("--ignore-eos", &out->ignore_eos);
  flags.Choice("--precision", &out->precision,
               {{"exact", model::ComputePrecision::kExact}, {"bf16", model::ComputePrecision::kBf16Activations}});
  flags.Int<int64_t>("--prefill-chunk", &out->prefill_chunk, 1, 1 << 20);
  flags.Int<int64_t>("--max-num-seqs", &out->max_num_seqs, 1, 4096);
  flags.Int<int64_t>("--max-num-batched-tokens", &out->max_batched, 1, 1 << 20);
  flags.Int<int64_t>("--kv-cache-memory-bytes", &out->kv_cache_bytes, int64_t{1} << 20, int64_t{1} << 44);
  int64_t kv_cache_mib = 0;  // the older spelling, in MiB
  flags.Int<int64_t>("--kv-cache-mib", &kv_cache_mib, 1, int64_t{1} << 24);
  engine::SwaReplay replay = engine::SwaReplay::kExact;
  flags.DoubleOr("--tbt-target-ms", &out->tbt_target_ms, 0, 1e6, "auto", engine::kDerivedTbtTarget);
  flags.Double("--window-ttl-s", &out->window_ttl_s, 0, 86400.0 * 365);
  flags.Switch("--no-prefix-cache", &out->prefix_cache, false);
  flags.Choice("--swa-replay", &replay, {{"exact", engine::SwaReplay::kExact}, {"bounded", engine::SwaReplay::kBounded}});
  flags.Custom("--speculative-config", "JSON", [out](const std::string& v) {
    DI_ASSIGN_OR_RETURN(out->speculative, engine::ParseSpeculativeConfig(v));
    return Status::Ok();
  });
  flags.Int<int>("--data-parallel-size", &out->unit.data_parallel_size, 1, 1 << 16);
  flags.Switch("--enable-expert-parallel", &out->unit.expert_parallel);
  flags.Double("--ep-timeout-s", &out->unit.timeouts.exchange_floor_s, 0.05, 3600);
  flags.Switch("--ep-stats", &out->ep_stats);
  flags.Switch("--enable-eplb", &out->unit.eplb.enabled);
  flags.Int<int64_t>("--num-redundant-experts", &out->unit.eplb.redundant_experts, 0,
                     parallel::EplbLimits::kMaxReplicas);
  flags.Int<int64_t>("--eplb-window-size", &out->unit.eplb.window_steps, 1, parallel::EplbOptions::kMaxSteps);
  flags.Int<int64_t>("--eplb-step-interval", &out->unit.eplb.step_interval, 1, parallel::EplbOptions::kMaxSteps);
  if (int rc = flags.Parse(args)) return rc;
  out->version_given = flags.given("--model-version");
  out->temperature_given = flags.given("--temperature");
  out->top_p_given = flags.given("--top-p");
  if (flags.given("--kv-cache-mib")) out->kv_cache_bytes = kv_cache_mib << 20;
  if (flags.given("--swa-replay")) out->replay = replay;
  const int sources = !out->prompt.empty() + !out->request_path.empty() + !out->requests_path.empty() +
                      !out->prompt_ids.empty();
  if (sources != 1) return UsageError("generate", "give exactly one of --prompt, --request, --requests and --prompt-ids");
  if (!out->prompt.empty() && out->protocol != recipe::Protocol::kChatCompletions)
    return UsageError("generate", "--prompt builds a Chat Completions request; use --request for other protocols");
  if (out->stream && (!out->requests_path.empty() || !out->prompt_ids.empty()))
    return UsageError("generate", "--stream prints one request's events; not with --requests or --prompt-ids");
  if (out->n > 1 && out->prompt_ids.empty()) return UsageError("generate", "--n is for --prompt-ids (requests say n)");
  return 0;
}

sampling::SamplingParams DefaultSampling(const GenerateArgs& a) {
  sampling::SamplingParams p;
  p.max_tokens = a.max_tokens;
  p.temperature = a.temperature;
  p.top_p = a.top_p;
  p.top_k = a.top_k;
  p.min_p = a.min_p;
  p.repetition_penalty = a.repetition;
  p.presence_penalty = a.presence;
  p.frequency_penalty = a.frequency;
  p.seed = a.seed;
  p.logprobs = a.logprobs >= 0;
  p.top_logprobs = std::max(a.logprobs, 0);
  p.ignore_eos = a.ignore_eos;
  return p;
}

// A progress line on stderr for files, when stderr is a terminal.
class Progress {
 public:
  explicit Progress(size_t total) : total_(total), enabled_(total > 1 && isatty(STDERR_FILENO)) {}
  void Done() {
    const size_t done = ++done_;
    if (!enabled_) return;
    std::lock_guard<std::mutex> lock(mu_);
    std::fprintf(stderr, "\rgenerate: %zu/%zu requests, %.1fs", done, total_, watch_.ElapsedSeconds());
    if (done == total_) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  size_t total_;
  bool enabled_;
  std::atomic<size_t> done_{0};
  std::mutex mu_;
  Stopwatch watch_;
};

// One protocol request: parsed, then its updates through the pipeline's translator as the engine delivers
// them (on the engine's output thread, one at a time per request).
struct ProtocolJob {
  std::string error_body;  // the line's answer when it could not run
  std::unique_ptr<pipeline::UpdateTranslator> translator;
  std::string body;
  bool print_events = false;
};

void PrintEvents(const std::vector<recipe::StreamEvent>& events) {
  if (events.empty()) return;
  const std::string text = pipeline::FormatSse(events);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

void OnProtocolUpdate(ProtocolJob& job, const engine::RequestUpdate& u, engine::Engine& engine) {
  pipeline::TranslatedUpdate translated = job.translator->Translate(u);
  if (job.print_events) PrintEvents(translated.events);
  if (translated.stop_engine) engine.Abort(u.id);
  if (u.finished) {
    if (job.print_events) PrintEvents(job.translator->StreamEnd());
    else job.body = job.translator->Body();
  }
}

Result<std::string> ReadBody(const std::string& path) {
  if (path == "-") return ReadStdinToString();
  return ReadFileToString(path);
}

struct Loaded {
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<engine::Engine> engine;
  // Grammars compile through it both to check a request and in the engine: once.
  std::shared_ptr<sampling::ConstraintCompiler> constraint_compiler;
};

// The engine flags every rank of a unit must agree on (ExpertGroup::CheckSameModel).
std::string UnitSettings(const GenerateArgs& a) {
  return std::string(DEEPINFER_VERSION) + " precision=" + std::to_string(static_cast<int>(a.precision)) +
         " ep=" + std::to_string(a.unit.expert_parallel) + " eplb=" + parallel::EplbSettings(a.unit.eplb) +
         " chunk=" + std::to_string(a.prefill_chunk) +
         " seqs=" + std::to_string(a.max_num_seqs) + " batched=" + std::to_string(a.max_batched);
}

Result<Loaded> LoadEngine(const GenerateArgs& args, bool need_tokenizer, parallel::Unit& unit) {
  Loaded out;
  const std::string tokenizer_path = args.tokenizer_path.empty()
                                         ? (std::filesystem::path(args.model_dir) / "tokenizer.json").string()
                                         : args.tokenizer_path;
  if (need_tokenizer || !args.tokenizer_path.empty() || std::filesystem::exists(tokenizer_path)) {
    auto t = tokenizer::Tokenizer::FromFile(tokenizer_path);
    if (!t.ok()) return t.status();
    out.tokenizer = std::make_unique<tokenizer::Tokenizer>(std::move(t).value());
  }
  model::LoadOptions load;
  load.precision = args.precision;
  load.progress = model::TerminalProgressBar("loading " + args.model_dir);
  load.drafting = args.speculative.uses_draft_layers();
  load.expert_exchange = unit.expert_exchange();
  auto model = model::LoadCausalLM(args.model_dir, load);
  if (!model.ok() && load.drafting)
    return Status::InvalidArgument("--speculative-config method \"" +
                                   std::string(engine::DraftMethodName(args.speculative.method)) +
                                   "\" needs the model's draft layers: " + model.status().message());
  if (!model.ok()) return model.status();
  if (unit.group() != nullptr)
    DI_RETURN_IF_ERROR(unit.group()->CheckSameModel((*model)->info().weights_fingerprint, UnitSettings(args)));
  if (out.tokenizer && need_tokenizer &&
      (*model)->info().vocab_size < static_cast<int64_t>(out.tokenizer->vocab_size()))
    return Status::InvalidArgument("the model's vocabulary (" + std::to_string((*model)->info().vocab_size) +
                                   ") is smaller than the tokenizer's (" +
                                   std::to_string(out.tokenizer->vocab_size()) + ")");
  if (out.tokenizer && static_cast<int64_t>(out.tokenizer->vocab_size()) > (*model)->info().vocab_size)
    out.tokenizer.reset();  // another model's tokenizer: ids only
  engine::EngineOptions eo;
  eo.kv_cache_bytes = args.kv_cache_bytes;
  eo.max_num_seqs = args.max_num_seqs;
  eo.max_num_batched_tokens = args.max_batched;
  eo.prefill_chunk = args.prefill_chunk;
  eo.tbt_target_ms = args.tbt_target_ms;
  eo.window_ttl_s = args.window_ttl_s;
  eo.enable_prefix_caching = args.prefix_cache;
  eo.swa_replay = args.replay.value_or(engine::DefaultSwaReplay((*model)->info().architecture));
  eo.speculative = args.speculative;
  eo.tokenizer = out.tokenizer.get();
  if (out.tokenizer) out.constraint_compiler = std::make_shared<sampling::ConstraintCompiler>(out.tokenizer.get());
  eo.constraint_compiler = out.constraint_compiler;
  eo.compute_precision = args.precision;
  eo.max_waiting = INT32_MAX;
  eo.step_group = unit.step_group();
  auto e = engine::Engine::Create(std::move(model).value(), eo);
  if (!e.ok()) return e.status();
  out.engine = std::move(e).value();
  return out;
}

// What one job prints: its stdout line (without the newline), its stderr text, and whether it failed.
struct PrintedJob {
  std::string out, err;
  bool failed = false;
};

// The balance the load balancer's placements gave since the first was swapped in (the pairs each rank
// computed) against the static shard's over the same steps (the same pairs, expert e on rank e / (experts /
// ranks)), per layer: max/mean over the ranks of the pairs summed over those steps.
void PrintPlacedBalance(const parallel::ExpertGroup::SinceSwap& since, int64_t rebalances, int64_t skipped) {
  const int64_t ranks = since.ranks, per = since.experts / since.ranks;
  std::string placed_line, static_line;
  double placed_sum = 0, static_sum = 0;
  for (int64_t l = 0; l < since.layers; ++l) {
    std::vector<double> placed(static_cast<size_t>(ranks)), fixed(static_cast<size_t>(ranks));
    for (int64_t r = 0; r < ranks; ++r) placed[r] = static_cast<double>(since.rank_rows[l * ranks + r]);
    for (int64_t e = 0; e < since.experts; ++e)
      fixed[std::min(e / per, ranks - 1)] += static_cast<double>(since.expert_rows[l * since.experts + e]);
    const double a = parallel::BalanceRatio(placed), b = parallel::BalanceRatio(fixed);
    placed_sum += a;
    static_sum += b;
    char figure[32];
    std::snprintf(figure, sizeof(figure), " %.3f", a);
    placed_line += figure;
    std::snprintf(figure, sizeof(figure), " %.3f", b);
    static_line += figure;
  }
  const double layers = static_cast<double>(since.layers);
  std::fprintf(stderr,
               "generate: expert balance since the first rebalance (%lld applied, %lld skipped as no better; max/mean "
               "over ranks per layer): placed%s (mean %.3f), static shard%s (mean %.3f)\n",
               static_cast<long long>(rebalances), static_cast<long long>(skipped), placed_line.c_str(), placed_sum / layers, static_line.c_str(),
               static_sum / layers);
}

// Every rank's printed jobs on rank 0, keyed by job index. A rank of an expert-parallel unit first waits
// until every rank has finished its jobs: its engine keeps joining the others' steps until then.
Result<std::map<size_t, PrintedJob>> CollectPrinted(parallel::Unit& unit, std::map<size_t, PrintedJob> mine,
                                                    bool stats) {
  if (unit.group() == nullptr) return mine;
  if (unit.step_group() != nullptr) unit.group()->FinishAndWait();
  if (stats) {
    const parallel::ExpertGroup::Counters c = unit.group()->counters();
    std::fprintf(stderr,
                 "generate: rank %d: %lld expert exchanges over %s, %lld bytes to other ranks, %.4f s in exchanges, "
                 "%.4f s to memcpy the same bytes (ratio %.1f)\n",
                 unit.rank(), static_cast<long long>(c.exchanges), unit.group()->transport(),
                 static_cast<long long>(c.remote_bytes),
                 c.exchange_seconds, c.memcpy_seconds, c.memcpy_seconds > 0 ? c.exchange_seconds / c.memcpy_seconds : 0.0);
    // Shares of the time spent in steps with work (the first excluded: it waits for every rank's start-up).
    const double step_s = c.step_seconds > 0 ? c.step_seconds : 1;
    const double waited_agreeing_s = c.agreement_seconds - static_cast<double>(c.steps) * c.fastest_agreement_seconds;
    const double waited_exchanging_s =
        c.step_exchange_seconds - static_cast<double>(c.step_exchanges) * c.fastest_exchange_seconds;
    const double waited_s = waited_agreeing_s + waited_exchanging_s;
    std::fprintf(stderr,
                 "generate: rank %d: %lld steps in %.4f s: step agreement %.4f s (%.2f%%, fastest %.1f us), expert "
                 "exchanges %.4f s (%.2f%%, fastest %.1f us, mean %.1f us, memcpy of the same bytes mean %.2f us), "
                 "waiting beyond the fastest agreement and exchange at most %.4f s (%.2f%%)\n",
                 unit.rank(), static_cast<long long>(c.steps), c.step_seconds, c.agreement_seconds,
                 100 * c.agreement_seconds / step_s, 1e6 * c.fastest_agreement_seconds, c.step_exchange_seconds,
                 100 * c.step_exchange_seconds / step_s, 1e6 * c.fastest_exchange_seconds,
                 c.exchanges > 0 ? 1e6 * c.exchange_seconds / static_cast<double>(c.exchanges) : 0.0,
                 c.exchanges > 0 ? 1e6 * c.memcpy_seconds / static_cast<double>(c.exchanges) : 0.0, waited_s,
                 100 * waited_s / step_s);
    // Where the waiting is: per routed layer and exchange, the time beyond that exchange's fastest, per step.
    const parallel::ExpertGroup::WaitBreakdown b = unit.group()->wait_breakdown();
    constexpr int kKinds = parallel::ExpertGroup::kExchangeKinds;
    std::string layers;
    double by_kind[kKinds] = {};
    for (size_t at = 0; at < b.exchanges.size(); ++at) {
      const parallel::ExpertGroup::LayerExchange& e = b.exchanges[at];
      const double waited = e.seconds - static_cast<double>(e.count) * e.fastest_seconds;
      by_kind[at % kKinds] += waited;
      char part[48];
      std::snprintf(part, sizeof(part), "%s%.0f", at % kKinds == 0 ? " " : "/",
                    c.steps > 0 ? 1e6 * waited / static_cast<double>(c.steps) : 0.0);
      layers += part;
    }
    static_assert(kKinds == 2, "the line below names each kind");
    std::fprintf(stderr,
                 "generate: rank %d: waiting beyond each layer's fastest exchange: pairs %.2f%%, outputs %.2f%% of "
                 "step time; per layer (pairs/outputs, us per step):%s; shared expert run while waiting in %lld "
                 "layers, %.4f s\n",
                 unit.rank(), 100 * by_kind[0] / step_s, 100 * by_kind[1] / step_s, layers.c_str(),
                 static_cast<long long>(b.idle_works), b.idle_work_seconds);
  }
  nlohmann::json packed = {{"jobs", nlohmann::json::array()}};
  for (const auto& [index, job] : mine) packed["jobs"].push_back({index, job.out, job.err, job.failed});
  if (stats) {
    const parallel::ExpertLoads loads = unit.group()->RecordedLoads();
    packed["loads"] = {{"layers", loads.layers}, {"experts", loads.experts}, {"values", loads.values}};
    const parallel::ExpertGroup::SinceSwap since = unit.group()->since_swap();
    packed["since_swap"] = {{"layers", since.layers}, {"experts", since.experts}, {"rank_rows", since.rank_rows},
                            {"expert_rows", since.expert_rows}};
  }
  // In lock step every rank is here at once; ranks of data parallelism alone finish their own requests at their
  // own pace, so the first waits as long as the slowest one generates.
  const double wait_s = unit.step_group() != nullptr ? 60 : 7 * 24 * 3600.0;
  DI_ASSIGN_OR_RETURN(std::vector<std::string> all, unit.group()->GatherToRoot(packed.dump(), wait_s));
  std::map<size_t, PrintedJob> out;
  parallel::ExpertLoads unit_loads;  // the ranks' recorded loads summed
  parallel::ExpertGroup::SinceSwap unit_since;  // the ranks' pairs since the first placement swap, summed
  for (const std::string& text : all) {
    const nlohmann::json part = nlohmann::json::parse(text, nullptr, false);
    if (!part.is_object() || !part.contains("jobs") || !part["jobs"].is_array())
      return Status::Internal("a rank sent unreadable outputs");
    for (const nlohmann::json& j : part["jobs"])
      out[j.at(0).get<size_t>()] = {j.at(1).get<std::string>(), j.at(2).get<std::string>(), j.at(3).get<bool>()};
    if (part.contains("loads") && part["loads"]["layers"].get<int64_t>() > 0) {
      const nlohmann::json& l = part["loads"];
      if (unit_loads.layers == 0) unit_loads = parallel::ExpertLoads(l["layers"].get<int64_t>(), l["experts"].get<int64_t>());
      const std::vector<double> values = l["values"].get<std::vector<double>>();
      if (values.size() != unit_loads.values.size()) return Status::Internal("ranks recorded different expert layouts");
      for (size_t i = 0; i < values.size(); ++i) unit_loads.values[i] += values[i];
    }
    if (part.contains("since_swap") && part["since_swap"]["layers"].get<int64_t>() > 0) {
      const nlohmann::json& since = part["since_swap"];
      const auto rank_rows = since["rank_rows"].get<std::vector<int64_t>>();
      const auto expert_rows = since["expert_rows"].get<std::vector<int64_t>>();
      if (unit_since.layers == 0) {
        unit_since = {since["layers"].get<int64_t>(), since["experts"].get<int64_t>(), unit.size(),
                      std::vector<int64_t>(rank_rows.size(), 0), std::vector<int64_t>(expert_rows.size(), 0)};
      }
      if (rank_rows.size() != unit_since.rank_rows.size() || expert_rows.size() != unit_since.expert_rows.size())
        return Status::Internal("ranks counted different expert layouts");
      for (size_t i = 0; i < rank_rows.size(); ++i) unit_since.rank_rows[i] += rank_rows[i];
      for (size_t i = 0; i < expert_rows.size(); ++i) unit_since.expert_rows[i] += expert_rows[i];
    }
  }
  if (unit.leader() && unit_loads.layers > 0 && unit_loads.experts % unit.size() == 0) {
    // max/mean over the ranks of the routed rows each rank's experts computed, per layer.
    const int64_t per = unit_loads.experts / unit.size();
    std::string line = "generate: expert load balance per layer (max/mean over ranks, whole run):";
    for (int64_t layer = 0; layer < unit_loads.layers; ++layer) {
      double max = 0, sum = 0;
      for (int r = 0; r < unit.size(); ++r) {
        double rank_load = 0;
        for (int64_t e = r * per; e < (r + 1) * per; ++e) rank_load += unit_loads.at(layer, e);
        max = std::max(max, rank_load);
        sum += rank_load;
      }
      char figure[32];
      std::snprintf(figure, sizeof(figure), " %.3f", sum > 0 ? max / (sum / unit.size()) : 1.0);
      line += figure;
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  if (unit.leader() && unit_since.layers > 0)
    PrintPlacedBalance(unit_since, unit.group()->rebalances(), unit.group()->skipped_rebalances());
  return out;
}

// Prints the jobs in index order (rank 0 of a unit, or a single process); returns the exit code.
int PrintJobs(const std::map<size_t, PrintedJob>& jobs) {
  int rc = 0;
  for (const auto& [index, job] : jobs) {
    std::cout << job.out << "\n";
    std::cout.flush();
    if (!job.err.empty()) std::fputs(job.err.c_str(), stderr);
    if (job.failed) rc = 1;
  }
  std::fflush(stdout);
  return rc;
}

void ReportSeed(const engine::RequestUpdate& u, const sampling::SamplingParams& p, size_t index, bool several) {
  if (p.seed || p.greedy()) return;
  if (several) std::fprintf(stderr, "generate: request %zu sampled with seed %llu\n", index + 1, static_cast<unsigned long long>(u.seed));
  else std::fprintf(stderr, "generate: sampled with seed %llu (--seed to repeat)\n", static_cast<unsigned long long>(u.seed));
}

int RunProtocol(const GenerateArgs& args, parallel::Unit& unit) {
  // The request bodies: one (--prompt / --request) or one per non-empty line.
  std::vector<std::string> bodies;
  if (!args.prompt.empty()) {
    nlohmann::ordered_json body = {{"model", "deepinfer"},
                                   {"messages", {{{"role", "user"}, {"content", args.prompt}}}},
                                   {"thinking", {{"type", args.thinking ? "enabled" : "disabled"}}}};
    if (args.stream) body["stream"] = true;
    if (args.temperature_given) body["temperature"] = args.temperature;
    if (args.top_p_given) body["top_p"] = args.top_p;
    bodies.push_back(body.dump());
  } else if (!args.request_path.empty()) {
    auto body = ReadBody(args.request_path);
    if (!body.ok()) return Fail("generate", body.status().message());
    bodies.push_back(std::move(body).value());
  } else {
    auto text = ReadBody(args.requests_path);
    if (!text.ok()) return Fail("generate", text.status().message());
    std::istringstream lines(*text);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.find_first_not_of(" \t\r") != std::string::npos) bodies.push_back(line);
    }
    if (bodies.empty()) return Fail("generate", args.requests_path + ": no requests");
  }
  const bool single = bodies.size() == 1 && args.requests_path.empty();

  auto loaded = LoadEngine(args, /*need_tokenizer=*/true, unit);
  if (!loaded.ok()) return unit.leader() ? Fail("generate", loaded.status().message()) : 1;
  engine::Engine& engine = *loaded->engine;
  const tokenizer::Tokenizer& tokenizer = *loaded->tokenizer;

  pipeline::PrepareOptions prepare;
  prepare.tokenizer = &tokenizer;
  prepare.control_ids = recipe::ControlTokenIds::FromTokenizer(tokenizer);
  prepare.model_version = args.version;
  prepare.max_model_len = engine.info().max_model_len;
  prepare.default_sampling = DefaultSampling(args);
  prepare.default_max_tokens = args.max_tokens;
  prepare.constraint_compiler = loaded->constraint_compiler;  // response_format & co. (pipeline/structured_output.h)
  const pipeline::Api api = pipeline::ApiOf(args.protocol);

  std::vector<ProtocolJob> jobs(bodies.size());
  std::mutex mu;
  std::condition_variable cv;
  size_t remaining = 0;
  Progress progress(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!unit.Owns(i)) continue;
    ProtocolJob& job = jobs[i];
    pipeline::PrepareOutcome prepared = pipeline::Prepare(api, bodies[i], prepare);
    if (!prepared.ok()) {
      if (single) {
        // A refused request: the same one-line form as `deepinfer render`, the status and the protocol's error
        // body. A failure that is not the request's (the model's tokenizer cannot encode it): its message.
        if (prepared.refusal.status >= 500) return Fail("generate", prepared.refusal.message);
        std::cerr << "deepinfer generate: HTTP " << prepared.refusal.status << " " << prepared.refusal.body << "\n";
        return 1;
      }
      job.error_body = std::move(prepared.refusal.body);
      continue;
    }
    pipeline::PreparedRequest& request = *prepared.request;
    job.print_events = single && (args.stream || request.stream());
    // Default logprobs (--logprobs) are reported for requests that asked for none.
    request.request.inference.logprobs = request.params.sampling.logprobs;
    pipeline::ResponseContext context;
    context.created = pipeline::UnixSeconds();
    context.model_version = args.version;
    job.translator = request.TakeTranslator(std::move(context));
    // Stop sequences are the codec's (content only, as deepseek-recipe applies them).
    const sampling::SamplingParams sampling_copy = request.params.sampling;
    ++remaining;
    auto id = engine.AddRequest(std::move(request.prompt), std::move(request.params),
                                [&, i, sampling_copy](engine::RequestUpdate u) {
                                  OnProtocolUpdate(jobs[i], u, engine);
                                  if (u.finished) {
                                    ReportSeed(u, sampling_copy, i, !single);
                                    progress.Done();
                                    std::lock_guard<std::mutex> lock(mu);
                                    --remaining;
                                    cv.notify_all();
                                  }
                                });
    if (!id.ok()) {
      --remaining;
      if (single) return Fail("generate", id.status().message());
      recipe::RequestError e;
      e.message = id.status().message();
      job.error_body = recipe::ErrorBody(args.protocol, e);
    }
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return remaining == 0; });
  }
  std::map<size_t, PrintedJob> printed;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!unit.Owns(i) || jobs[i].print_events) continue;
    const bool failed = !jobs[i].error_body.empty();
    printed[i] = {failed ? jobs[i].error_body : jobs[i].body, "", failed};
  }
  auto all = CollectPrinted(unit, std::move(printed), args.ep_stats);
  if (!all.ok()) return Fail("generate", all.status().message());
  return unit.leader() ? PrintJobs(*all) : 0;
}

int RunPromptIds(const GenerateArgs& args, parallel::Unit& unit) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<size_t> indices;  // each of this rank's prompts' place in the list
  for (size_t i = 0; i < args.prompt_ids.size(); ++i) {
    std::vector<int32_t> ids;
    Status s = ParseIds(args.prompt_ids[i], &ids);
    if (!s.ok()) return unit.leader() ? UsageError("generate", "--prompt-ids " + s.message()) : 2;
    if (!unit.Owns(i)) continue;
    prompts.push_back(std::move(ids));
    indices.push_back(i);
  }
  auto loaded = LoadEngine(args, /*need_tokenizer=*/false, unit);
  if (!loaded.ok()) return unit.leader() ? Fail("generate", loaded.status().message()) : 1;
  engine::RequestParams params;
  params.sampling = DefaultSampling(args);
  params.sampling.n = args.n;
  params.sampling.stop = args.stops;
  params.sampling.stop_token_ids = args.stop_ids;
  auto results = prompts.empty() ? Result<std::vector<engine::GenerateOutput>>(std::vector<engine::GenerateOutput>{})
                                 : loaded->engine->Generate(prompts, params);
  if (!results.ok()) return Fail("generate", results.status().message());
  std::map<size_t, PrintedJob> printed;
  for (size_t i = 0; i < results->size(); ++i) {
    PrintedJob& job = printed[indices[i]];
    const engine::GenerateOutput& r = (*results)[i];
    nlohmann::ordered_json out = {{"prompt_tokens", r.prompt_tokens},
                                  {"prompt_cache_hit_tokens", r.prompt_cache_hit_tokens},
                                  {"seed", r.seed}};
    nlohmann::ordered_json outputs = nlohmann::ordered_json::array();
    for (const engine::GenerateOutput::Sequence& s : r.sequences) {
      nlohmann::ordered_json o;
      nlohmann::ordered_json ids = nlohmann::ordered_json::array();
      for (const engine::GeneratedToken& t : s.tokens) ids.push_back(t.id);
      o["token_ids"] = ids;
      if (loaded->tokenizer) o["text"] = utf8::ToValidLossy(s.text);
      o["finish_reason"] = std::string(engine::FinishReasonName(s.finish));
      if (!s.stop_string.empty()) o["stop"] = utf8::ToValidLossy(s.stop_string);
      if (params.sampling.logprobs) {
        nlohmann::ordered_json lp = nlohmann::ordered_json::array();
        for (const engine::GeneratedToken& t : s.tokens) {
          nlohmann::ordered_json top = nlohmann::ordered_json::array();
          for (const engine::TokenAlternative& a : t.top_logprobs) top.push_back({{"id", a.id}, {"logprob", a.logprob}});
          lp.push_back({{"id", t.id}, {"logprob", t.logprob}, {"top_logprobs", top}});
        }
        o["logprobs"] = lp;
      }
      outputs.push_back(o);
    }
    out["outputs"] = outputs;
    if (!r.status.ok()) {
      out["error"] = r.status.message();
      job.failed = true;
    }
    job.out = DumpJson(out);
    if (!params.sampling.seed && !params.sampling.greedy())
      job.err = "generate: prompt " + std::to_string(indices[i] + 1) + " sampled with seed " + std::to_string(r.seed) + "\n";
  }
  auto all = CollectPrinted(unit, std::move(printed), args.ep_stats);
  if (!all.ok()) return Fail("generate", all.status().message());
  return unit.leader() ? PrintJobs(*all) : 0;
}

int RunGenerate(const std::vector<std::string>& argv) {
  GenerateArgs args;
  if (int rc = ParseArgs(argv, &args)) return rc;
  if (!args.version_given && args.prompt_ids.empty()) {
    auto config = HfConfig::Load(args.model_dir);
    if (!config.ok()) return Fail("generate", config.status().message());
    const auto version = pipeline::ModelVersionFromConfig(*config);
    if (!version)
      return Fail("generate", "cannot tell the prompt encoding from model_type '" + config->model_type() +
                                  "' (pass --model-version)");
    args.version = *version;
  }
  auto unit = parallel::Unit::Start(args.unit);
  if (!unit.ok()) return parallel::LauncherRank() == 0 ? Fail("generate", unit.status().message()) : 1;
  if ((*unit)->group() != nullptr) {
    (*unit)->group()->set_measure_memcpy(args.ep_stats);
    (*unit)->group()->set_record_loads(args.ep_stats && args.unit.expert_parallel);
  }
  return args.prompt_ids.empty() ? RunProtocol(args, **unit) : RunPromptIds(args, **unit);
}

const CommandRegistration kGenerateRegistration(
    {"generate", "requests through the whole pipeline on the engine, no server", kGenerateUsage, RunGenerate});

}  // namespace
}  // namespace deepinfer::cli
