#include "model/deepseek_v3/v32_indexer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/elementwise.h"
#include "kernels/number_formats.h"
#include "model/common/row_parallel.h"

namespace deepinfer::model::v32 {
namespace {

// torch.nn.LayerNorm in fp32: (x − mean) / sqrt(biased variance + eps) · weight + bias.
void LayerNorm(float* x, int64_t n, const float* weight, const float* bias, float eps) {
  float mean = 0;
  for (int64_t i = 0; i < n; ++i) mean += x[i];
  mean /= static_cast<float>(n);
  float var = 0;
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<float>(n);
  const float inv = 1.0f / std::sqrt(var + eps);
  for (int64_t i = 0; i < n; ++i) x[i] = (x[i] - mean) * inv * weight[i] + bias[i];
}

// 2^ceil(log2(t)) for a finite t > 0, exactly (from the binary exponent, not a rounded logarithm).
float PowerOfTwoCeil(float t) {
  int e = 0;
  const float m = std::frexp(t, &e);  // t = m · 2^e, m in [0.5, 1)
  return std::ldexp(1.0f, m == 0.5f ? e - 1 : e);
}

constexpr float kLayerNormEps = 1e-6f;
constexpr float kAmaxFloor = 1e-4f;

}  // namespace

int64_t IndexQuantBlock(const V3Config& c) { return std::min<int64_t>(128, c.index_head_dim); }

int64_t IndexKeyBytes(const V3Config& c) {
  return c.index_head_dim + c.index_head_dim / IndexQuantBlock(c) * static_cast<int64_t>(sizeof(float));
}

void HadamardRotate(float* x, int64_t n) {
  for (int64_t h = 1; h < n; h *= 2) {
    for (int64_t i = 0; i < n; i += 2 * h) {
      for (int64_t j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

void QuantizeFp8(const float* x, int64_t n, int64_t block, bool pow2_scales, uint8_t* codes, float* scales) {
  const float inv_max = 1.0f / 448.0f;
  for (int64_t b = 0; b < n / block; ++b) {
    float amax = 0;
    for (int64_t i = b * block; i < (b + 1) * block; ++i) amax = std::max(amax, std::fabs(x[i]));
    float s = std::max(amax, kAmaxFloor) * inv_max;
    if (pow2_scales) s = PowerOfTwoCeil(s);
    scales[b] = s;
    for (int64_t i = b * block; i < (b + 1) * block; ++i) codes[i] = kernels::FloatToFp8E4M3(x[i] / s);
  }
}

void DequantizeFp8(const uint8_t* codes, const float* scales, int64_t n, int64_t block, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = kernels::Fp8E4M3ToFloat(codes[i]) * scales[i / block];
}

void ProjectIndexer(const V3Config& c, const V32IndexerWeights& w, const float* x, const float* q_latent, int64_t n,
                    const float* cos, const float* sin, const kernels::LinearOptions* linear, ThreadPool* pool,
                    IndexerRows* out) {
  const int64_t d = c.hidden_size, h = c.index_n_heads, dim = c.index_head_dim, rd = c.rope_dim, half = rd / 2;
  const int64_t block = IndexQuantBlock(c), key_bytes = IndexKeyBytes(c);
  out->queries.resize(static_cast<size_t>(n * h * dim));
  std::vector<float> keys(static_cast<size_t>(n * dim));
  out->weights.resize(static_cast<size_t>(n * h));
  RunLinearTasks({{q_latent, n, c.q_lora_rank, &w.wq_b, out->queries.data(), h * dim},
                  {x, n, d, &w.wk, keys.data(), dim},
                  {x, n, d, &w.weights_proj, out->weights.data(), h}},
                 *linear, *pool);
  const float weight_scale = 1.0f / std::sqrt(static_cast<float>(h)) / std::sqrt(static_cast<float>(dim));
  out->keys.resize(static_cast<size_t>(n * key_bytes));
  std::vector<uint8_t> codes(static_cast<size_t>(dim));
  std::vector<float> scales(static_cast<size_t>(dim / block));
  for (int64_t i = 0; i < n; ++i) {
    float* q = out->queries.data() + i * h * dim;
    float* k = keys.data() + i * dim;
    LayerNorm(k, dim, w.k_norm.data(), w.k_norm_bias.data(), kLayerNormEps);
    kernels::ApplyRope(q, h, dim, 0, rd, cos + i * half, sin + i * half, kernels::RopeLayout::kHalf);
    kernels::ApplyRope(k, 1, dim, 0, rd, cos + i * half, sin + i * half, kernels::RopeLayout::kHalf);
    for (int64_t head = 0; head < h; ++head) {
      float* qh = q + head * dim;
      HadamardRotate(qh, dim);
      QuantizeFp8(qh, dim, block, c.index_pow2_scales, codes.data(), scales.data());
      DequantizeFp8(codes.data(), scales.data(), dim, block, qh);
    }
    HadamardRotate(k, dim);
    uint8_t* entry = out->keys.data() + i * key_bytes;
    QuantizeFp8(k, dim, block, c.index_pow2_scales, entry, scales.data());
    std::memcpy(entry + dim, scales.data(), scales.size() * sizeof(float));
    for (int64_t head = 0; head < h; ++head) out->weights[i * h + head] *= weight_scale;
  }
}

void DequantizeKey(const V3Config& c, const uint8_t* entry, float* out) {
  const int64_t dim = c.index_head_dim, block = IndexQuantBlock(c);
  float scales[1024 / 128];  // index_head_dim ≤ 1024 (v3_config): one block up to 128, else blocks of 128
  std::memcpy(scales, entry + dim, static_cast<size_t>(dim / block) * sizeof(float));
  DequantizeFp8(entry, scales, dim, block, out);
}

void SelectPositions(const V3Config& c, const float* query, const float* weights, int64_t pos, const float* keys,
                     SelectScratch& s, std::vector<int64_t>* selected) {
  selected->clear();
  const int64_t n = pos + 1, h = c.index_n_heads, dim = c.index_head_dim;
  if (n <= c.index_topk) {
    for (int64_t t = 0; t < n; ++t) selected->push_back(t);
    return;
  }
  kernels::WeightView key_view;
  key_view.format = kernels::WeightFormat::kF32;
  key_view.out_features = n;
  key_view.in_features = dim;
  key_view.data = keys;
  s.dots.resize(static_cast<size_t>(h * n));
  kernels::Linear(query, h, dim, key_view, s.dots.data(), n, nullptr);  // [heads, keys]
  s.scores.assign(static_cast<size_t>(n), 0.0f);
  for (int64_t head = 0; head < h; ++head) {
    const float* dots = s.dots.data() + head * n;
    for (int64_t t = 0; t < n; ++t) s.scores[t] += std::max(dots[t], 0.0f) * weights[head];
  }
  const int64_t k = c.index_topk;
  s.top.resize(static_cast<size_t>(k));
  kernels::TopK(s.scores.data(), n, k, s.top.data(), nullptr);
  selected->assign(s.top.begin(), s.top.end());
  std::sort(selected->begin(), selected->end());
}

}  // namespace deepinfer::model::v32
