#include "engine/engine.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "core/clock.h"
#include "core/log.h"
#include "core/sched.h"
#include "engine/engine_impl.h"
#include "model/causal_lm.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::engine {
namespace {

// EngineOptions' value-initialized precisions (engine.h sees the enums declared only).
static_assert(model::ComputePrecision{} == model::ComputePrecision::kExact);
static_assert(model::KvPrecision{} == model::KvPrecision::kF32);


uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The compute precision as the block hashes' root spells it: it names every stored block, so it keeps this
// spelling rather than the flag's (model::ComputePrecisionName).
const char* ComputeName(model::ComputePrecision p) {
  return p == model::ComputePrecision::kExact ? "exact" : "bf16-activations";
}

// EngineOptions::prefault_kv: the pool's blocks are one mapping (block ids are consecutive strides).
void Prefault(kvcache::KvBlockPool& pool) {
  if (pool.num_blocks() == 0) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(pool.block(0)) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(pool.block(static_cast<int32_t>(pool.num_blocks() - 1))) +
                        static_cast<uintptr_t>(pool.bytes_per_block());
#ifdef MADV_POPULATE_WRITE
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0) return;
#endif
  // Older kernels: write each page (its contents are zero either way).
  for (uintptr_t p = begin; p < end; p += page) *reinterpret_cast<volatile uint8_t*>(p) = 0;
}

// The tokens that end generation: EngineOptions::eos_token_ids when given; else config.json's and the
// tokenizer's end-of-sentence control token.
std::vector<int32_t> EndOfSequenceIds(const model::ModelInfo& info, const EngineOptions& options) {
  if (!options.eos_token_ids.empty()) return options.eos_token_ids;
  std::vector<int32_t> ids = info.eos_token_ids;
  if (options.tokenizer) {
    auto id = options.tokenizer->TokenToId("<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>");
    if (id && options.tokenizer->IsAddedToken(*id) && std::find(ids.begin(), ids.end(), *id) == ids.end())
      ids.push_back(*id);
  }
  return ids;
}

// The drafter of a speculative config, or why this model cannot run it.
Result<std::unique_ptr<Drafter>> MakeSpeculation(const model::CausalLM& model, const SpeculativeConfig& config) {
  const int k = config.num_speculative_tokens;
  if (k < 1 || k > kMaxSpeculativeTokens)
    return Status::InvalidArgument("speculative config: \"num_speculative_tokens\" must be in [1, " +
                                   std::to_string(kMaxSpeculativeTokens) + "]");
  const model::ModelInfo& mi = model.info();
  const std::string_view method = DraftMethodName(config.method);
  if ((config.method == DraftMethod::kMtp || config.method == DraftMethod::kDspark) && mi.draft_kind != method)
    return Status::InvalidArgument("speculative config: method \"" + std::string(method) + "\" needs a model loaded with " +
                                   (config.method == DraftMethod::kMtp ? "an MTP layer" : "DSpark draft layers") +
                                   " (" + mi.architecture + " has " +
                                   (mi.draft_kind.empty() ? std::string("none") : "\"" + mi.draft_kind + "\"") + ")");
  // Rejected draft positions are rolled back with Truncate.
  if (model.max_rollback() < k)
    return Status::InvalidArgument("speculative config: " + mi.architecture + " rolls back at most " +
                                   std::to_string(model.max_rollback()) + " positions, fewer than num_speculative_tokens (" +
                                   std::to_string(k) + ")");
  return MakeDrafter(config, mi.vocab_size);
}

}  // namespace

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kDeadline: return "deadline";
    case FinishReason::kError: return "error";
  }
  return "error";
}

SwaReplay DefaultSwaReplay(std::string_view architecture) {
  return architecture == "DeepseekV41ForCausalLM" ? SwaReplay::kBounded : SwaReplay::kExact;
}

