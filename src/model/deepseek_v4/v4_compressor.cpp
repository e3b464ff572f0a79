// The KV compressors: learned gated pooling over `ratio` consecutive tokens (HCA), or over two overlapping
// windows of `ratio` tokens (CSA: the previous window's first series and the current window's second).
// One entry per complete window; partial windows wait in the sequence state.
#include <cmath>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/number_formats.h"
#include "model/common/attention.h"
#include "model/deepseek_v4/v4_internal.h"

namespace deepinfer::model::v4 {

namespace {

void EnsureRows(const V4CompressorWeights& w, V4CompressorState& state) {
  const int64_t width = (w.overlapping ? 2 : 1) * w.head_dim;
  if (state.rows.empty()) state.rows.assign(static_cast<size_t>(CompressorCapacity(w) * 2 * width), 0.0f);
}

}  // namespace

bool CompressorFeed(const V4CompressorWeights& w, const std::vector<float>& inv_freq, float eps,
                    V4CompressorState& state, int64_t floor, int64_t pos, const float* kv, const float* gate,
                    float* entry) {
  const int64_t r = w.ratio, hd = w.head_dim, width = (w.overlapping ? 2 : 1) * hd;
  const int64_t capacity = CompressorCapacity(w);
  EnsureRows(w, state);
  auto row = [&](int64_t q) { return state.rows.data() + (q % capacity) * 2 * width; };
  float* dst = row(pos);
  std::copy(kv, kv + width, dst);
  std::copy(gate, gate + width, dst + width);
  if (pos % r != r - 1) return false;
  if (entry == nullptr) return true;

  // The window [first, pos] and, overlapping, the one before it (absent before `floor`).
  const int64_t first = pos - (r - 1);
  const bool has_prev = w.overlapping && first - r >= floor;
  const float* ape = w.ape.data();
  const int64_t slots = w.overlapping ? 2 * r : r;
  std::vector<const float*> cur(r), prev(w.overlapping ? r : 0);
  for (int64_t s = 0; s < r; ++s) cur[s] = row(first + s);
  if (has_prev)
    for (int64_t s = 0; s < r; ++s) prev[s] = row(first - r + s);
  std::vector<float> g(slots), v(slots);
  for (int64_t c = 0; c < hd; ++c) {
    if (w.overlapping) {
      for (int64_t s = 0; s < r; ++s) {
        v[s] = has_prev ? prev[s][c] : 0.0f;
        g[s] = has_prev ? prev[s][width + c] + ape[s * width + c] : -INFINITY;
        v[r + s] = cur[s][hd + c];
        g[r + s] = cur[s][width + hd + c] + ape[s * width + hd + c];
      }
    } else {
      for (int64_t s = 0; s < r; ++s) {
        v[s] = cur[s][c];
        g[s] = cur[s][width + c] + ape[s * width + c];
      }
    }
    entry[c] = GatedPool(v.data(), g.data(), slots);
  }
  kernels::RmsNorm(entry, w.norm.data(), eps, hd, entry);
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  std::vector<float> cos(half), sin(half);
  RopeAngles(inv_freq, first, cos.data(), sin.data());
  kernels::ApplyRope(entry, 1, hd, hd - 2 * half, 2 * half, cos.data(), sin.data(), kernels::RopeLayout::kInterleaved);
  return true;
}

void SaveCompressorBoundary(const V4CompressorWeights& w, const V4CompressorState& state, int64_t end, float* dst) {
  const int64_t r = w.ratio, hd = w.head_dim, width = 2 * hd, capacity = CompressorCapacity(w);
  for (int64_t s = 0; s < r; ++s) {
    const float* row = state.rows.data() + ((end - r + s) % capacity) * 2 * width;
    std::copy(row, row + hd, dst + s * hd);
    std::copy(row + width, row + width + hd, dst + (r + s) * hd);
  }
}

void LoadCompressorBoundary(const V4CompressorWeights& w, V4CompressorState& state, int64_t end, const float* src) {
  const int64_t r = w.ratio, hd = w.head_dim, width = 2 * hd, capacity = CompressorCapacity(w);
  state.rows.assign(static_cast<size_t>(capacity * 2 * width), 0.0f);
  for (int64_t s = 0; s < r; ++s) {
    float* row = state.rows.data() + ((end - r + s) % capacity) * 2 * width;
    std::copy(src + s * hd, src + (s + 1) * hd, row);
    std::copy(src + (r + s) * hd, src + (r + s + 1) * hd, row + width);
  }
}

uint8_t* CompressedEntry(const Step& step, const ChunkRows& chunk, int group, int64_t ratio, int64_t offset,
                         int64_t width, int64_t index) {
  const int64_t per_block = kvcache::kBlockTokens / ratio;
  const int32_t block = chunk.state->block_table(group)[index / per_block];
  return step.pools->group(group).block(block) + offset + (index % per_block) * width * KvElementBytes(step);
}

uint8_t* WindowBlock(const Step& step, const ChunkRows& chunk, int64_t index) {
  const int group = step.layout->window_group;
  return step.pools->group(group).block(chunk.state->block_table(group)[index]);
}

uint8_t* WindowEntry(const Step& step, const ChunkRows& chunk, int64_t offset, int64_t pos) {
  return WindowBlock(step, chunk, pos / kvcache::kBlockTokens) + offset +
         (pos % kvcache::kBlockTokens) * step.config->head_dim * KvElementBytes(step);
}

void StoreEntry(const Step& step, uint8_t* dst, const float* src, int64_t n) {
  if (step.kv_bf16) kernels::FloatToBf16(src, reinterpret_cast<uint16_t*>(dst), n);
  else std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace deepinfer::model::v4
