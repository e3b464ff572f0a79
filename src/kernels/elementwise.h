// Row-wise and elementwise kernels: norms, activations, softmax, rotary embeddings, top-k.
// Every reduction runs in a fixed order within its row, so results do not depend on the batch.
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

// out[i] = x[i] / sqrt(mean(x²) + eps) * weight[i] for one row of n (weight may be null: no scaling).
// The sum of squares is accumulated in double. out may equal x.
void RmsNorm(const float* x, const float* weight, float eps, int64_t n, float* out);
// The same over `rows` rows with the given strides.
void RmsNormRows(const float* x, int64_t x_stride, const float* weight, float eps, int64_t rows, int64_t n, float* out,
                 int64_t out_stride);

// x[i] = x[i] * sigmoid(x[i]).
void Silu(float* x, int64_t n);
// out[i] = silu(g) * u with, when limit > 0, g = min(gate[i], limit) and u = clamp(up[i], -limit, limit)
// (DeepSeek-V4's clamped SwiGLU); limit <= 0 means no clamp. out may equal gate or up.
void SwiGlu(const float* gate, const float* up, int64_t n, float limit, float* out);

// In place: x[i] = exp(x[i] - max) / Σ exp(x[j] - max). Sum accumulated in double. -inf entries get 0;
// a row of all -inf becomes all 0.
void Softmax(float* x, int64_t n);

enum class RopeLayout {
  kInterleaved,  // rotated pairs are (2i, 2i+1)
  kHalf,         // rotated pairs are (i, i + dim/2) ("rotate_half")
};

// Rotates dims [offset, offset + dim) of each of `count` vectors (`stride` floats apart) by the angles
// whose cosines and sines are cos[i], sin[i], i < dim/2 (one position's table):
//   (a, b) -> (a·cos - b·sin, a·sin + b·cos), or with `inverse` the opposite rotation
//   (a, b) -> (a·cos + b·sin, -a·sin + b·cos).
void ApplyRope(float* x, int64_t count, int64_t stride, int64_t offset, int64_t dim, const float* cos, const float* sin,
               RopeLayout layout, bool inverse = false);

// The k largest values of row[0..n) in descending order, ties broken by the smaller index; NaNs rank
// below every number. Writes k indices (and values, if non-null). k must be ≤ n.
void TopK(const float* row, int64_t n, int64_t k, int32_t* indices, float* values);

}  // namespace deepinfer::kernels
