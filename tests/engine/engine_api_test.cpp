#include "engine/engine.h"

#include <gtest/gtest.h>

namespace deepinfer::engine {
namespace {

TEST(EngineApi, FinishReasonNamesAreTheProtocolWords) {
  EXPECT_EQ(FinishReasonName(FinishReason::kStop), "stop");
  EXPECT_EQ(FinishReasonName(FinishReason::kLength), "length");
  EXPECT_EQ(FinishReasonName(FinishReason::kAbort), "abort");
  EXPECT_EQ(FinishReasonName(FinishReason::kDeadline), "deadline");
  EXPECT_EQ(FinishReasonName(FinishReason::kError), "error");
}

}  // namespace
}  // namespace deepinfer::engine
