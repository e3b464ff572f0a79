// Per-ISA implementations behind kernels/attention.h (internal).
#pragma once

#include <cstdint>

namespace deepinfer::kernels::attention_impl {

#define DI_ATTENTION_KERNELS(suffix)                                                                            \
  float Dot##suffix(const float* a, const float* b, int64_t n);                                                 \
  void QueryKeyDots##suffix(const float* q, int64_t q_stride, int64_t queries, const float* const* keys,      \
                            int64_t num_keys, int64_t dim, float scale, float* out, int64_t out_stride);        \
  void WeightedKeySum##suffix(const float* p, int64_t p_stride, int64_t queries, const float* const* keys,   \
                              int64_t num_keys, int64_t dim, float* out, int64_t out_stride, bool accumulate);  \
  void QueryKeyDotsBf16##suffix(const float* q, int64_t q_stride, int64_t queries, const uint16_t* const* keys,  \
                                int64_t num_keys, int64_t dim, float scale, float* out, int64_t out_stride);    \
  void WeightedKeySumBf16##suffix(const float* p, int64_t p_stride, int64_t queries, const uint16_t* const* keys, \
                                  int64_t num_keys, int64_t dim, float* out, int64_t out_stride, bool accumulate);

DI_ATTENTION_KERNELS(Scalar)
DI_ATTENTION_KERNELS(Avx2)
DI_ATTENTION_KERNELS(Avx512)

#undef DI_ATTENTION_KERNELS

}  // namespace deepinfer::kernels::attention_impl
