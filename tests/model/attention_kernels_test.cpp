// kernels/attention.h: every ISA gives the same bits as the scalar reference (same lanes, same order), and the
// results agree with double-precision sums.
#include "kernels/attention.h"

#include "kernels/number_formats.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace deepinfer::kernels {
namespace {

std::vector<float> Random(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(AttentionKernels, AllIsasBitIdenticalAndAccurate) {
  std::mt19937 rng(5);
  for (int64_t dim : {1, 7, 16, 17, 31, 64, 100, 512}) {
    const int64_t heads = 17, nk = 11;  // two blocks of 8 heads and a single one; key pairs and a single key
    std::vector<float> q = Random(rng, heads * dim), store = Random(rng, nk * dim), p = Random(rng, heads * nk);
    std::vector<const float*> keys;
    for (int64_t t = 0; t < nk; ++t) keys.push_back(store.data() + t * dim);
    std::vector<float> ref_dots(heads * nk), ref_sum(heads * dim);
    QueryKeyDotsWithIsa(Isa::kScalar, q.data(), heads, dim, keys.data(), nk, 0.5f, ref_dots.data());
    WeightedKeySumWithIsa(Isa::kScalar, p.data(), heads, keys.data(), nk, dim, ref_sum.data());
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < nk; ++t) {
        double exact = 0;
        for (int64_t e = 0; e < dim; ++e) exact += static_cast<double>(q[h * dim + e]) * keys[t][e];
        EXPECT_NEAR(ref_dots[h * nk + t], 0.5 * exact, 1e-5 * (1 + dim)) << dim;
        EXPECT_EQ(ref_dots[h * nk + t], DotF32WithIsa(Isa::kScalar, q.data() + h * dim, keys[t], dim) * 0.5f);
      }
      for (int64_t e = 0; e < dim; ++e) {
        double exact = 0;
        for (int64_t t = 0; t < nk; ++t) exact += static_cast<double>(p[h * nk + t]) * keys[t][e];
        EXPECT_NEAR(ref_sum[h * dim + e], exact, 1e-5 * nk);
      }
    }
    for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
      if (!IsaSupported(isa)) continue;
      std::vector<float> dots(heads * nk), sum(heads * dim);
      QueryKeyDotsWithIsa(isa, q.data(), heads, dim, keys.data(), nk, 0.5f, dots.data());
      WeightedKeySumWithIsa(isa, p.data(), heads, keys.data(), nk, dim, sum.data());
      EXPECT_EQ(dots, ref_dots) << IsaName(isa) << " dim " << dim;
      EXPECT_EQ(sum, ref_sum) << IsaName(isa) << " dim " << dim;
      EXPECT_EQ(DotF32WithIsa(isa, q.data(), store.data(), dim), DotF32WithIsa(Isa::kScalar, q.data(), store.data(), dim));
    }
  }
}

// bf16 keys (KV storage in bf16) are widened exactly, so every ISA's bf16 call equals the fp32 reference
// on the widened keys, bit for bit, for every tail length.
TEST(AttentionKernels, Bf16KeysEqualTheFp32KernelsOnWidenedKeys) {
  std::mt19937 rng(7);
  for (int64_t dim : {1, 7, 8, 9, 15, 16, 17, 31, 64, 100, 512}) {
    const int64_t heads = 9, nk = 5;  // 9 heads: a full block of 8 and a single one
    std::vector<float> q = Random(rng, heads * dim), store = Random(rng, nk * dim), p = Random(rng, heads * nk);
    std::vector<uint16_t> half(store.size());
    FloatToBf16(store.data(), half.data(), static_cast<int64_t>(store.size()));
    std::vector<float> widened(store.size());
    Bf16ToFloat(half.data(), widened.data(), static_cast<int64_t>(half.size()));
    std::vector<const float*> wkeys;
    std::vector<const uint16_t*> hkeys;
    for (int64_t t = 0; t < nk; ++t) {
      wkeys.push_back(widened.data() + t * dim);
      hkeys.push_back(half.data() + t * dim);
    }
    std::vector<float> ref_dots(heads * nk), ref_sum(heads * dim);
    QueryKeyDotsWithIsa(Isa::kScalar, q.data(), heads, dim, wkeys.data(), nk, 0.25f, ref_dots.data());
    WeightedKeySumWithIsa(Isa::kScalar, p.data(), heads, wkeys.data(), nk, dim, ref_sum.data());
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
      if (!IsaSupported(isa)) continue;
      std::vector<float> dots(heads * nk), sum(heads * dim);
      QueryKeyDotsWithIsa(isa, q.data(), heads, dim, hkeys.data(), nk, 0.25f, dots.data());
      WeightedKeySumWithIsa(isa, p.data(), heads, hkeys.data(), nk, dim, sum.data());
      EXPECT_EQ(dots, ref_dots) << IsaName(isa) << " dim " << dim;
      EXPECT_EQ(sum, ref_sum) << IsaName(isa) << " dim " << dim;
    }
  }
}

