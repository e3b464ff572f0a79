// The probe's side of the quantizers and top-k selections (v41_probe.h): margins of each decision to its
// boundary, and a decision taken the other way by mirroring its input across the boundary.
#include <algorithm>
#include <cmath>
#include <mutex>

#include "kernels/elementwise.h"
#include "kernels/kv_quant.h"
#include "kernels/number_formats.h"
#include "model/deepseek_v41/v41_internal.h"

namespace deepinfer::model {

std::string V41Decision::ToString() const {
  static const char* kNames[] = {"window", "latent", "key", "query", "experts", "index-topk", "candidates"};
  return std::string(kNames[static_cast<int>(kind)]) + " layer " + std::to_string(layer) + " at " +
         std::to_string(position) + (scale ? " scale of " : " element ") + std::to_string(element) + " (margin " +
         std::to_string(margin) + ")";
}

namespace v41 {
namespace {

using kernels::KvQuant;
using kernels::kv_quant_internal::PowerOfTwoCeilExponent;
using kernels::kv_quant_internal::TorchFloatToE4M3;

std::mutex g_probe_mutex;

void Record(const Step& step, const V41Decision& d) {
  std::lock_guard<std::mutex> lock(g_probe_mutex);
  step.probe->near.push_back(d);
}

// The boundary of an E4M3 rounding nearest to t (t ≥ 0): the midpoint of the two grid values around it.
double E4m3Boundary(float t) {
  const uint8_t code = static_cast<uint8_t>(TorchFloatToE4M3(t) & 0x7F);
  const double v = kernels::Fp8E4M3ToFloat(code);
  const double lo = code > 0 ? kernels::Fp8E4M3ToFloat(static_cast<uint8_t>(code - 1)) : 0.0;
  const double hi = code < 0x7E ? kernels::Fp8E4M3ToFloat(static_cast<uint8_t>(code + 1)) : 480.0;
  const double m1 = (v + lo) / 2, m2 = (v + hi) / 2;
  return std::fabs(t - m1) < std::fabs(t - m2) ? m1 : m2;
}

double E2m1Boundary(float m) {
  static const double kMid[] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
  double best = kMid[0];
  for (double b : kMid)
    if (std::fabs(m - b) < std::fabs(m - best)) best = b;
  return best;
}

// Mirrors v across the boundary b (same sign), or steps one ulp past it when v sits on it.
float Mirror(float v, double b) {
  const float mag = std::fabs(v);
  float out = static_cast<float>(2 * b - mag);
  if (out == mag) out = mag <= b ? std::nextafter(static_cast<float>(b), INFINITY) : std::nextafter(static_cast<float>(b), 0.0f);
  return std::copysign(out, v);
}

// Probes (and flips) the decisions of one block of a quantized vector in place.
void ProbeBlock(const Step& step, V41DecisionKind kind, int64_t layer, int64_t position, KvQuant q, float* x,
                int64_t first, int64_t block) {
  const V41Probe& probe = *step.probe;
  float amax = 0;
  int64_t at = first;
  for (int64_t i = first; i < first + block; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[at = i]);
  if (!std::isfinite(amax)) return;
  // The scale decision.
  float t;
  double boundary;
  if (q == KvQuant::kFp4E4m3x16) {
    t = std::max(amax, 6.0f * 0x1p-9f) / 6.0f;
    boundary = E4m3Boundary(t);
  } else {
    t = q == KvQuant::kFp8Pow2x32 ? std::max(amax, 1e-4f) * static_cast<float>(1.0 / 448.0)
                                  : std::max(amax, 6.0f * 0x1p-126f) * static_cast<float>(1.0 / 6.0);
    const int k = PowerOfTwoCeilExponent(t);
    const double up = std::ldexp(1.0, k), down = std::ldexp(1.0, k - 1);
    boundary = (up - t) < (t - down) ? up : down;
  }
  // A block whose amax is below the quantizer's floor has a constant scale: no decision there.
  const float floor = q == KvQuant::kFp4E4m3x16 ? 6.0f * 0x1p-9f : q == KvQuant::kFp8Pow2x32 ? 1e-4f : 6.0f * 0x1p-126f;
  V41Decision d{kind, layer, position, at, true, amax > floor ? std::fabs(t - boundary) / t : 1.0};
  if (probe.IsFlipped(d) && amax > floor) {
    const float t2 = Mirror(t, boundary);
    x[at] *= t2 / t;
    return;  // one decision per block per pass: the flipped scale moves every value's rounding anyway
  }
  if (d.margin < probe.epsilon) Record(step, d);
  // The scale as the quantizer will compute it, then each value's rounding.
  float scale;
  if (q == KvQuant::kFp4E4m3x16) scale = kernels::Fp8E4M3ToFloat(TorchFloatToE4M3(t));
  else scale = std::ldexp(1.0f, PowerOfTwoCeilExponent(t));
  if (!(scale > 0) || !std::isfinite(scale)) return;
  const float limit = q == KvQuant::kFp8Pow2x32 ? 448.0f : 6.0f;
  // A value's fp32 noise is relative to the vector's magnitude (it comes from sums over many terms), not to
  // the value's own: margins are measured against the block's largest value.
  const double top = amax / scale;
  for (int64_t i = first; i < first + block; ++i) {
    const float v = x[i] / scale;
    const float m = std::fabs(v);
    if (m == 0 || m >= limit || !(top > 0)) continue;
    const double b = q == KvQuant::kFp8Pow2x32 ? E4m3Boundary(m) : E2m1Boundary(m);
    V41Decision e{kind, layer, position, i, false, std::fabs(m - b) / top};
    if (probe.IsFlipped(e)) {
      x[i] = Mirror(v, b) * scale;
    } else if (e.margin < probe.epsilon) {
      Record(step, e);
    }
  }
}

void Probe(const Step& step, V41DecisionKind kind, int64_t layer, int64_t position, KvQuant q, float* x, int64_t n) {
  if (kernels::EffectiveKvQuant(q, n) == KvQuant::kNone) return;
  const int64_t block = kernels::KvQuantBlock(q);
  for (int64_t b = 0; b < n; b += block) ProbeBlock(step, kind, layer, position, q, x, b, block);
}

}  // namespace

void QuantizeProbed(const Step& step, V41DecisionKind kind, int64_t layer, int64_t position, KvQuant q, float* x,
                    int64_t n, uint8_t* out) {
  if (step.probe) Probe(step, kind, layer, position, q, x, n);
  kernels::KvQuantize(q, x, n, out);
}

void FakeQuantizeProbed(const Step& step, V41DecisionKind kind, int64_t layer, int64_t position, KvQuant q, float* x,
                        int64_t n) {
  if (step.probe) Probe(step, kind, layer, position, q, x, n);
  kernels::KvFakeQuantize(q, x, n, x);
}

void TopKProbed(const Step& step, V41DecisionKind kind, int64_t layer, int64_t position, const float* scores, int64_t n,
                int64_t k, int32_t* chosen, int32_t exclude) {
  if (!step.probe || k >= n) {
    kernels::TopK(scores, n, k, chosen, nullptr);
    return;
  }
  std::vector<int32_t> more(static_cast<size_t>(k + 1));
  kernels::TopK(scores, n, k + 1, more.data(), nullptr);
  std::copy(more.begin(), more.begin() + k, chosen);
  const float a = scores[more[k - 1]], b = scores[more[k]];
  if (!std::isfinite(a) || !std::isfinite(b) || more[k - 1] == exclude) return;
  V41Decision d{kind, layer, position, 0, false, (a - b) / std::max({std::fabs(a), std::fabs(b), 1e-30f})};
  if (step.probe->IsFlipped(d)) chosen[k - 1] = more[k];
  else if (d.margin < step.probe->epsilon) Record(step, d);
}

}  // namespace v41
}  // namespace deepinfer::model