Result<std::unique_ptr<Engine>> Engine::Create(std::unique_ptr<model::CausalLM> model, EngineOptions options) {
  if (!model) return Status::InvalidArgument("engine: no model");
  auto engine = std::make_unique<EngineImpl>(std::move(model), std::move(options));
  DI_RETURN_IF_ERROR(engine->Init());
  return std::unique_ptr<Engine>(std::move(engine));
}

EngineImpl::EngineImpl(std::unique_ptr<model::CausalLM> model, EngineOptions options)
    : model_(std::move(model)), options_(std::move(options)) {}

EngineImpl::~EngineImpl() { Shutdown(); }

Status EngineImpl::Init() {
  const EngineOptions& o = options_;
  if (o.max_num_seqs < 0 || o.max_num_seqs > 4096) return Status::InvalidArgument("max_num_seqs: must be in [0, 4096]");
  if (o.output_threads < 1 || o.output_threads > 64) return Status::InvalidArgument("output_threads: must be in [1, 64]");
  if (o.max_num_batched_tokens < 1 || o.max_num_batched_tokens > (1 << 20))
    return Status::InvalidArgument("max_num_batched_tokens: must be in [1, 1048576]");
  if (o.prefill_chunk < 1) return Status::InvalidArgument("prefill_chunk: must be at least 1");
  if (o.max_waiting < 0) return Status::InvalidArgument("max_waiting: must not be negative");
  if (!(o.tbt_target_ms >= 0) && o.tbt_target_ms != kDerivedTbtTarget)
    return Status::InvalidArgument("tbt_target_ms: must not be negative (but kDerivedTbtTarget)");
  if (o.kv_cache_bytes <= 0) return Status::InvalidArgument("kv_cache_bytes: must be positive");

  if (o.step_group != nullptr && o.speculative.enabled())
    return Status::Unimplemented("speculative decoding is not supported with expert parallelism");
  if (o.step_group != nullptr && o.tbt_target_ms != 0)
    return Status::Unimplemented("a TBT target (its start-up calibration) is not supported with expert parallelism");
  const model::ModelInfo& mi = model_->info();
  const kvcache::KvCacheSpec spec = model_->cache_spec();
  std::unique_ptr<Drafter> drafter;
  if (o.speculative.enabled()) {
    DI_ASSIGN_OR_RETURN(drafter, MakeSpeculation(*model_, o.speculative));
  }
  int64_t prefix_bytes = 0, window_bytes = 0, window = 0;
  for (const kvcache::CacheGroupSpec& g : spec.groups) {
    if (g.tokens_per_block != kvcache::kBlockTokens)
      return Status::Unimplemented("engine: cache group '" + g.name + "' has blocks of " +
                                   std::to_string(g.tokens_per_block) + " positions (the engine needs 128)");
    if (g.retention == kvcache::CacheRetention::kPrefix) {
      prefix_bytes += g.bytes_per_block;
    } else {
      window_bytes += g.bytes_per_block;
      window = std::max(window, g.window);
    }
  }
  const int64_t max_chunk = std::min(o.max_num_batched_tokens, std::max<int64_t>(o.prefill_chunk, 1));
  int64_t window_blocks = 0, window_cached = -1, snapshot_budget_bytes = 0;
  if (window_bytes > 0) {
    // A decoding sequence's window, plus a block for the lookahead of speculative decoding.
    const int64_t per_decode = (window - 1 + kvcache::kBlockTokens - 1) / kvcache::kBlockTokens + 1 +
                               (o.speculative.enabled() ? 1 : 0);
    const int64_t per_prefill = (window - 1 + max_chunk + kvcache::kBlockTokens - 1) / kvcache::kBlockTokens + 1;
    if (o.max_num_seqs == 0) {
      // As many running sequences as half the budget's window blocks hold (the rest caches prefixes).
      const int64_t budget_blocks = o.window_blocks > 0 ? o.window_blocks : o.kv_cache_bytes / 2 / window_bytes;
      const int64_t fits = (budget_blocks - 2 * per_prefill) / per_decode;
      if (fits < 1)
        return Status::ResourceExhausted(
            "kv_cache_bytes: " + std::to_string(o.kv_cache_bytes) +
            " bytes cannot hold the sliding-window state of one running sequence (it needs " +
            std::to_string(2 * (per_decode + 2 * per_prefill) * window_bytes) + " bytes); raise it");
      options_.max_num_seqs = std::min(fits, kDerivedMaxNumSeqs);
    }
    const int64_t running = o.max_num_seqs * per_decode + 2 * per_prefill;
    const int64_t cache_bytes = o.window_cache_bytes > 0 ? o.window_cache_bytes : o.kv_cache_bytes / 4;
    snapshot_budget_bytes = cache_bytes / 4;  // the snapshots' alone, when the window pool is given in blocks
    window_cached = std::max<int64_t>(cache_bytes / window_bytes, 0);
    if ((running + window_cached) * window_bytes > o.kv_cache_bytes * 3 / 4)
      window_cached = std::max<int64_t>(0, o.kv_cache_bytes * 3 / 4 / window_bytes - running);
    window_blocks = running + window_cached;
    if (running * window_bytes > o.kv_cache_bytes && o.window_blocks <= 0)
      return Status::ResourceExhausted(
          "kv_cache_bytes: " + std::to_string(o.kv_cache_bytes) + " bytes cannot hold the sliding-window state of " +
          std::to_string(o.max_num_seqs) + " running sequences (" + std::to_string(running * window_bytes) +
          " bytes); raise it or lower max_num_seqs");
  }
  if (o.max_num_seqs == 0) options_.max_num_seqs = kDerivedMaxNumSeqs;  // no window state to hold
  if (window_bytes > 0 && o.window_blocks > 0) {
    window_blocks = o.window_blocks;
    window_cached = -1;
  } else if (window_bytes > 0) {
    // The snapshots get as many bytes beside the pools as the cached window blocks have slots in the window
    // pool, each kind its own: the window blocks that many concurrent decodes release must not push out
    // the snapshots their prompts left. The pools are resident whether those slots are used or not.
    snapshot_budget_bytes = window_cached * window_bytes;
  }
  int64_t prefix_blocks = 0;
  if (prefix_bytes > 0 && o.kv_blocks > 0) {
    prefix_blocks = o.kv_blocks;
  } else if (prefix_bytes > 0) {
    prefix_blocks = (o.kv_cache_bytes - window_blocks * window_bytes) / prefix_bytes;
    if (prefix_blocks < 2)
      return Status::ResourceExhausted("kv_cache_bytes: too small for the model's KV blocks (" +
                                       std::to_string(prefix_bytes + window_bytes) + " bytes per block)");
  }
  std::vector<int64_t> per_group;
  for (const kvcache::CacheGroupSpec& g : spec.groups)
    per_group.push_back(g.retention == kvcache::CacheRetention::kPrefix ? prefix_blocks : window_blocks);
  DI_ASSIGN_OR_RETURN(kvcache::KvPools pools, kvcache::KvPools::Create(spec, per_group));
  if (o.prefault_kv) {
    for (size_t g = 0; g < pools.num_groups(); ++g) Prefault(pools.group(g));
  }

  info_.architecture = mi.architecture;
  info_.vocab_size = mi.vocab_size;
  info_.max_model_len = mi.max_position_embeddings > 0 ? mi.max_position_embeddings : (int64_t{1} << 30);
  info_.block_tokens = kvcache::kBlockTokens;
  info_.kv_blocks = prefix_blocks;
  info_.max_num_seqs = o.max_num_seqs;
  // A sequence must fit the pool alone (else preemption could never make room for it).
  if (prefix_blocks > 0) info_.max_model_len = std::min(info_.max_model_len, prefix_blocks * kvcache::kBlockTokens);
  info_.max_prompt_tokens = info_.max_model_len - 1;
  weights_fingerprint_ = mi.weights_fingerprint;

  SchedulerConfig config;
  config.options = o;
  config.prefix_blocks = prefix_blocks;
  config.window_blocks = window_blocks;
  config.window = window;
  config.window_cached = window_cached;
  config.vocab_size = mi.vocab_size;
  config.max_model_len = info_.max_model_len;
  config.eos_token_ids = EndOfSequenceIds(mi, o);
  config.supports_restore = mi.supports_restore;
  config.supports_fork = mi.supports_fork;
  config.prefix_block_bytes = prefix_bytes;
  config.window_block_bytes = window_bytes;
  config.sequence_state_bytes = spec.sequence_state_bytes;
  {
    std::string layout = mi.architecture + " state<=" + std::to_string(spec.sequence_state_bytes);
    for (const kvcache::CacheGroupSpec& g : spec.groups)
      layout += ";" + g.name + " " + std::to_string(g.bytes_per_block) + " " + std::to_string(g.num_layers) +
                (g.retention == kvcache::CacheRetention::kPrefix ? " prefix" : " window");
    config.snapshot_layout = HashBytes(layout);
  }
  config.replay_cone = mi.exact_replay_positions;
  // Without window groups the snapshots' budget is their cap alone, by default an eighth of the prefix pool.
  if (window_bytes == 0)
    snapshot_budget_bytes = o.snapshot_cache_bytes >= 0 ? o.snapshot_cache_bytes : prefix_blocks * prefix_bytes / 8;
  if (o.snapshot_cache_bytes > 0 && window_cached < 0) snapshot_budget_bytes = o.snapshot_cache_bytes;
  config.snapshot_budget_bytes = snapshot_budget_bytes;
  config.snapshot_bytes =
      mi.supports_state_export && mi.supports_restore && o.enable_prefix_caching ? o.snapshot_cache_bytes : 0;
  if (!config.supports_restore && o.enable_prefix_caching)
    DI_LOG(kInfo, "engine: the model cannot restore a sequence at a block boundary; prefix-cache hits are off")
        .Field("architecture", mi.architecture);

  std::random_device rd;
  {
    MutexLock lock(&inbox_.mu);
    inbox_.seed_state = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(NowNanos());
  }
  {
    MutexLock lock(&metrics_.mu);
    metrics_.counters.kv_blocks_total = prefix_blocks;
    metrics_.counters.window_blocks_total = window_blocks;
    metrics_.prefix_free = prefix_blocks;
  }

  std::shared_ptr<sampling::ConstraintCompiler> compiler = o.constraint_compiler;
  if (!compiler && o.tokenizer) compiler = std::make_shared<sampling::ConstraintCompiler>(o.tokenizer);
  auto local = std::make_unique<LocalExecutor>(std::move(model_), std::move(pools), std::move(compiler),
                                               std::move(drafter), o.speculative.num_speculative_tokens,
                                               o.speculative.rejection_sampling);
  local->set_forward_every_step(o.step_group != nullptr);
  executor_ = std::move(local);
  output_ = std::make_unique<OutputProcessor>(o.tokenizer, o.output_threads, o.output_thread_slice_us,
                                              [this](std::vector<std::pair<RequestId, int>> stopped) {
                                                {
                                                  MutexLock lock(&inbox_.mu);
                                                  for (const auto& s : stopped) inbox_.output_stops.push_back(s);
                                                }
                                                inbox_.cv.Signal();
                                              });
  scheduler_ = std::make_unique<Scheduler>(std::move(config), &inbox_, &metrics_, output_.get(), executor_.get());
  // Latency-budgeted chunks and scheduled verification both price steps with the cost model.
  if ((o.tbt_target_ms > 0 || o.tbt_target_ms == kDerivedTbtTarget ||
       (o.speculative.enabled() && o.speculative.scheduled_verification)) &&
      o.calibrate)
    scheduler_->Calibrate([this](const StepPlan& plan) { return executor_->Execute(plan); });

  step_thread_ = std::thread([this] {
    SetCurrentThreadName("di-engine-step");
    StepLoop();
  });
  DI_LOG(kInfo, "engine ready")
      .Field("architecture", info_.architecture)
      .Field("prefix_blocks", prefix_blocks)
      .Field("window_blocks", window_blocks)
      .Field("max_num_seqs", o.max_num_seqs)
      .Field("tbt_target_ms", o.tbt_target_ms);
  return Status::Ok();
}

