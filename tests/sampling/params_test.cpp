#include "sampling/params.h"

#include <cmath>
#include <functional>
#include <limits>

#include <gtest/gtest.h>

namespace deepinfer::sampling {
namespace {

constexpr int64_t kVocab = 1000;

void ExpectRejected(const std::function<void(SamplingParams&)>& change, const std::string& param) {
  SamplingParams p;
  change(p);
  const Status status = ValidateSamplingParams(p, kVocab);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << param;
  EXPECT_EQ(status.message().rfind(param + ":", 0), 0u) << status.message();
}

TEST(SamplingParams, DefaultsAreValid) { EXPECT_TRUE(ValidateSamplingParams({}, kVocab).ok()); }

TEST(SamplingParams, EdgesOfEachRangeAreAccepted) {
  SamplingParams p;
  p.temperature = 0;
  p.top_p = 1;
  p.top_k = -1;
  p.min_p = 1;
  p.presence_penalty = -2;
  p.frequency_penalty = 2;
  p.repetition_penalty = 100;
  p.logit_bias = {{0, -100}, {kVocab - 1, 100}};
  p.max_tokens = 1;
  p.min_tokens = 1;
  p.n = kMaxN;
  p.logprobs = true;
  p.top_logprobs = kMaxTopLogprobs;
  p.stop = {"", std::string(kMaxStopStringBytes, 'x')};
  EXPECT_TRUE(ValidateSamplingParams(p, kVocab).ok()) << ValidateSamplingParams(p, kVocab).message();
}

TEST(SamplingParams, OutOfRangeValuesNameTheirParameter) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ExpectRejected([](SamplingParams& p) { p.temperature = -0.1; }, "temperature");
  ExpectRejected([&](SamplingParams& p) { p.temperature = nan; }, "temperature");
  ExpectRejected([](SamplingParams& p) { p.temperature = 1e9; }, "temperature");
  ExpectRejected([](SamplingParams& p) { p.top_p = 0; }, "top_p");
  ExpectRejected([](SamplingParams& p) { p.top_p = 1.01; }, "top_p");
  ExpectRejected([&](SamplingParams& p) { p.top_p = nan; }, "top_p");
  ExpectRejected([](SamplingParams& p) { p.top_k = -2; }, "top_k");
  ExpectRejected([](SamplingParams& p) { p.min_p = 1.5; }, "min_p");
  ExpectRejected([](SamplingParams& p) { p.repetition_penalty = 0; }, "repetition_penalty");
  ExpectRejected([](SamplingParams& p) { p.presence_penalty = 2.5; }, "presence_penalty");
  ExpectRejected([](SamplingParams& p) { p.frequency_penalty = -3; }, "frequency_penalty");
  ExpectRejected([](SamplingParams& p) { p.logit_bias = {{kVocab, 1}}; }, "logit_bias");
  ExpectRejected([](SamplingParams& p) { p.logit_bias = {{-1, 1}}; }, "logit_bias");
  ExpectRejected([](SamplingParams& p) { p.logit_bias = {{5, 101}}; }, "logit_bias");
  ExpectRejected([](SamplingParams& p) { p.logit_bias.assign(kMaxLogitBias + 1, {1, 1.0f}); }, "logit_bias");
  ExpectRejected([](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens");
  ExpectRejected([](SamplingParams& p) { p.max_tokens = -5; }, "max_tokens");
  ExpectRejected([](SamplingParams& p) { p.min_tokens = 17; }, "min_tokens");
  ExpectRejected([](SamplingParams& p) { p.stop_token_ids = {kVocab}; }, "stop_token_ids");
  ExpectRejected([](SamplingParams& p) { p.stop.assign(kMaxStopStrings + 1, "x"); }, "stop");
  ExpectRejected([](SamplingParams& p) { p.stop = {std::string(kMaxStopStringBytes + 1, 'x')}; }, "stop");
  ExpectRejected([](SamplingParams& p) { p.n = 0; }, "n");
  ExpectRejected([](SamplingParams& p) { p.n = kMaxN + 1; }, "n");
  ExpectRejected([](SamplingParams& p) { p.top_logprobs = 21, p.logprobs = true; }, "top_logprobs");
  ExpectRejected([](SamplingParams& p) { p.top_logprobs = 2; }, "top_logprobs");  // without logprobs
}

}  // namespace
}  // namespace deepinfer::sampling
