#include "sampling/params.h"

#include <cmath>

namespace deepinfer::sampling {
namespace {

Status Bad(const std::string& param, const std::string& message) {
  return Status::InvalidArgument(param + ": " + message);
}

bool InRange(double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; }

std::string Num(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

Status ValidateSamplingParams(const SamplingParams& p, int64_t vocab_size) {
  if (!InRange(p.temperature, 0, kMaxTemperature))
    return Bad("temperature", "must be in [0, " + Num(kMaxTemperature) + "], got " + Num(p.temperature));
  if (p.top_k < -1) return Bad("top_k", "must be -1, 0 (off) or positive, got " + std::to_string(p.top_k));
  if (!std::isfinite(p.top_p) || p.top_p <= 0 || p.top_p > 1)
    return Bad("top_p", "must be in (0, 1], got " + Num(p.top_p));
  if (!InRange(p.min_p, 0, 1)) return Bad("min_p", "must be in [0, 1], got " + Num(p.min_p));
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0 || p.repetition_penalty > 100)
    return Bad("repetition_penalty", "must be in (0, 100], got " + Num(p.repetition_penalty));
  if (!InRange(p.presence_penalty, -2, 2))
    return Bad("presence_penalty", "must be in [-2, 2], got " + Num(p.presence_penalty));
  if (!InRange(p.frequency_penalty, -2, 2))
    return Bad("frequency_penalty", "must be in [-2, 2], got " + Num(p.frequency_penalty));
  if (p.logit_bias.size() > kMaxLogitBias)
    return Bad("logit_bias", "at most " + std::to_string(kMaxLogitBias) + " entries");
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= vocab_size)
      return Bad("logit_bias", "token id " + std::to_string(id) + " is not in the vocabulary [0, " +
                                   std::to_string(vocab_size) + ")");
    if (!InRange(bias, -100, 100)) return Bad("logit_bias", "values must be in [-100, 100], got " + Num(bias));
  }
  if (p.max_tokens < 1) return Bad("max_tokens", "must be at least 1, got " + std::to_string(p.max_tokens));
  if (p.min_tokens < 0 || p.min_tokens > p.max_tokens)
    return Bad("min_tokens", "must be in [0, max_tokens], got " + std::to_string(p.min_tokens));
  if (p.stop_token_ids.size() > kMaxStopTokenIds)
    return Bad("stop_token_ids", "at most " + std::to_string(kMaxStopTokenIds) + " ids");
  for (int32_t id : p.stop_token_ids) {
    if (id < 0 || id >= vocab_size)
      return Bad("stop_token_ids", "token id " + std::to_string(id) + " is not in the vocabulary");
  }
  if (p.stop.size() > kMaxStopStrings) return Bad("stop", "at most " + std::to_string(kMaxStopStrings) + " strings");
  for (const std::string& s : p.stop) {
    if (s.size() > kMaxStopStringBytes)
      return Bad("stop", "each string at most " + std::to_string(kMaxStopStringBytes) + " bytes");
  }
  if (p.n < 1 || p.n > kMaxN)
    return Bad("n", "must be in [1, " + std::to_string(kMaxN) + "], got " + std::to_string(p.n));
  if (p.top_logprobs < 0 || p.top_logprobs > kMaxTopLogprobs)
    return Bad("top_logprobs", "must be in [0, " + std::to_string(kMaxTopLogprobs) + "], got " +
                                   std::to_string(p.top_logprobs));
  if (p.top_logprobs > 0 && !p.logprobs) return Bad("top_logprobs", "needs logprobs");
  return Status::Ok();
}

}  // namespace deepinfer::sampling