Result<RequestId> EngineImpl::AddRequest(std::vector<int32_t> prompt, RequestParams params, UpdateCallback callback) {
  const sampling::SamplingParams& sp = params.sampling;
  DI_RETURN_IF_ERROR(sampling::ValidateSamplingParams(sp, info_.vocab_size));
  if (prompt.empty()) return Status::InvalidArgument("prompt: must not be empty");
  const int64_t p = static_cast<int64_t>(prompt.size());
  if (p > info_.max_prompt_tokens) {
    const bool context = p >= info_.max_model_len;
    return Status::InvalidArgument("prompt: " + std::to_string(p) + " tokens is longer than " +
                                   (context ? "the model's context (" + std::to_string(info_.max_model_len) + " tokens)"
                                            : "the KV cache can hold (" + std::to_string(info_.max_prompt_tokens) +
                                                  " tokens)"));
  }
  for (int32_t t : prompt) {
    if (t < 0 || t >= info_.vocab_size)
      return Status::InvalidArgument("prompt: token id " + std::to_string(t) + " is not in the vocabulary [0, " +
                                     std::to_string(info_.vocab_size) + ")");
  }
  bool has_stops = false;
  for (const std::string& s : sp.stop) has_stops |= !s.empty();
  if (has_stops && (!options_.tokenizer || !params.detokenize))
    return Status::InvalidArgument("stop: stop strings need the engine's tokenizer and detokenize on");
  if (params.prompt_logprobs < -1 || params.prompt_logprobs > sampling::kMaxTopLogprobs)
    return Status::InvalidArgument("prompt_logprobs: must be in [-1, " + std::to_string(sampling::kMaxTopLogprobs) + "]");
  if (params.cache_salt.size() > kMaxSaltBytes) return Status::InvalidArgument("cache_salt: at most 1024 bytes");
  if (params.tag.size() > kMaxTagBytes) return Status::InvalidArgument("tag: at most 256 bytes");
  if (params.kv_ttl_class.size() > kMaxTtlClassBytes) return Status::InvalidArgument("kv_ttl_class: at most 64 bytes");
  if (params.primed_output_tokens < 0 || params.primed_output_tokens >= p)
    return Status::InvalidArgument("primed_output_tokens: must be in [0, prompt tokens)");
  if (!callback) return Status::InvalidArgument("callback: required");

  auto r = std::make_unique<Request>();
  r->prompt_tokens = p;
  r->arrival_nanos = NowNanos();
  r->params = std::move(params);
  const sampling::SamplingParams& rp = r->params.sampling;  // `sp` is moved from now
  r->root = kvcache::RootHash(weights_fingerprint_, ComputeName(options_.compute_precision),
                              model::KvPrecisionName(options_.kv_precision), r->params.cache_salt);
  const int n = rp.n;
  r->use_counts = rp.repetition_penalty != 1.0 || rp.presence_penalty != 0 || rp.frequency_penalty != 0;
  for (int i = 0; i < n; ++i) {
    auto s = std::make_unique<Sequence>();
    s->request = r.get();
    s->index = i;
    s->born = i == 0;
    s->tokens = i == 0 ? std::move(prompt) : std::vector<int32_t>{};
    r->seqs.push_back(std::move(s));
  }
  r->live = n;

  auto out = std::make_shared<OutputRequest>();
  out->callback = std::move(callback);
  out->text = options_.tokenizer && r->params.detokenize;
  out->prompt_tokens = p;
  out->seqs.resize(static_cast<size_t>(n));
  for (OutputSequence& os : out->seqs) {
    if (out->text) {
      os.detokenizer = std::make_unique<tokenizer::StreamingDetokenizer>(*options_.tokenizer, r->params.skip_special_tokens);
      os.stops = std::make_unique<sampling::StopStringMatcher>(rp.stop, rp.include_stop_str_in_output);
      const std::vector<int32_t>& tokens = r->seqs.front()->tokens;
      for (size_t i = tokens.size() - static_cast<size_t>(r->params.primed_output_tokens); i < tokens.size(); ++i)
        os.stops->Feed(os.detokenizer->Add(tokens[i]));
    }
  }
  r->out = out;

  // The constraint's compile starts under the inbox lock, after the checks that refuse a request: its
  // outcome (Executor::PrepareConstraints's on_ready, on a compile thread) takes the same lock to report, so
  // it reaches the step thread together with its request or after it, never before, and a refused request
  // starts no compile.
  Status refused;
  RequestId id = 0;
  {
    MutexLock lock(&inbox_.mu);
    if (inbox_.stopping) {
      refused = Status::Unavailable("engine: shutting down");
    } else if (inbox_.waiting_fresh >= options_.max_waiting) {
      MutexLock stats(&metrics_.mu);
      ++metrics_.counters.requests_rejected;
      refused = Status::Unavailable("engine: the waiting queue is full (" + std::to_string(options_.max_waiting) +
                                    " requests)");
    } else {
      Inbox* inbox = &inbox_;
      auto ticket = executor_->PrepareConstraints(r->params, n, [inbox](uint64_t handle, Status status) {
        {
          MutexLock report(&inbox->mu);
          inbox->compiled_constraints.emplace_back(handle, std::move(status));
        }
        inbox->cv.Signal();
      });
      if (!ticket.ok()) {
        refused = ticket.status();
      } else {
        r->constraint = ticket->handle;
        r->constraint_ready = ticket->ready;
        r->id = inbox_.next_id++;
        r->order = inbox_.next_order++;
        r->seed = rp.seed ? *rp.seed : SplitMix64(inbox_.seed_state += 0x9E3779B97F4A7C15ull);
        out->id = r->id;
        out->seed = r->seed;
        ++inbox_.waiting_fresh;
        id = r->id;
        inbox_.new_requests.push_back(std::move(r));
      }
    }
  }
  if (!refused.ok()) return refused;
  inbox_.cv.Signal();
  return id;
}

