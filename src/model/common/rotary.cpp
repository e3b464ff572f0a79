#include "model/common/rotary.h"

#include <algorithm>
#include <cmath>

namespace deepinfer::model {

std::vector<float> RopeInverseFrequencies(const RopeParams& p, int64_t rope_dim) {
  const int64_t half = rope_dim / 2;
  std::vector<float> pos_freqs(half), out(half);
  const float base = static_cast<float>(p.theta);
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rope_dim);
    pos_freqs[i] = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
  }
  if (!p.yarn) {
    for (int64_t i = 0; i < half; ++i) out[i] = 1.0f / pos_freqs[i];
    return out;
  }
  auto correction_dim = [&](double rotations) {
    return rope_dim * std::log(p.original_max_position_embeddings / (rotations * 2 * M_PI)) / (2 * std::log(p.theta));
  };
  double low = std::max(std::floor(correction_dim(p.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(p.beta_slow)), static_cast<double>(rope_dim - 1));
  if (low == high) high += 0.001;
  const float factor = static_cast<float>(p.factor);
  for (int64_t i = 0; i < half; ++i) {
    float ramp = (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low);
    ramp = std::min(std::max(ramp, 0.0f), 1.0f);
    const float extrapolation = 1.0f - ramp;
    const float inv_extrapolation = 1.0f / pos_freqs[i];
    const float inv_interpolation = 1.0f / (factor * pos_freqs[i]);
    out[i] = inv_interpolation * (1.0f - extrapolation) + inv_extrapolation * extrapolation;
  }
  return out;
}

void RopeAngles(const std::vector<float>& inv_freq, int64_t pos, float* cos, float* sin) {
  const float p = static_cast<float>(pos);
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float angle = p * inv_freq[i];
    cos[i] = std::cos(angle);
    sin[i] = std::sin(angle);
  }
}

}  // namespace deepinfer::model
