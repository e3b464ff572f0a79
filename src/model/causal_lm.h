// The interface every decoder-only model architecture implements (DeepSeek-V3, V4 and V4.1), and the pieces
// a caller hands it: per-sequence state with one block table per cache group, caller-owned block pools
// (kv_cache_spec.h) and a batch of sequence chunks. One Forward call advances
// several sequences at once, each by its own new tokens (a prefill chunk or decode tokens), and returns the
// logits (and hidden states) asked for.
//
// The contract between a caller (the engine) and a model:
//   * Blocks. Before Forward, for every chunk over positions [start, end) (start = num_tokens()), the
//     sequence's table of each group g holds valid blocks at the indices kvcache::BlocksNeeded(spec.groups[g], start,
//     end) gives: every kPrefix block up to `end`, and the window blocks of [start - window + 1, end). Their
//     contents for positions < start are what this model wrote there for this sequence's tokens (or for the
//     same tokens of another sequence: shared prefix blocks, restored window blocks).
//   * Write rule. Forward writes only into blocks covering [start, end) of its chunks: a block whose
//     positions the sequence has all passed is never written again, which is what lets full blocks be
//     shared by reference. A state_only chunk writes no kPrefix block at all. A block a chunk writes must
//     not be shared with another sequence (copy a shared partial block first: kvcache::KvBlockPool::CopyBlock).
//   * Bits. A row's results (logits, hidden) are bit-identical whatever else is in the batch and however
//     the sequence's tokens were cut into chunks, in every precision (batch invariance).
//   * Errors. Every input is validated before any state or block changes; on error nothing has changed.
//
// Threads. A model runs every forward pass on the ThreadPool given in LoadOptions (the calling thread is
// one of its participants) and on nothing else. Give it a pool of its own: a pool runs one job at a time,
// and work another thread submits while a forward pass holds it runs inline on that thread, so
// tokenization, detokenization or sampling on other threads never stalls or shrinks a forward pass, and a
// forward pass never waits for them — unless they share its pool, where whoever comes second runs
// single-threaded. Forward and the sequence operations are not reentrant: one call at a time per model.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/hash.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "kvcache/kv_cache_spec.h"

namespace deepinfer::model {

class ExpertExchange;

// What a model keeps per sequence between calls: its position count, one block table per cache group
// (entry i names the group's block for positions [128·i, 128·(i+1)), kvcache::kNoBlock where the sequence holds
// none) and, in the model's own subclass, the state that lives outside blocks (kvcache::KvCacheSpec::
// sequence_state_bytes bounds it). Made by CausalLM::NewSequence or Fork; usable with that model only.
class SequenceState {
 public:
  virtual ~SequenceState() = default;
  SequenceState& operator=(const SequenceState&) = delete;

  int64_t num_tokens() const { return num_tokens_; }
  size_t num_groups() const { return tables_.size(); }
  std::vector<int32_t>& block_table(size_t group) { return tables_[group]; }
  const std::vector<int32_t>& block_table(size_t group) const { return tables_[group]; }
  // The block of `group` holding position `pos`, or kvcache::kNoBlock.
  int32_t block_at(size_t group, int64_t pos) const {
    const auto i = static_cast<size_t>(pos / kvcache::kBlockTokens);
    return i < tables_[group].size() ? tables_[group][i] : kvcache::kNoBlock;
  }
  // The model that made this state (models check it instead of casting blindly).
  const void* owner() const { return owner_; }

 protected:
  SequenceState(const void* owner, size_t num_groups) : owner_(owner), tables_(num_groups) {}
  SequenceState(const SequenceState&) = default;  // for a model's Fork