void EngineImpl::Abort(RequestId id) {
  {
    MutexLock lock(&inbox_.mu);
    inbox_.aborts.push_back(id);
  }
  inbox_.cv.Signal();
}

Result<std::vector<GenerateOutput>> EngineImpl::Generate(std::span<const std::vector<int32_t>> prompts,
                                                         const RequestParams& params) {
  struct Shared {
    std::mutex mutex;
    std::condition_variable cv;
    size_t remaining = 0;
    std::vector<GenerateOutput> results;
  };
  auto shared = std::make_shared<Shared>();
  shared->results.resize(prompts.size());
  shared->remaining = prompts.size();
  std::vector<RequestId> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerateOutput& result = shared->results[i];
    result.sequences.resize(static_cast<size_t>(std::max(params.sampling.n, 1)));
    auto id = AddRequest(prompts[i], params, [shared, i](RequestUpdate u) {
      std::lock_guard<std::mutex> lock(shared->mutex);
      GenerateOutput& g = shared->results[i];
      g.prompt_tokens = u.prompt_tokens;
      g.prompt_cache_hit_tokens = u.prompt_cache_hit_tokens;
      g.seed = u.seed;
      for (SequenceDelta& d : u.sequences) {
        GenerateOutput::Sequence& s = g.sequences[static_cast<size_t>(d.index)];
        for (GeneratedToken& t : d.tokens) s.tokens.push_back(std::move(t));
        s.text += d.text;
        if (d.finish) {
          s.finish = *d.finish;
          s.stop_string = d.stop_string;
        }
      }
      if (u.finished) {
        g.status = u.status;
        if (--shared->remaining == 0) shared->cv.notify_all();
      }
    });
    if (!id.ok()) {
      for (RequestId started : ids) Abort(started);
      std::unique_lock<std::mutex> lock(shared->mutex);
      shared->remaining -= prompts.size() - i;
      shared->cv.wait(lock, [&] { return shared->remaining == 0; });
      return id.status().WithContext("prompt " + std::to_string(i));
    }
    ids.push_back(*id);
  }
  std::unique_lock<std::mutex> lock(shared->mutex);
  shared->cv.wait(lock, [&] { return shared->remaining == 0; });
  return std::move(shared->results);
}

