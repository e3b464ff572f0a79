#include "model/common/seeded_checkpoint.h"

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/number_formats.h"

namespace deepinfer::model::seeded_checkpoint {
namespace {

uint8_t E8M0Ceil(float magnitude) {
  if (!(magnitude > 0)) return 0;
  int exp;
  const float f = std::frexp(magnitude, &exp);  // magnitude = f · 2^exp, f in [0.5, 1)
  const int ceil_log2 = f == 0.5f ? exp - 1 : exp;
  return static_cast<uint8_t>(std::clamp(ceil_log2 + 127, 0, 254));
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

}  // namespace

uint64_t SplitMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t HashName(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// Fixed chunks, each with its own stream, so the values do not depend on the thread count.
std::vector<float> RandomValues(uint64_t seed, const std::string& name, int64_t n, float mean, float std) {
  std::vector<float> out(static_cast<size_t>(n));
  const uint64_t base = SplitMix(seed ^ HashName(name));
  const float a = std::sqrt(3.0f) * std;
  constexpr int64_t kChunk = 1 << 16;
  ThreadPool::Shared().ParallelFor((n + kChunk - 1) / kChunk, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      uint64_t state = SplitMix(base + static_cast<uint64_t>(c));
      for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
        state = SplitMix(state);
        const float u = static_cast<float>(state >> 40) * (1.0f / 16777216.0f);  // [0, 1)
        out[i] = mean + a * (2.0f * u - 1.0f);
      }
    }
  }, 1);
  return out;
}

void Shard::Add(const std::string& name, DType dtype, std::vector<int64_t> shape, std::string bytes) {
  tensors_.push_back({name, dtype, std::move(shape), std::move(bytes)});
}

void Shard::F32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values) {
  Add(name, DType::kF32, std::move(shape), Bytes(values));
}

void Shard::Bf16(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values) {
  std::vector<uint16_t> b(values.size());
  kernels::FloatToBf16(values.data(), b.data(), static_cast<int64_t>(values.size()));
  Add(name, DType::kBF16, std::move(shape), Bytes(b));
}

void Shard::I32(const std::string& name, std::vector<int64_t> shape, const std::vector<int32_t>& values) {
  Add(name, DType::kI32, std::move(shape), Bytes(values));
}

void Shard::Fp8(const std::string& prefix, const std::vector<float>& w, int64_t out, int64_t in, int64_t bo,
                int64_t bi) {
  const int64_t ro = (out + bo - 1) / bo, ri = (in + bi - 1) / bi;
  std::vector<uint8_t> q(static_cast<size_t>(out * in)), scales(static_cast<size_t>(ro * ri));
  ThreadPool::Shared().ParallelFor(ro, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t c = 0; c < ri; ++c) {
        float amax = 0;
        for (int64_t i = r * bo; i < std::min(out, (r + 1) * bo); ++i)
          for (int64_t k = c * bi; k < std::min(in, (c + 1) * bi); ++k) amax = std::max(amax, std::fabs(w[i * in + k]));
        const uint8_t e = E8M0Ceil(amax / 448.0f);
        scales[r * ri + c] = e;
        const float inv = 1.0f / kernels::E8M0ToFloat(e);
        for (int64_t i = r * bo; i < std::min(out, (r + 1) * bo); ++i)
          for (int64_t k = c * bi; k < std::min(in, (c + 1) * bi); ++k)
            q[i * in + k] = kernels::FloatToFp8E4M3(w[i * in + k] * inv);
      }
    }
  }, 1);
  Add(prefix + ".weight", DType::kF8_E4M3, {out, in}, Bytes(q));
  Add(prefix + ".scale", DType::kF8_E8M0, {ro, ri}, Bytes(scales));
}

void Shard::Fp8ScaleInv(const std::string& prefix, const std::vector<float>& w, int64_t out, int64_t in, int64_t bo,
                        int64_t bi) {
  const int64_t ro = (out + bo - 1) / bo, ri = (in + bi - 1) / bi;
  std::vector<uint8_t> q(static_cast<size_t>(out * in));
  std::vector<float> scales(static_cast<size_t>(ro * ri));
  ThreadPool::Shared().ParallelFor(ro, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t c = 0; c < ri; ++c) {
        float amax = 0;
        for (int64_t i = r * bo; i < std::min(out, (r + 1) * bo); ++i)
          for (int64_t k = c * bi; k < std::min(in, (c + 1) * bi); ++k) amax = std::max(amax, std::fabs(w[i * in + k]));
        const float scale = amax > 0 ? amax / 448.0f : 1.0f;
        scales[r * ri + c] = scale;
        for (int64_t i = r * bo; i < std::min(out, (r + 1) * bo); ++i)
          for (int64_t k = c * bi; k < std::min(in, (c + 1) * bi); ++k)
            q[i * in + k] = kernels::FloatToFp8E4M3(w[i * in + k] / scale);
      }
    }
  }, 1);
  Add(prefix + ".weight", DType::kF8_E4M3, {out, in}, Bytes(q));
  F32(prefix + ".weight_scale_inv", {ro, ri}, scales);
}

void Shard::Fp4(const std::string& prefix, const std::vector<float>& w, int64_t out, int64_t in) {
  std::vector<uint8_t> q(static_cast<size_t>(out * in / 2)), scales(static_cast<size_t>(out * in / 32));
  ThreadPool::Shared().ParallelFor(out, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t g = 0; g < in / 32; ++g) {
        const float* x = w.data() + i * in + g * 32;
        float amax = 0;
        for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(x[k]));
        const uint8_t e = E8M0Ceil(amax / 6.0f);
        scales[i * (in / 32) + g] = e;
        const float inv = 1.0f / kernels::E8M0ToFloat(e);
        for (int k = 0; k < 32; k += 2) {
          const uint8_t lo = kernels::FloatToE2M1(x[k] * inv), hi = kernels::FloatToE2M1(x[k + 1] * inv);
          q[(i * in + g * 32 + k) / 2] = static_cast<uint8_t>(lo | (hi << 4));
        }
      }
    }
  }, 1);
  Add(prefix + ".weight", DType::kI8, {out, in / 2}, Bytes(q));
  Add(prefix + ".scale", DType::kF8_E8M0, {out, in / 32}, Bytes(scales));
}

Status Shard::Write(const std::string& path, std::map<std::string, std::string>* weight_map, const std::string& file,
                    uint64_t* total_bytes) {
  std::vector<TensorToWrite> views;
  for (const Owned& t : tensors_) {
    views.push_back({t.name, t.dtype, t.shape, t.bytes});
    (*weight_map)[t.name] = file;
    *total_bytes += t.bytes.size();
  }
  DI_RETURN_IF_ERROR(WriteSafetensors(path, views, {{"format", "pt"}}));
  tensors_.clear();
  return Status::Ok();
}

}  // namespace deepinfer::model::seeded_checkpoint