  const void* owner_;
  int64_t num_tokens_ = 0;
  std::vector<std::vector<int32_t>> tables_;
};

enum class LogitsWanted {
  kNone,
  kLast,  // the chunk's last position
  kAll,   // every position of the chunk (speculative verification)
  kRows,  // the chunk-relative rows in SequenceChunk::rows
};

// New tokens for one sequence, at positions state->num_tokens() onward.
struct SequenceChunk {
  SequenceState* state = nullptr;
  std::span<const int32_t> tokens;
  LogitsWanted logits = LogitsWanted::kLast;
  std::span<const int32_t> rows;  // kRows: strictly increasing chunk-relative rows
  // Also return the final hidden state of the same rows (ForwardOutput::hidden), e.g. to feed a draft.
  bool want_hidden = false;
  // Replay mode (bounded SWA replay after a prefix hit without window blocks): advances the per-sequence
  // and window state over these tokens but writes no kPrefix block; the compressed entries it reads are
  // the ones already in the (shared, immutable) prefix blocks.
  bool state_only = false;
};

// Results of a Forward or Draft call, chunk by chunk in batch order. The vectors keep their capacity from
// call to call (a caller that reuses one ForwardOutput allocates only when a step is larger than before).
struct ForwardOutput {
  int64_t vocab_size = 0;
  int64_t hidden_width = 0;        // floats per hidden row (CausalLM::info().hidden_width)
  std::vector<float> logits;       // rows × vocab_size
  std::vector<float> hidden;       // rows × hidden_width, for the chunks that asked (others: no rows)
  // Draft only, one per row where the draft layers have a confidence head (empty otherwise): the
  // probability that the row's draft token survives verification given that the draft tokens before it in
  // the block did (DSpark's c_k, uncalibrated).
  std::vector<float> confidence;
  std::vector<int64_t> first_row;  // per chunk: its first row in `logits` (and `hidden` when it asked)
  std::vector<int64_t> num_rows;   // per chunk: rows it received
  const float* row(size_t chunk, int64_t i = 0) const {
    return logits.data() + (first_row[chunk] + i) * vocab_size;
  }
  const float* hidden_row(size_t chunk, int64_t i = 0) const {
    return hidden.data() + (first_row[chunk] + i) * hidden_width;
  }
};

// Where RestoreAt takes the state at a block boundary from.
enum class RestoreFrom {
  // The window blocks before the position (table of every kWindow group: the block ending at `position`,
  // and any others the window reaches) hold this sequence's window entries and the model's boundary state:
  // the restored sequence is bit-identical to one that ran every position.
  kWindowBlocks,
  // No window state: positions before `position` are invisible to window attention and the compressors
  // start empty there (kPrefix entries before it are still read). The start of a bounded replay: a
  // state_only Forward over the last positions rebuilds approximate window state.
  kNoWindow,
};

// A draft step for one sequence (speculative decoding). With n = num_tokens() and k draft steps since the
// last Forward / Truncate / RestoreAt, the step consumes `token` as the token at position n + k and
// predicts the token at n + k + 1. Its hidden input is the main model's last hidden state for k = 0 and
// the draft's own previous output after (the state keeps both), unless `hidden` gives one
// (info().hidden_width floats).
struct DraftChunk {
  SequenceState* state = nullptr;
  int32_t token = 0;
  const float* hidden = nullptr;
  bool want_hidden = false;  // return the draft's output hidden state too
};

struct ModelInfo {
  std::string architecture;  // e.g. "DeepseekV4ForCausalLM"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t hidden_width = 0;  // floats per row of ForwardOutput::hidden (V4: hc_mult · hidden_size streams)
  int64_t max_position_embeddings = 0;
  int64_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;  // from config.json (the tokenizer's control tokens may add more)
  // XXH3-128 over config.json and every safetensors header (names, shapes, dtypes, offsets) plus each
  // file's size: changes whenever the weights could; cheap (no weight bytes are read).
  Hash128 weights_fingerprint;
  // Draft support: "mtp" (V4's multi-token prediction layer), "dspark" (V4.1), or "" when the model was
  // loaded without drafting or has no draft layers.
  std::string draft_kind;
  // The sequence operations this model implements (callers plan by these instead of probing).
  bool supports_restore = false;  // RestoreAt: prefix-cache hits
  bool supports_fork = false;     // Fork: n > 1 outputs share the prompt's state
  bool supports_draft = false;    // Draft (as loaded)
  // The most Draft steps a sequence takes between Forward / Truncate / RestoreAt calls (0: no bound).
  int64_t max_draft_steps = 0;
  // Positions before a block boundary that RestoreAt(kNoWindow) followed by a state_only replay must
  // recompute to rebuild the window state there bit for bit (exact replay's dependency cone).
  int64_t exact_replay_positions = 0;
};

// ModelInfo::exact_replay_positions of a model whose only state outside prefix blocks is its window
// groups: every window layer reaches window − 1 positions further back, plus one for the boundary state,
// rounded up by a block.
int64_t WindowReplayPositions(const kvcache::KvCacheSpec& spec);

// The shape of one chunk of a prospective step, for EstimateStepCost.
struct ChunkShape {
  int64_t start = 0;        // the sequence's num_tokens() before the chunk
  int64_t tokens = 0;       // new tokens
  int64_t logits_rows = 1;  // rows of logits asked for
};

struct StepCost {
  double flops = 0;         // multiply-adds × 2 of the matrix products, attention and indexer scoring
  double weight_bytes = 0;  // weight bytes read (each distinct weight once per step; expected distinct experts)
  double kv_bytes = 0;      // KV bytes attention reads (keys it sees, indexer keys it scores)
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;

  virtual const ModelInfo& info() const = 0;
  // The block-addressed cache this model (as loaded: KV precision, drafting) uses.
  virtual const kvcache::KvCacheSpec& cache_spec() const = 0;
  virtual std::unique_ptr<SequenceState> NewSequence() const = 0;