EngineStats EngineImpl::Stats() const {
  EngineStats s;
  {
    MutexLock lock(&metrics_.mu);
    s = metrics_.counters;
    s.num_requests_running = metrics_.running;
    s.num_requests_waiting = metrics_.waiting;
    s.kv_blocks_used = metrics_.prefix_used;
    s.kv_blocks_cached = metrics_.prefix_cached;
    s.kv_blocks_free = metrics_.prefix_free;
    s.window_blocks_used = metrics_.window_used;
    s.window_blocks_cached = metrics_.window_cached;
    s.queued_prefill_tokens = metrics_.queued_prefill_tokens;
    s.step_cost = metrics_.step_cost;
    s.step_cost_calibrated = metrics_.step_cost_ready;
  }
  s.num_speculative_tokens = options_.speculative.enabled() ? options_.speculative.num_speculative_tokens : 0;
  s.kv_cache_usage = s.kv_blocks_total > 0 ? static_cast<double>(s.kv_blocks_used) / static_cast<double>(s.kv_blocks_total) : 0;
  s.time_to_first_token = metrics_.ttft.Snapshot();
  s.inter_token_latency = metrics_.itl.Snapshot();
  s.request_queue_time = metrics_.queue.Snapshot();
  s.e2e_request_latency = metrics_.e2e.Snapshot();
  s.step_idle_gap = metrics_.gap.Snapshot();
  return s;
}

