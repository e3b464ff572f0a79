// The serving engine: one model, its KV block pools with the prefix cache, and a step thread that runs
// continuous batching over every request in flight. The HTTP server, `deepinfer generate` and the
// benchmarks all drive it through this header.
//
// Threads. AddRequest, Abort, Stats and Generate may be called from any thread. Forward passes run on the
// engine's step thread (on the model's pool), requests' grammars compile on its compile threads (started
// with the first grammar); each request's updates are delivered on the engine's output
// thread, in order, one call at a time per request, so a slow consumer never delays a step. A callback
// must not block: it hands the update to its own thread (an asio strand, a queue) and returns.
//
// Determinism. A request's tokens and logprobs depend only on its prompt, its parameters and its seed:
// never on the other requests in the batch, on how its prompt was chunked, on preemption, or on
// prefix-cache hits (with --swa-replay bounded, a hit whose window blocks are gone is the documented
// exception). A request without a seed gets a random one, reported in its updates so it can be repeated.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/speculative_config.h"
#include "sampling/output_constraint.h"
#include "sampling/params.h"

// Declared only, so that what includes this header (the scheduler among them) sees no model.
namespace deepinfer::model {
class CausalLM;
enum class ComputePrecision;  // model/causal_lm.h
enum class KvPrecision;
}  // namespace deepinfer::model
namespace deepinfer::tokenizer {
class Tokenizer;
}
namespace deepinfer::kvcache {
class LowerTier;
}
namespace deepinfer::sampling {
class ConstraintCompiler;
}