  // Runs every chunk of the batch and advances each state by its chunk's tokens. A state may appear at most
  // once per batch and a chunk has at least one token. `pools` has one pool per cache group, blocks of the
  // spec's sizes. See the contract above.
  virtual Status Forward(std::span<const SequenceChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) = 0;

  // How many positions back Truncate is exact from the per-sequence state alone (at least 16 where
  // implemented; 0 where not).
  virtual int64_t max_rollback() const = 0;
  // Drops the last num_tokens() − n positions (speculative rollback): afterwards the state is bit-identical
  // to one that ran only the first n positions, provided n ≥ m − max_rollback(), where m is the most
  // positions the state has held since it was made or restored (num_tokens() unless already truncated),
  // and n is not below a RestoreAt position; otherwise OutOfRange and nothing changes. Blocks are untouched; the entries for
  // positions ≥ n in them become stale, and the next Forward rewrites them (the caller makes the blocks
  // covering n onward writable and, to keep the window, holds window blocks from n − window + 1).
  virtual Status Truncate(SequenceState& state, int64_t n) = 0;
  // A copy of the per-sequence state and the block tables (for n > 1 and shared prefixes). Blocks are not
  // copied: the caller owns their reference counts and copies the partial last block before either
  // sequence writes it.
  virtual Result<std::unique_ptr<SequenceState>> Fork(const SequenceState& state) = 0;
  // Sets the state to `position` (a multiple of kvcache::kBlockTokens) of a sequence whose kPrefix blocks up to it
  // are in the tables, dropping whatever the state held. kWindowBlocks additionally needs the window
  // blocks described at RestoreFrom. Position 0 with either mode equals a fresh sequence.
  virtual Status RestoreAt(SequenceState& state, int64_t position, RestoreFrom from, const kvcache::KvPools& pools) = 0;

  // One autoregressive draft step per chunk (see DraftChunk). out receives one row of logits per chunk
  // (and hidden rows where asked). The window blocks covering the draft position (and the window before it)
  // must be valid and writable, as for Forward. The draft's writes lie at positions ≥ num_tokens(), which
  // the next Forward overwrites: the draft never needs rewinding. FailedPrecondition when the model has no
  // draft (info().draft_kind is empty).
  virtual Status Draft(std::span<const DraftChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) = 0;

  // What a step of the given shape costs (for the scheduler's cost model and `bench model`).
  virtual Result<StepCost> EstimateStepCost(std::span<const ChunkShape> chunks) const = 0;
};

// Arithmetic of the matrix products.
enum class ComputePrecision {
  // fp32 activations and accumulation: results follow the reference implementation to fp32 rounding.
  kExact,
  // Activations rounded to bf16 before each product with bf16/FP8/FP4 weights, summed in fp32 by the
  // CPU's bf16 dot-product instructions where it has them (about twice the arithmetic throughput).
  // Still deterministic and batch invariant; logits move by about 1e-2 relative.
  kBf16Activations,
};

// How KV entries are stored in blocks.
enum class KvPrecision {
  kF32,   // bit-exact with the reference
  kBF16,  // half the memory; entries rounded to bf16 (to nearest even) when written
};

// Short names of the precisions, as the CLI's --precision and --kv-precision spell them (and a persisted
// store layout's description records them).
const char* ComputePrecisionName(ComputePrecision precision);  // "exact", "bf16"
const char* KvPrecisionName(KvPrecision precision);            // "f32", "bf16"

struct LoadOptions {
  ComputePrecision precision = ComputePrecision::kExact;
  KvPrecision kv_precision = KvPrecision::kF32;
  // Every forward pass runs here (see "Threads" above); null: ThreadPool::Shared().
  ThreadPool* pool = nullptr;
  // Run the draft layers (V4: the MTP layer) beside the main model, so that Draft can be called; their
  // window entries then live in the window group too.
  bool drafting = false;
  // Reads every weight page once while loading (so that the first request does not pay the page faults
  // of a cold checkpoint), reporting bytes done and total after each tensor file region.
  bool prefault = true;
  std::function<void(int64_t done_bytes, int64_t total_bytes)> progress;
  // Expert parallelism (common/expert_parallel.h): this process computes only its shard of every MoE
  // layer's routed experts and exchanges rows with the other members through it; a Forward over no chunks
  // still joins every layer's exchange. Not owned; outlives the model. Null: every expert runs here.
  ExpertExchange* expert_exchange = nullptr;
};

// Loads the model in a Hugging Face checkpoint directory, choosing the architecture from config.json.
Result<std::unique_ptr<CausalLM>> LoadCausalLM(const std::string& dir, const LoadOptions& options = {});

// A progress callback that draws a bar on stderr when stderr is a terminal, and does nothing otherwise.
std::function<void(int64_t, int64_t)> TerminalProgressBar(std::string label);

}  // namespace deepinfer::model