// The step loop: plan, execute, apply, until Shutdown.
void EngineImpl::StepLoop() {
  bool idle = false;
  while (true) {
    // A group member does not sleep here: the group paces its idle agreements (StepGroup).
    if (scheduler_->DrainInbox(idle && options_.step_group == nullptr)) {
      // Snapshots of sequences that finished in the last step are taken before the loop ends, so an engine
      // stopped right after a request finished still leaves that snapshot to the lower tier. A group member
      // cannot step alone (the others have stopped), so it leaves them.
      if (scheduler_->HasSnapshotTakes() && options_.step_group == nullptr)
        scheduler_->Update(executor_->Execute(scheduler_->Schedule()));
      break;
    }
    scheduler_->CheckDeadlines(NowNanos());
    const StepPlan plan = scheduler_->Schedule();
    idle = plan.empty();
    if (options_.step_group != nullptr) options_.step_group->NotePredictedStep(scheduler_->PredictedStepSeconds());
    if (options_.step_group != nullptr && options_.step_group->AnyMemberHasWork(!idle) && idle) {
      executor_->Execute(plan);  // no chunks here: the forward pass only serves the others' expert exchanges
      idle = false;              // the others are busy: no waiting for requests until they are not
      continue;
    }
    if (idle) {
      scheduler_->NoteIdle();
      continue;
    }
    scheduler_->Update(executor_->Execute(plan));
  }
  scheduler_->AbortAll();  // everything in flight finishes with kAbort
}

void EngineImpl::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    {
      MutexLock lock(&inbox_.mu);
      inbox_.stopping = true;
    }
    inbox_.cv.SignalAll();
    if (step_thread_.joinable()) step_thread_.join();
    // Compile threads report into the inbox: none may run once the engine starts going away.
    if (executor_) executor_->StopCompiling();
    if (scheduler_) scheduler_->WaitForTier();  // tier reads write into the pools: they finish before the pools go
    if (output_) output_->Stop();
  });
}

}  // namespace deepinfer::engine