// The strided many-query sum: every ISA gives the bits of the scalar reference, each query's row equals the
// one-query WeightedKeySum of its own p row, and a sum split at any key into a first call and an accumulating
// second call equals the unsplit sum, bit for bit (fp32 and bf16 keys; query counts and dims that leave every
// kind of remainder block; more keys than one key block).
TEST(AttentionKernels, WeightedKeySumRowsEqualsOneQuerySumsAndSplitsExactly) {
  std::mt19937 rng(11);
  for (int64_t dim : {1, 7, 8, 23, 24, 25, 40, 100, 576}) {
    for (int64_t queries : {1, 3, 4, 5, 9, 17}) {
      const int64_t nk = 70, p_stride = nk + 3, out_stride = dim + 5;
      std::vector<float> store = Random(rng, nk * dim), p = Random(rng, queries * p_stride);
      std::vector<uint16_t> half(store.size());
      FloatToBf16(store.data(), half.data(), static_cast<int64_t>(store.size()));
      std::vector<const float*> keys;
      std::vector<const uint16_t*> hkeys;
      for (int64_t t = 0; t < nk; ++t) {
        keys.push_back(store.data() + t * dim);
        hkeys.push_back(half.data() + t * dim);
      }
      // Reference: each query alone through the scalar one-query kernel.
      std::vector<float> ref(queries * out_stride, -7.0f), href(queries * out_stride, -7.0f);
      for (int64_t q = 0; q < queries; ++q) {
        WeightedKeySumWithIsa(Isa::kScalar, p.data() + q * p_stride, 1, keys.data(), nk, dim,
                              ref.data() + q * out_stride);
        WeightedKeySumWithIsa(Isa::kScalar, p.data() + q * p_stride, 1, hkeys.data(), nk, dim,
                              href.data() + q * out_stride);
      }
      const int64_t split = static_cast<int64_t>(rng() % (nk + 1));
      for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
        if (!IsaSupported(isa)) continue;
        std::vector<float> whole(queries * out_stride, -7.0f), parts(queries * out_stride, -7.0f);
        WeightedKeySumRowsWithIsa(isa, p.data(), p_stride, queries, keys.data(), nk, dim, whole.data(), out_stride,
                                  false);
        EXPECT_EQ(whole, ref) << IsaName(isa) << " dim " << dim << " queries " << queries;
        WeightedKeySumRowsWithIsa(isa, p.data(), p_stride, queries, keys.data(), split, dim, parts.data(), out_stride,
                                  false);
        WeightedKeySumRowsWithIsa(isa, p.data() + split, p_stride, queries, keys.data() + split, nk - split, dim,
                                  parts.data(), out_stride, true);
        EXPECT_EQ(parts, ref) << IsaName(isa) << " dim " << dim << " queries " << queries << " split " << split;
        std::vector<float> hwhole(queries * out_stride, -7.0f);
        WeightedKeySumRowsWithIsa(isa, p.data(), p_stride, queries, hkeys.data(), nk, dim, hwhole.data(), out_stride,
                                  false);
        EXPECT_EQ(hwhole, href) << IsaName(isa) << " bf16 dim " << dim << " queries " << queries;
      }
    }
  }
}

// The strided many-query dots: every ISA, fp32 and bf16 keys, gives for each (query, key) the bits of the
// one-query scalar dot times the scale, and writes nothing outside its out rows' first num_keys entries (query
// and key counts that leave every remainder of the register tiles, whole and partial tiles of 8 keys, and at
// the latent width more keys than one L1 chunk holds; dims with every tail length of both 8-lane halves of a
// 16-element chunk, and the latent width).
TEST(AttentionKernels, QueryKeyDotsRowsEqualOneQueryDots) {
  std::mt19937 rng(13);
  for (int64_t dim : {1, 5, 8, 9, 15, 16, 17, 24, 31, 33, 100, 576}) {
    for (int64_t queries : {1, 2, 3, 4, 5, 7, 8, 9, 17}) {
      for (int64_t nk : {1, 2, 3, 4, 5, 7, 8, 9, 16, 19, 33}) {
        const int64_t q_stride = dim + 3, out_stride = nk + 2;
        std::vector<float> q = Random(rng, queries * q_stride), store = Random(rng, nk * dim);
        std::vector<uint16_t> half(store.size());
        FloatToBf16(store.data(), half.data(), static_cast<int64_t>(store.size()));
        std::vector<float> widened(store.size());
        Bf16ToFloat(half.data(), widened.data(), static_cast<int64_t>(half.size()));
        std::vector<const float*> keys, wkeys;
        std::vector<const uint16_t*> hkeys;
        for (int64_t t = 0; t < nk; ++t) {
          keys.push_back(store.data() + t * dim);
          wkeys.push_back(widened.data() + t * dim);
          hkeys.push_back(half.data() + t * dim);
        }
        std::vector<float> ref(queries * out_stride, -7.0f), href(queries * out_stride, -7.0f);
        for (int64_t i = 0; i < queries; ++i) {
          for (int64_t t = 0; t < nk; ++t) {
            ref[i * out_stride + t] = DotF32WithIsa(Isa::kScalar, q.data() + i * q_stride, keys[t], dim) * 0.125f;
            href[i * out_stride + t] = DotF32WithIsa(Isa::kScalar, q.data() + i * q_stride, wkeys[t], dim) * 0.125f;
          }
        }
        for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
          if (!IsaSupported(isa)) continue;
          std::vector<float> dots(queries * out_stride, -7.0f), hdots(queries * out_stride, -7.0f);
          QueryKeyDotsRowsWithIsa(isa, q.data(), q_stride, queries, keys.data(), nk, dim, 0.125f, dots.data(),
                                  out_stride);
          QueryKeyDotsRowsWithIsa(isa, q.data(), q_stride, queries, hkeys.data(), nk, dim, 0.125f, hdots.data(),
                                  out_stride);
          EXPECT_EQ(dots, ref) << IsaName(isa) << " dim " << dim << " queries " << queries << " keys " << nk;
          EXPECT_EQ(hdots, href) << IsaName(isa) << " bf16 dim " << dim << " queries " << queries << " keys " << nk;
        }
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::kernels
