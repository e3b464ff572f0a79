// The interface every decoder-only model architecture implements (DeepSeek-V4 now; V3/V3.2 and V4.1 beside
// it later), and the pieces a caller hands it: per-sequence state, caller-owned KV blocks and a batch of
// sequence chunks. One Forward call advances several sequences at once, each by its own new tokens (a
// prefill chunk or a single decode token), and returns the logits asked for.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/status.h"

namespace deepinfer::model {

// Compressed KV entries and indexer keys live in blocks that each cover this many token positions.
inline constexpr int64_t kKvBlockTokens = 128;

// Blocks a sequence of `num_tokens` tokens needs.
inline int64_t KvBlocksFor(int64_t num_tokens) { return (num_tokens + kKvBlockTokens - 1) / kKvBlockTokens; }

// Caller-owned storage for KV blocks (the engine's block manager decides which sequence uses which block).
// Every block has the same size, given by CausalLM::kv_block_floats().
class KvBlockPool {
 public:
  KvBlockPool() = default;
  KvBlockPool(int64_t block_floats, int64_t num_blocks);

  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_floats() const { return block_floats_; }
  float* block(int32_t id) { return storage_.as<float>() + static_cast<int64_t>(id) * block_floats_; }
  const float* block(int32_t id) const { return storage_.as<float>() + static_cast<int64_t>(id) * block_floats_; }

 private:
  int64_t block_floats_ = 0;
  int64_t num_blocks_ = 0;
  AlignedBuffer storage_;
};

// What a model keeps per sequence between Forward calls. The block table maps the sequence's token
// positions [128·i, 128·(i+1)) to a block of the pool; the caller grows it before each Forward call to
// cover every position the call will write (KvBlocksFor(num_tokens() + new tokens) entries).
class SequenceState {
 public:
  virtual ~SequenceState() = default;
  int64_t num_tokens() const { return num_tokens_; }
  std::vector<int32_t>& block_table() { return block_table_; }
  const std::vector<int32_t>& block_table() const { return block_table_; }

 protected:
  int64_t num_tokens_ = 0;
  std::vector<int32_t> block_table_;
};

enum class LogitsWanted {
  kNone,
  kLast,  // the chunk's last position
  kAll,   // every position of the chunk (speculative verification)
};

// New tokens for one sequence, at positions state->num_tokens() onward.
struct SequenceChunk {
  SequenceState* state = nullptr;
  std::span<const int32_t> tokens;
  LogitsWanted logits = LogitsWanted::kLast;
};

struct ForwardOutput {
  int64_t vocab_size = 0;
  std::vector<float> logits;        // rows × vocab_size, chunks in batch order
  std::vector<int64_t> first_row;   // per chunk: its first row in `logits`
  std::vector<int64_t> num_rows;    // per chunk: 0, 1 or its token count
  const float* row(size_t chunk, int64_t i = 0) const {
    return logits.data() + (first_row[chunk] + i) * vocab_size;
  }
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;

  virtual std::string architecture() const = 0;
  virtual int64_t vocab_size() const = 0;
  // Size of one KV block (0 when the model keeps no block-addressed state).
  virtual int64_t kv_block_floats() const = 0;
  virtual std::unique_ptr<SequenceState> NewSequence() const = 0;

  // Runs every chunk of the batch and advances each state by its chunk's tokens. A state may appear at most
  // once per batch. Results do not depend on how sequences are batched or chunked beyond fp32 rounding of
  // identical operations (row results are batch invariant). On error no state is advanced.
  virtual Status Forward(std::span<const SequenceChunk> batch, KvBlockPool& pool, ForwardOutput* out) = 0;
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

struct LoadOptions {
  ComputePrecision precision = ComputePrecision::kExact;
  // Reads every weight page once while loading (so that the first request does not pay the page faults
  // of a cold checkpoint), reporting bytes done and total after each tensor file region.
  bool prefault = true;
  std::function<void(int64_t done_bytes, int64_t total_bytes)> progress;
};

// Loads the model in a Hugging Face checkpoint directory, choosing the architecture from config.json.
Result<std::unique_ptr<CausalLM>> LoadCausalLM(const std::string& dir, const LoadOptions& options = {});

// A progress callback that draws a bar on stderr when stderr is a terminal, and does nothing otherwise.
std::function<void(int64_t, int64_t)> TerminalProgressBar(std::string label);

}  // namespace deepinfer::model
