// Rotary position embeddings as both DeepSeek families use them: the inverse-frequency table of a RoPE
// config (default or YaRN) and the cos/sin of one position. The rotation itself is kernels::ApplyRope on
// the trailing rope_dim channels of each head, interleaved.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer::model {

// One RoPE table: inverse frequencies over `dim` rotated channels, optionally YaRN-corrected.
struct RopeParams {
  double theta = 10000.0;
  bool yarn = false;
  double factor = 1.0;
  double original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

// Inverse frequencies (rope_dim / 2 of them) in fp32, computed as transformers does (default or YaRN with
// truncated correction range and attention factor 1).
std::vector<float> RopeInverseFrequencies(const RopeParams& params, int64_t rope_dim);

// cos/sin of one position for a rope table (inv_freq.size() entries each), as transformers computes them:
// angle = float(pos) · inv_freq in fp32.
void RopeAngles(const std::vector<float>& inv_freq, int64_t pos, float* cos, float* sin);

}  // namespace deepinfer::model