namespace deepinfer::engine {

using RequestId = uint64_t;

enum class FinishReason {
  kStop,      // an end-of-sequence or stop token, a stop string, or the logits mask terminated
  kLength,    // max_tokens, or the model's context is full
  kAbort,     // Abort() or Shutdown()
  kDeadline,  // the request's deadline passed (waiting or running)
  kError,     // this request failed (its constraint or mask, or the model); RequestUpdate::status says why
};
// "stop", "length", "abort", "deadline", "error".
std::string_view FinishReasonName(FinishReason reason);

// Bounds on RequestParams' strings (AddRequest refuses longer ones).
inline constexpr size_t kMaxSaltBytes = 1024;
inline constexpr size_t kMaxTagBytes = 256;
inline constexpr size_t kMaxTtlClassBytes = 64;

struct RequestParams {
  // Sampling, n, logprobs / top_logprobs, stop token ids and stop strings, max_tokens, seed.
  sampling::SamplingParams sampling;
  // Lower values are scheduled first (vLLM's convention); among equals, earlier arrivals. When memory runs
  // out, the running sequence with the highest value (then the newest) is preempted first.
  int priority = 0;
  // Steady-clock time (core/clock.h NowNanos()) after which the request finishes with kDeadline, whether
  // it is waiting or running; 0: none.
  int64_t deadline_nanos = 0;
  // Only requests with the same salt share prefix-cache blocks (per-tenant isolation, vLLM's cache_salt).
  std::string cache_salt;
  // The persistent KV tier's retention class ("agent", "chat"; empty: the tier's default).
  std::string kv_ttl_class;
  // A constraint on each output (structured output, scripted tokens); empty: none. A request with a
  // grammar waits, unscheduled, while it compiles; a grammar that does not compile finishes it with kError.
  sampling::OutputConstraint constraint;
  // Fill the updates' text and token bytes (needs EngineOptions::tokenizer); stop strings need it too.
  bool detokenize = true;
  bool skip_special_tokens = true;  // special added tokens contribute no text
  // The prompt's last this many tokens are output an earlier run of this request already reported (a stream
  // continued on another server): each output's detokenizer and stop strings start in the state those
  // tokens left them (an incomplete character's bytes held, a stop string's prefix held back), and their
  // text is not reported again. 0: the output starts fresh.
  int64_t primed_output_tokens = 0;
  // The prompt's snapshot for the persistent tier (when one is taken) is of the state after its last position
  // rather than the one before it: for a continuation that knows the first output token already (a prefill
  // unit hands it to the decode unit with the prompt, which then computes no prompt position again).
  bool snapshot_whole_prompt = false;
  // >= 0: report the log probability of each prompt token (from the logits of the position before it) and
  // this many alternatives (0..sampling::kMaxTopLogprobs), in RequestUpdate::prompt_logprobs. Such a
  // request takes nothing from the prefix cache, so that every prompt position is computed. -1: none.
  int prompt_logprobs = -1;
  std::string tag;                  // shown in log lines about the request (e.g. its x-request-id)
};

struct TokenAlternative {
  int32_t id = 0;
  float logprob = 0;
  std::string bytes;  // the token's bytes (may be part of a UTF-8 character); empty without a tokenizer
};

struct GeneratedToken {
  int32_t id = 0;
  std::string bytes;     // empty without a tokenizer or with detokenize off
  bool control = false;  // an added token of the vocabulary (recipe::TokenLogprob::control)
  bool special = false;  // a special added token (RequestParams::skip_special_tokens leaves it out of text)
  float logprob = 0;     // when logprobs: log-softmax of the raw logits (sampling/params.h)
  std::vector<TokenAlternative> top_logprobs;  // top_logprobs entries, most likely first
};

// What one of a request's n outputs produced since its previous update.
struct SequenceDelta {
  int index = 0;                        // 0 .. n-1
  // Tokens generated, without the end or stop token that finished the output (see stop_token).
  std::vector<GeneratedToken> tokens;
  // New text: complete UTF-8 characters; a stop string and what follows are cut (kept with
  // include_stop_str_in_output); text that could still become a stop string is held back until it cannot.
  std::string text;
  std::optional<FinishReason> finish;   // set in this output's last delta
  std::string stop_string;              // the stop string that finished it
  int32_t stop_token = -1;              // the end or stop token that finished it
};

struct RequestUpdate {
  RequestId id = 0;
  int64_t prompt_tokens = 0;
  // Prompt tokens whose KV came from the prefix cache (RAM or the persistent tier), exact, decided at the
  // request's first admission (a later preemption does not change it). The same in every update.
  int64_t prompt_cache_hit_tokens = 0;
  uint64_t seed = 0;  // the seed its draws used
  std::vector<SequenceDelta> sequences;  // outputs with something new
  // RequestParams::prompt_logprobs >= 0: one entry per prompt token, in the first update that has them
  // (once, however often the request was preempted). The first token has no position before it: its
  // logprob is 0 and it has no alternatives.
  std::vector<GeneratedToken> prompt_logprobs;
  bool finished = false;  // every output has finished: this is the request's last update
  Status status;          // why, when an output finished with kError
  // NowNanos() when the step thread handed these tokens to the output thread (the start of a consumer's
  // per-token latency: detokenization and the callback's hand-off count in it).
  int64_t emitted_nanos = 0;
};
// Called exactly once with finished = true for every accepted request (also on Abort and Shutdown).
using UpdateCallback = std::function<void(RequestUpdate update)>;

enum class SwaReplay {
  // A prefix hit whose window blocks are gone recomputes the window state over the last 128 positions of
  // the hit (as DeepSeek V4.1 does): cheap, approximate; its deviation is measured by `bench engine`.
  kBounded,
  // Recompute the whole dependency cone (about layers × (window − 1) positions): bit-identical.
  kExact,
};
// The replay a model family is served with: DeepSeek served V4 with its window state kept, so a restart or
// a prefix hit without window blocks must change no output (exact); V4.1 was built for bounded replay.
SwaReplay DefaultSwaReplay(std::string_view architecture);

inline constexpr int64_t kDerivedMaxNumSeqs = 256;
// EngineOptions::tbt_target_ms: derive the target from the calibrated decode step.
inline constexpr double kDerivedTbtTarget = -1;

// Engines in several processes that step together (expert parallelism: src/parallel). Before every step
// each member says whether it has work; when any has, every member runs a step, and one with nothing to
// run still runs the model's forward pass over no chunks, which joins the others' expert exchanges.
class StepGroup {
 public:
  virtual ~StepGroup() = default;
  // Called on the step thread once per turn of the step loop, in the same order on every member, with
  // whether this engine has a step to run; returns whether any member has. When none has, it pauses before
  // returning (the engine does not wait for requests itself): the members' idle agreements are paced here.
  virtual bool AnyMemberHasWork(bool has_work) = 0;
  // Right before AnyMemberHasWork: how long this engine's step-cost model predicts its step will take (0
  // without a step or a fitted model), so that the members' deadlines follow the steps they run.
  virtual void NotePredictedStep(double seconds) { (void)seconds; }
};

struct EngineOptions {
  // Bytes of KV block pools over all cache groups (split as the model's cache spec asks).
  int64_t kv_cache_bytes = int64_t{1} << 30;
  // Exact pool sizes instead (tests, benchmarks): blocks of each prefix group, and of each window group
  // (0: derived from kv_cache_bytes).
  int64_t kv_blocks = 0;
  int64_t window_blocks = 0;
  // Sequences running at once; 0: as many as half of kv_cache_bytes holds the window state of, at most
  // kDerivedMaxNumSeqs (Create fails when that is not even one).
  int64_t max_num_seqs = 64;
  int64_t max_num_batched_tokens = 2048;  // tokens per step, prefill and decode together
  int64_t max_waiting = 4096;             // queued requests; beyond it AddRequest is refused (kUnavailable)
  // > 0: each step takes the largest prefill chunk that keeps its predicted time within this target
  // time-between-tokens (cost model calibrated at start-up and updated from observed steps).
  // kDerivedTbtTarget: the target follows the decode step the cost model predicts (see
  // DerivedTbtTargetSeconds): a prompt adds at most half a decode step to the running streams' steps.
  // 0: fixed chunks of prefill_chunk tokens.
  double tbt_target_ms = 0;
  int64_t prefill_chunk = 512;
  bool enable_prefix_caching = true;
  SwaReplay swa_replay = SwaReplay::kBounded;
  // > 0: cached window blocks also expire after this long unused (an operator's cap, for a cluster whose
  // memory is better spent elsewhere); 0: they stay until the window pool needs room (LRU).
  double window_ttl_s = 0;
  // What is kept for later prompts besides prefix blocks: this many bytes of window-pool slots for cached
  // (unreferenced) window blocks, and as many bytes beside the pools for the snapshots below, each kind
  // evicting its own least recently used entries (so the window blocks that concurrent decodes release do
  // not push out the prompts' snapshots); 0: a quarter of kv_cache_bytes.
  int64_t window_cache_bytes = 0;
  // The snapshots for token-exact continuation, kept in memory beside the pools under their budget (above):
  // a finished sequence's (a prompt that extends one resumes at its last position instead of its last full
  // block) and a prompt's own one position before its end (the same prompt sent again computes only its
  // last position). -1: on for models that can export their sequence state (with prefix caching on), with
  // no cap but that budget; 0: off; > 0: on, holding at most this many bytes of it (with window_blocks
  // given, or without window groups, this is their whole budget; -1 then means a quarter of the window
  // cache budget, or without window groups an eighth of the prefix pool's bytes).
  int64_t snapshot_cache_bytes = -1;
  // Touch every page of the KV pools at creation. The pools are mapped zero pages, so otherwise the
  // process's resident memory grows with every position first written (for as long as the pool has
  // untouched blocks) and the step thread takes those page faults; with it, RSS holds the whole pool from
  // the start and stays flat. A server sets it; tools that create an engine for one run leave it off.
  bool prefault_kv = false;
  // Microseconds of scheduler time slice the output thread asks for (SetThreadLatencySlice, core/sched.h;
  // 0: the kernel's default). A server that streams tokens sets it short, so the output thread preempts
  // the busy step and pool threads when a step's tokens arrive instead of waiting for their slice to end.
  int64_t output_thread_slice_us = 0;
  // Threads that deliver updates (detokenization, stop strings, the consumers' callbacks). A request's
  // updates always come from the same one, in order; a step's updates for different requests go out on
  // all of them at once, so with many streams the last request of a step does not wait for all the others'
  // encoding and socket writes.
  int output_threads = 1;
  // A short profile at start-up calibrates the cost model (with tbt_target_ms > 0 or scheduled verification).
  bool calibrate = true;
  // Needed for text, token bytes, stop strings and the control flag; not owned, must outlive the engine.
  const tokenizer::Tokenizer* tokenizer = nullptr;
  // Compiles requests' grammars (sampling/constraint_masks.h). Share the server's, which compiles each
  // request's grammar to validate it before queuing: the engine's compile is then a cache hit. Null: the
  // engine's own, over the tokenizer's vocabulary (without a tokenizer, grammars are refused).
  std::shared_ptr<sampling::ConstraintCompiler> constraint_compiler;
  // Tokens that end generation unless ignore_eos; empty: the model's (config.json eos_token_id).
  std::vector<int32_t> eos_token_ids;
  // The persistent tier under the RAM prefix cache (the SSD store); not owned, must outlive the engine.
  kvcache::LowerTier* lower_tier = nullptr;
  // A request waits at most this long for the persistent tier (a slow or hung filesystem), then is
  // admitted without it and recomputes; the late read's blocks still join the RAM cache when it ends.
  double lower_tier_timeout_s = 2;
  // How the model was loaded (LoadOptions): part of every cached block's name, so that blocks computed
  // at another precision are never taken for these (the persistent tier may be shared).
  model::ComputePrecision compute_precision{};  // kExact
  model::KvPrecision kv_precision{};            // kF32
  // Speculative decoding (--speculative-config): each decoding output's next step verifies up to K draft
  // tokens along with its pending one; outputs and logprobs are those of speculation off. A method the model
  // cannot run is refused by Create.
  SpeculativeConfig speculative;
  // Tests: check the block manager's invariants and the step budget after every step (slow); violations
  // are counted in EngineStats::invariant_violations and logged.
  bool check_invariants = false;
  // Step in lock step with engines in other processes (StepGroup); not owned, outlives the engine. Null:
  // this engine steps alone. Speculative decoding and the latency-budget calibration are refused with it.
  StepGroup* step_group = nullptr;
};

struct EngineInfo {
  std::string architecture;
  int64_t vocab_size = 0;
  int64_t max_model_len = 0;        // prompt + generated tokens of one sequence (context and pool)
  int64_t block_tokens = 128;
  int64_t kv_blocks = 0;            // blocks of the main (prefix) pool
  int64_t max_prompt_tokens = 0;    // the longest prompt that can ever be admitted (context and pool)
  int64_t max_num_seqs = 0;         // sequences running at once (EngineOptions::max_num_seqs, derived when 0)
};

// A histogram with fixed bucket bounds (seconds), for Prometheus exposition.
struct HistogramSnapshot {
  std::vector<double> upper_bounds;  // increasing; an implicit +Inf bucket follows
  std::vector<uint64_t> counts;      // per bucket (not cumulative), upper_bounds.size() + 1 entries
  uint64_t count = 0;
  double sum = 0;
};

// Counters are totals since start; gauges are the state when Stats() ran. Named after vLLM's metrics.
struct EngineStats {
  int64_t num_requests_running = 0;
  int64_t num_requests_waiting = 0;  // queued, compiling a grammar, preempted, or loading from the persistent tier
  uint64_t num_preemptions = 0;
  // Main pool: used (referenced by a live sequence), cached (unreferenced, holding a reusable prefix
  // block), free; used + cached + free = total.
  int64_t kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_cached = 0, kv_blocks_free = 0;
  double kv_cache_usage = 0;  // used / total
  int64_t queued_prefill_tokens = 0;  // prompt tokens not yet computed (waiting and running sequences)
  // The calibrated step-cost model's coefficients (engine/cost_model.h: intercept, tokens, logit rows,
  // context, chunks; seconds), and whether it is fitted yet.
  std::array<double, 5> step_cost{};
  bool step_cost_calibrated = false;
  int64_t window_blocks_total = 0, window_blocks_used = 0, window_blocks_cached = 0;
  uint64_t prefix_cache_queries = 0;  // prompt tokens looked up
  uint64_t prefix_cache_hits = 0;     // of them, tokens served from cache (RAM and persistent tier)
  uint64_t external_prefix_cache_hits = 0;  // of the hits, tokens the persistent tier served
  uint64_t lower_tier_timeouts = 0;   // waits for the persistent tier cut short by lower_tier_timeout_s
  uint64_t lower_tier_skipped_blocks = 0;  // blocks the tier held, recomputed as predicted faster than reading
  uint64_t lower_tier_lookups = 0;         // prompts looked up in the persistent tier after their RAM match
  uint64_t lower_tier_lookup_misses = 0;   // of them, the first block after the RAM match was not in the tier
  uint64_t lower_tier_no_room_blocks = 0;  // blocks the tier held, recomputed for want of a free pool block
  uint64_t window_block_hits = 0;     // prefix hits resumed exactly from cached window blocks
  uint64_t replay_hits = 0;           // prefix hits that replayed (window blocks gone)
  // Prefix hits without their window blocks, by why the blocks were missing: evicted for room in the
  // window pool, expired (window_ttl_s), or never cached (or forgotten too long ago to tell).
  uint64_t window_misses_evicted = 0, window_misses_expired = 0, window_misses_never_cached = 0;
  uint64_t replayed_tokens = 0;       // tokens those replays recomputed
  // Token-exact continuation: admissions resumed from a finished sequence's snapshot, admissions that
  // looked for one and found none, and the tokens those hits resumed past their last full cached block
  // (what the block cache alone would have recomputed); the snapshots kept and their bytes.
  uint64_t snapshot_hits = 0, snapshot_misses = 0, snapshot_tokens = 0;
  int64_t snapshots_cached = 0, snapshot_bytes = 0;
  uint64_t prompt_tokens = 0;         // prompt tokens of admitted requests
  uint64_t generation_tokens = 0;
  uint64_t requests_finished[5] = {};  // by FinishReason
  uint64_t requests_rejected = 0;      // refused by AddRequest
  uint64_t steps = 0;
  uint64_t max_step_tokens = 0;        // the most tokens one step ran
  uint64_t invariant_violations = 0;   // with EngineOptions::check_invariants
  // Speculative decoding, as vLLM counts it: verify steps of an output with a draft, draft tokens verified,
  // draft tokens accepted, and accepted ones by draft position (position i counts the drafts whose first
  // i + 1 tokens were accepted).
  int num_speculative_tokens = 0;  // K (0: speculation off)
  uint64_t spec_decode_num_drafts = 0;
  // Scheduled verification: steps that verified less than the full block would have, and the draft
  // positions it would have verified that they did not (plain decoding's skipped drafts included).
  uint64_t spec_decode_scheduled_steps = 0;
  uint64_t spec_decode_trimmed_positions = 0;
  uint64_t spec_decode_num_draft_tokens = 0;
  uint64_t spec_decode_num_accepted_tokens = 0;
  uint64_t spec_decode_num_accepted_tokens_per_pos[kMaxSpeculativeTokens] = {};
  double forward_seconds = 0;          // inside Forward
  double idle_gap_seconds = 0;         // between one Forward's end and the next one's start, when work waited
  HistogramSnapshot time_to_first_token;
  HistogramSnapshot inter_token_latency;
  HistogramSnapshot request_queue_time;
  HistogramSnapshot e2e_request_latency;
  HistogramSnapshot step_idle_gap;
};

// Generate's result for one prompt.
struct GenerateOutput {
  struct Sequence {
    std::vector<GeneratedToken> tokens;
    std::string text;
    FinishReason finish = FinishReason::kStop;
    std::string stop_string;
  };
  int64_t prompt_tokens = 0;
  int64_t prompt_cache_hit_tokens = 0;
  uint64_t seed = 0;
  std::vector<Sequence> sequences;  // n of them
  Status status;
};

class Engine {
 public:
  // Takes the model, sizes the pools from its cache spec, calibrates the cost model and starts the step
  // and output threads.
  static Result<std::unique_ptr<Engine>> Create(std::unique_ptr<model::CausalLM> model, EngineOptions options);
  virtual ~Engine() = default;

  // Queues a request. kInvalidArgument (naming the parameter) for bad sampling parameters, an empty
  // prompt, token ids outside the vocabulary, a prompt that leaves no room to generate within the context
  // or can never fit the block pool, stop strings without a tokenizer; kUnavailable when the waiting queue
  // is full or the engine is shutting down. Generation also stops (kLength) where the context ends.
  virtual Result<RequestId> AddRequest(std::vector<int32_t> prompt, RequestParams params, UpdateCallback callback) = 0;
  // Finishes the request with kAbort and frees its blocks before the next step; unknown or finished ids
  // are ignored.
  virtual void Abort(RequestId id) = 0;
  // Runs the prompts together (continuous batching) with the same parameters and waits for all.
  virtual Result<std::vector<GenerateOutput>> Generate(std::span<const std::vector<int32_t>> prompts,
                                                       const RequestParams& params) = 0;
  virtual EngineStats Stats() const = 0;
  virtual const EngineInfo& info() const = 0;
  // Refuses new requests, aborts those in flight (each gets its final update), joins the threads.
  // Idempotent; the destructor calls it. Not from a callback (it joins the thread that runs them).
  virtual void Shutdown() = 0;
};

}  // namespace deepinfer::engine
