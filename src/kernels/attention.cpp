#include "kernels/attention.h"

#include <cmath>

#include "kernels/attention_kernels.h"
#include "kernels/number_formats.h"

namespace deepinfer::kernels {
namespace attention_impl {

namespace {

inline float Widen(float x) { return x; }
inline float Widen(uint16_t x) { return Bf16ToFloat(x); }

template <class K>
float Dot(const float* a, const K* b, int64_t n) {
  float lane[16] = {};
  for (int64_t k = 0; k < n; ++k) lane[k % 16] = std::fma(a[k], Widen(b[k]), lane[k % 16]);
  for (int width = 8; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) lane[j] = lane[j] + lane[j + width];
  return lane[0];
}

template <class K>
void QueryKeyDotsT(const float* q, int64_t q_stride, int64_t queries, const K* const* keys, int64_t num_keys,
                   int64_t dim, float scale, float* out, int64_t out_stride) {
  for (int64_t t = 0; t < num_keys; ++t)
    for (int64_t i = 0; i < queries; ++i) out[i * out_stride + t] = Dot(q + i * q_stride, keys[t], dim) * scale;
}

template <class K>
void WeightedKeySumT(const float* p, int64_t p_stride, int64_t queries, const K* const* keys, int64_t num_keys,
                     int64_t dim, float* out, int64_t out_stride, bool accumulate) {
  for (int64_t q = 0; q < queries; ++q) {
    float* o = out + q * out_stride;
    if (!accumulate)
      for (int64_t e = 0; e < dim; ++e) o[e] = 0.0f;
    for (int64_t t = 0; t < num_keys; ++t) {
      const float w = p[q * p_stride + t];
      const K* k = keys[t];
      for (int64_t e = 0; e < dim; ++e) o[e] = std::fma(w, Widen(k[e]), o[e]);
    }
  }
}

}  // namespace

float DotScalar(const float* a, const float* b, int64_t n) { return Dot(a, b, n); }

void QueryKeyDotsScalar(const float* q, int64_t q_stride, int64_t queries, const float* const* keys,
                        int64_t num_keys, int64_t dim, float scale, float* out, int64_t out_stride) {
  QueryKeyDotsT(q, q_stride, queries, keys, num_keys, dim, scale, out, out_stride);
}

void WeightedKeySumScalar(const float* p, int64_t p_stride, int64_t queries, const float* const* keys,
                          int64_t num_keys, int64_t dim, float* out, int64_t out_stride, bool accumulate) {
  WeightedKeySumT(p, p_stride, queries, keys, num_keys, dim, out, out_stride, accumulate);
}

void QueryKeyDotsBf16Scalar(const float* q, int64_t q_stride, int64_t queries, const uint16_t* const* keys,
                            int64_t num_keys, int64_t dim, float scale, float* out, int64_t out_stride) {
  QueryKeyDotsT(q, q_stride, queries, keys, num_keys, dim, scale, out, out_stride);
}

void WeightedKeySumBf16Scalar(const float* p, int64_t p_stride, int64_t queries, const uint16_t* const* keys,
                              int64_t num_keys, int64_t dim, float* out, int64_t out_stride, bool accumulate) {
  WeightedKeySumT(p, p_stride, queries, keys, num_keys, dim, out, out_stride, accumulate);
}

}  // namespace attention_impl

using namespace attention_impl;

float DotF32WithIsa(Isa isa, const float* a, const float* b, int64_t n) {
  switch (isa) {
    case Isa::kAvx512:
    case Isa::kAvx512Bf16: return DotAvx512(a, b, n);
    case Isa::kAvx2: return DotAvx2(a, b, n);
    case Isa::kScalar: break;
  }
  return DotScalar(a, b, n);
}

void QueryKeyDotsRowsWithIsa(Isa isa, const float* q, int64_t q_stride, int64_t queries, const float* const* keys,
                             int64_t num_keys, int64_t dim, float scale, float* out, int64_t out_stride) {
  switch (isa) {
    case Isa::kAvx512:
    case Isa::kAvx512Bf16:
      return QueryKeyDotsAvx512(q, q_stride, queries, keys, num_keys, dim, scale, out, out_stride);
    case Isa::kAvx2: return QueryKeyDotsAvx2(q, q_stride, queries, keys, num_keys, dim, scale, out, out_stride);
    case Isa::kScalar: break;
  }
  QueryKeyDotsScalar(q, q_stride, queries, keys, num_keys, dim, scale, out, out_stride);
}

void QueryKeyDotsRowsWithIsa(Isa isa, const float* q, int64_t q_stride, int64_t queries, const uint16_t* const* keys,
                             int64_t num_keys, int64_t dim, float scale, float* out, int64_t out_stride) {
  switch (isa) {
    case Isa::kAvx512:
    case Isa::kAvx512Bf16:
      return QueryKeyDotsBf16Avx512(q, q_stride, queries, keys, num_keys, dim, scale, out, out_stride);
    case Isa::kAvx2: return QueryKeyDotsBf16Avx2(q, q_stride, queries, keys, num_keys, dim, scale, out, out_stride);
    case Isa::kScalar: break;
  }
  QueryKeyDotsBf16Scalar(q, q_stride, queries, keys, num_keys, dim, scale, out, out_stride);
}

void QueryKeyDotsWithIsa(Isa isa, const float* q, int64_t heads, int64_t dim, const float* const* keys,
                         int64_t num_keys, float scale, float* out) {
  QueryKeyDotsRowsWithIsa(isa, q, dim, heads, keys, num_keys, dim, scale, out, num_keys);
}

void WeightedKeySumRowsWithIsa(Isa isa, const float* p, int64_t p_stride, int64_t queries, const float* const* keys,
                               int64_t num_keys, int64_t dim, float* out, int64_t out_stride, bool accumulate) {
  switch (isa) {
    case Isa::kAvx512:
    case Isa::kAvx512Bf16:
      return WeightedKeySumAvx512(p, p_stride, queries, keys, num_keys, dim, out, out_stride, accumulate);
    case Isa::kAvx2: return WeightedKeySumAvx2(p, p_stride, queries, keys, num_keys, dim, out, out_stride, accumulate);
    case Isa::kScalar: break;
  }
  WeightedKeySumScalar(p, p_stride, queries, keys, num_keys, dim, out, out_stride, accumulate);
}

void WeightedKeySumWithIsa(Isa isa, const float* p, int64_t heads, const float* const* keys, int64_t num_keys,
                           int64_t dim, float* out) {
  WeightedKeySumRowsWithIsa(isa, p, num_keys, heads, keys, num_keys, dim, out, dim, false);
}

void QueryKeyDotsWithIsa(Isa isa, const float* q, int64_t heads, int64_t dim, const uint16_t* const* keys,
                         int64_t num_keys, float scale, float* out) {
  QueryKeyDotsRowsWithIsa(isa, q, dim, heads, keys, num_keys, dim, scale, out, num_keys);
}

void WeightedKeySumRowsWithIsa(Isa isa, const float* p, int64_t p_stride, int64_t queries,
                               const uint16_t* const* keys, int64_t num_keys, int64_t dim, float* out,
                               int64_t out_stride, bool accumulate) {
  switch (isa) {
    case Isa::kAvx512:
    case Isa::kAvx512Bf16:
      return WeightedKeySumBf16Avx512(p, p_stride, queries, keys, num_keys, dim, out, out_stride, accumulate);
    case Isa::kAvx2:
      return WeightedKeySumBf16Avx2(p, p_stride, queries, keys, num_keys, dim, out, out_stride, accumulate);
    case Isa::kScalar: break;
  }
  WeightedKeySumBf16Scalar(p, p_stride, queries, keys, num_keys, dim, out, out_stride, accumulate);
}

void WeightedKeySumWithIsa(Isa isa, const float* p, int64_t heads, const uint16_t* const* keys, int64_t num_keys,
                           int64_t dim, float* out) {
  WeightedKeySumRowsWithIsa(isa, p, num_keys, heads, keys, num_keys, dim, out, dim, false);
}

void QueryKeyDots(const float* q, int64_t heads, int64_t dim, const uint16_t* const* keys, int64_t num_keys,
                  float scale, float* out) {
  QueryKeyDotsWithIsa(BestIsa(), q, heads, dim, keys, num_keys, scale, out);
}

void WeightedKeySum(const float* p, int64_t heads, const uint16_t* const* keys, int64_t num_keys, int64_t dim,
                    float* out) {
  WeightedKeySumWithIsa(BestIsa(), p, heads, keys, num_keys, dim, out);
}

float DotF32(const float* a, const float* b, int64_t n) { return DotF32WithIsa(BestIsa(), a, b, n); }

void QueryKeyDots(const float* q, int64_t heads, int64_t dim, const float* const* keys, int64_t num_keys, float scale,
                  float* out) {
  QueryKeyDotsWithIsa(BestIsa(), q, heads, dim, keys, num_keys, scale, out);
}

void WeightedKeySum(const float* p, int64_t heads, const float* const* keys, int64_t num_keys, int64_t dim,
                    float* out) {
  WeightedKeySumWithIsa(BestIsa(), p, heads, keys, num_keys, dim, out);
}

void WeightedKeySumRows(const float* p, int64_t p_stride, int64_t queries, const float* const* keys,
                        int64_t num_keys, int64_t dim, float* out, int64_t out_stride, bool accumulate) {
  WeightedKeySumRowsWithIsa(BestIsa(), p, p_stride, queries, keys, num_keys, dim, out, out_stride, accumulate);
}

void WeightedKeySumRows(const float* p, int64_t p_stride, int64_t queries, const uint16_t* const* keys,
                        int64_t num_keys, int64_t dim, float* out, int64_t out_stride, bool accumulate) {
  WeightedKeySumRowsWithIsa(BestIsa(), p, p_stride, queries, keys, num_keys, dim, out, out_stride, accumulate);
}

void QueryKeyDotsRows(const float* q, int64_t q_stride, int64_t queries, const float* const* keys, int64_t num_keys,
                      int64_t dim, float scale, float* out, int64_t out_stride) {
  QueryKeyDotsRowsWithIsa(BestIsa(), q, q_stride, queries, keys, num_keys, dim, scale, out, out_stride);
}

void QueryKeyDotsRows(const float* q, int64_t q_stride, int64_t queries, const uint16_t* const* keys,
                      int64_t num_keys, int64_t dim, float scale, float* out, int64_t out_stride) {
  QueryKeyDotsRowsWithIsa(BestIsa(), q, q_stride, queries, keys, num_keys, dim, scale, out, out_stride);
}

}  // namespace deepinfer::kernels
