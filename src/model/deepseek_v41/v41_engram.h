// DeepSeek-V4.1 Engram: n-gram hash lookups into large tables, gated into the residual streams before the
// blocks of its layers. Everything the hashes depend on must be reproduced exactly, or the pretrained
// tables are meaningless:
//   * the compressed token map: token ids → classes of tokens whose decoded text normalises alike
//     (transformers `build_compressed_token_map`; its class count must equal engram_compressed_vocab_size);
//   * per Engram layer, max_ngram_size odd multipliers 2r + 1 with r from NumPy's
//     `default_rng(10007 · layer_id).integers(0, ((2^63 − 1) // compressed_vocab) // 2)` (PCG64);
//   * the primes: taken in order upward from engram_vocab_size, one per (layer, n-gram size, head), never
//     reused; each (n-gram size, head) owns the row range [offset, offset + prime) of its layer's table.
// The hash of position p's (k+1)-gram is XOR_{i ≤ k} slot_i · multiplier_i, where slot_i is the compressed
// id of the token at p − i (the compressed id of engram_pad_id before the sequence start); head h of that
// n-gram size reads row hash mod prime + offset.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/deepseek_v41/v41_config.h"

namespace deepinfer::model {

// NumPy's `np.random.default_rng(seed).integers(0, high, size=count, dtype=np.int64)`, bit for bit (SeedSequence
// entropy mixing, PCG64 XSL-RR, Lemire's bounded integers). Only ranges above 2^32 are implemented (NumPy
// draws smaller ones 32 bits at a time); `high` must be in (2^32, 2^63).
Result<std::vector<int64_t>> NumpyDefaultRngIntegers(uint64_t seed, int64_t high, int64_t count);

// Whether n is prime (deterministic Miller–Rabin for 64-bit n).
bool IsPrime(uint64_t n);

// The primes of every (Engram layer, n-gram size, head), in order ([layers, max_ngram − 1, heads]), and the
// table rows of each layer (their sums): what engram_num_embeddings must be.
std::vector<int64_t> EngramPrimes(const V41EngramConfig& config);
std::vector<int64_t> EngramTableRows(const V41EngramConfig& config);

// The hash constants of one model, and the compressed token map they apply to.
struct V41EngramHashing {
  int64_t num_layers = 0, max_ngram = 0, heads = 0;
  std::vector<int64_t> primes;       // [layers, max_ngram − 1, heads]
  std::vector<int64_t> offsets;      // [layers, (max_ngram − 1) · heads]
  std::vector<int64_t> multipliers;  // [layers, max_ngram]
  std::vector<int32_t> token_map;    // [vocab]: compressed ids
  int64_t pad_slot = 0;              // compressed id of engram_pad_id

  int64_t columns() const { return (max_ngram - 1) * heads; }

  // Derives the constants from the config. `token_map` must have `classes` distinct ids, and `classes` must
  // equal engram_compressed_vocab_size; the primes of each layer must sum to its engram_num_embeddings.
  static Result<V41EngramHashing> Create(const V41EngramConfig& config, std::vector<int32_t> token_map,
                                         int64_t classes);

  // Table rows (columns() of them, n-gram size 2 heads 0.., then size 3, ...) of Engram layer `layer` for
  // one position; slots[i] is the compressed id of the token i positions back (slots[0] the current one),
  // or pad_slot where there is none.
  void Rows(int64_t layer, const int64_t* slots, int64_t* rows) const;
};

// transformers' `build_compressed_token_map` over a Hugging Face tokenizer.json: each id is decoded alone (the
// byte-level decoder; added tokens by their content) and normalised with NFKC, NFD, accent stripping,
// lowercasing and whitespace collapsing; ids are numbered by first appearance of their key. Keys: the
// normalised text, or the decoded text when that normalises to empty, or the raw vocabulary string when the
// decoded text holds U+FFFD (a partial UTF-8 byte token). `vocab_size` ids are mapped (every id must exist).
Result<std::vector<int32_t>> BuildEngramTokenMap(const std::string& tokenizer_json, int64_t vocab_size,
                                                 int64_t* classes);
// The same from the file's text (`source` names it in errors).
Result<std::vector<int32_t>> BuildEngramTokenMapFromJson(std::string_view text, const std::string& source,
                                                         int64_t vocab_size, int64_t* classes);

}  // namespace deepinfer::model
