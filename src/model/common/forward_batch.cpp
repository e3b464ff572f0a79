#include "model/common/forward_batch.h"

#include <algorithm>

#include "model/common/checkpoint_binder.h"
#include "model/common/row_parallel.h"

namespace deepinfer::model {

Status CheckPools(const kvcache::KvCacheSpec& spec, const kvcache::KvPools& pools) {
  if (pools.num_groups() != spec.groups.size())
    return Status::InvalidArgument("KV pools have " + std::to_string(pools.num_groups()) + " groups; this model has " +
                                   std::to_string(spec.groups.size()));
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    if (pools.group(g).bytes_per_block() != spec.groups[g].bytes_per_block)
      return Status::InvalidArgument("KV pool of group '" + spec.groups[g].name + "' has blocks of " +
                                     std::to_string(pools.group(g).bytes_per_block()) + " bytes; this model needs " +
                                     std::to_string(spec.groups[g].bytes_per_block));
  }
  return Status::Ok();
}

Status CheckChunk(const SequenceChunk& chunk, const std::string& where, const BatchRules& rules,
                  const kvcache::KvCacheSpec& spec, const kvcache::KvPools& pools, int64_t start, int64_t window_floor) {
  if (chunk.tokens.empty()) return Status::InvalidArgument(where + ": no tokens");
  for (int32_t t : chunk.tokens) {
    if (t < 0 || t >= rules.vocab_size)
      return Status::OutOfRange(where + ": token id " + std::to_string(t) + " outside the vocabulary");
  }
  const int64_t len = static_cast<int64_t>(chunk.tokens.size());
  if (rules.max_positions > 0 && start + len > rules.max_positions)
    return Status::OutOfRange(where + ": positions up to " + std::to_string(start + len) +
                              " exceed max_position_embeddings " + std::to_string(rules.max_positions));
  if (chunk.logits == LogitsWanted::kRows) {
    for (size_t i = 0; i < chunk.rows.size(); ++i) {
      if (chunk.rows[i] < 0 || chunk.rows[i] >= len || (i > 0 && chunk.rows[i] <= chunk.rows[i - 1]))
        return Status::InvalidArgument(where + ": logit rows must be increasing rows of the chunk (0.." +
                                       std::to_string(len - 1) + ")");
    }
  }
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    const kvcache::BlockSpan need = kvcache::BlocksNeeded(spec.groups[g], start, start + len);
    const std::vector<int32_t>& table = chunk.state->block_table(g);
    if (static_cast<int64_t>(table.size()) < need.end)
      return Status::InvalidArgument(where + ": the block table of group '" + spec.groups[g].name + "' covers " +
                                     std::to_string(table.size()) + " blocks; positions up to " +
                                     std::to_string(start + len) + " need " + std::to_string(need.end));
    int64_t first = need.first;
    if (spec.groups[g].retention == kvcache::CacheRetention::kWindow)
      first = std::max(first, std::min(need.end, window_floor / kvcache::kBlockTokens));
    for (int64_t b = first; b < need.end; ++b) {
      if (!pools.group(g).contains(table[b]))
        return Status::OutOfRange(where + ": block id " + std::to_string(table[b]) + " (group '" +
                                  spec.groups[g].name + "', block " + std::to_string(b) + ") is not in the pool");
    }
  }
  return Status::Ok();
}

void EmbedIntoStreams(const TensorInfo& embed, const std::vector<Row>& rows, int64_t hc, int64_t d,
                      ThreadPool& pool, float* streams) {
  ForRows(pool, static_cast<int64_t>(rows.size()), [&](int64_t i) {
    float* s = streams + i * hc * d;
    EmbeddingRow(embed, rows[i].token, d, s);
    for (int64_t j = 1; j < hc; ++j) std::copy(s, s + d, s + j * d);
  });
}

void ResetForwardOutput(int64_t vocab_size, int64_t hidden_width, ForwardOutput* out) {
  out->vocab_size = vocab_size;
  out->hidden_width = hidden_width;
  out->logits.clear();
  out->hidden.clear();
  out->confidence.clear();
  out->first_row.clear();
  out->num_rows.clear();
}

}  // namespace deepinfer::model
