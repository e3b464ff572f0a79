// The KV compressors: learned gated pooling over `ratio` consecutive tokens (HCA), or over two overlapping
// windows of `ratio` tokens (CSA: the previous window's first series and the current window's second).
// One entry per complete window; partial windows wait in the sequence state.
#include <cmath>

#include "kernels/elementwise.h"
#include "model/v4_internal.h"

namespace deepinfer::model::v4 {

void RopeAngles(const std::vector<float>& inv_freq, int64_t pos, float* cos, float* sin) {
  const float p = static_cast<float>(pos);
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float angle = p * inv_freq[i];
    cos[i] = std::cos(angle);
    sin[i] = std::sin(angle);
  }
}

bool CompressorFeed(const V4CompressorWeights& w, const std::vector<float>& inv_freq, float eps,
                    V4CompressorState& state, int64_t pos, const float* kv, const float* gate, float* entry) {
  const int64_t r = w.ratio, hd = w.head_dim, width = (w.overlapping ? 2 : 1) * hd;
  if (state.window_kv.empty()) {
    state.window_kv.assign(static_cast<size_t>(r * width), 0.0f);
    state.window_gate.assign(static_cast<size_t>(r * width), 0.0f);
    if (w.overlapping) {
      state.prev_kv.assign(static_cast<size_t>(r * hd), 0.0f);
      state.prev_gate.assign(static_cast<size_t>(r * hd), 0.0f);
    }
  }
  const int64_t slot = pos % r;
  std::copy(kv, kv + width, state.window_kv.begin() + slot * width);
  std::copy(gate, gate + width, state.window_gate.begin() + slot * width);
  if (slot != r - 1) return false;

  const float* wkv = state.window_kv.data();
  const float* wg = state.window_gate.data();
  const float* ape = w.ape.data();
  const int64_t slots = w.overlapping ? 2 * r : r;
  std::vector<float> g(slots), v(slots);
  for (int64_t c = 0; c < hd; ++c) {
    if (w.overlapping) {
      for (int64_t s = 0; s < r; ++s) {
        v[s] = state.has_prev ? state.prev_kv[s * hd + c] : 0.0f;
        g[s] = state.has_prev ? state.prev_gate[s * hd + c] : -INFINITY;
        v[r + s] = wkv[s * width + hd + c];
        g[r + s] = wg[s * width + hd + c] + ape[s * width + hd + c];
      }
    } else {
      for (int64_t s = 0; s < r; ++s) {
        v[s] = wkv[s * width + c];
        g[s] = wg[s * width + c] + ape[s * width + c];
      }
    }
    float mx = -INFINITY;
    for (int64_t s = 0; s < slots; ++s) mx = std::max(mx, g[s]);
    float sum = 0;
    for (int64_t s = 0; s < slots; ++s) sum += g[s] = std::exp(g[s] - mx);
    float acc = 0;
    for (int64_t s = 0; s < slots; ++s) acc += v[s] * (g[s] / sum);
    entry[c] = acc;
  }
  if (w.overlapping) {
    for (int64_t s = 0; s < r; ++s) {
      for (int64_t c = 0; c < hd; ++c) {
        state.prev_kv[s * hd + c] = wkv[s * width + c];
        state.prev_gate[s * hd + c] = wg[s * width + c] + ape[s * width + c];
      }
    }
    state.has_prev = true;
  }
  kernels::RmsNorm(entry, w.norm.data(), eps, hd, entry);
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  std::vector<float> cos(half), sin(half);
  RopeAngles(inv_freq, pos - (r - 1), cos.data(), sin.data());
  kernels::ApplyRope(entry, 1, hd, hd - 2 * half, 2 * half, cos.data(), sin.data(), kernels::RopeLayout::kInterleaved);
  return true;
}

float* CompressedEntry(const Step& step, const ChunkRows& chunk, int group, int64_t ratio, int64_t offset,
                       int64_t width, int64_t index) {
  const int64_t per_block = kBlockTokens / ratio;
  const int32_t block = chunk.state->block_table(group)[index / per_block];
  return reinterpret_cast<float*>(step.pools->group(group).block(block)) + offset + (index % per_block) * width;
}

float* WindowEntry(const Step& step, const ChunkRows& chunk, int64_t offset, int64_t pos) {
  const int group = step.layout->window_group;
  const int32_t block = chunk.state->block_table(group)[pos / kBlockTokens];
  return reinterpret_cast<float*>(step.pools->group(group).block(block)) + offset +
         (pos % kBlockTokens) * step.config->head_dim;
}

}  // namespace deepinfer::model::v4
