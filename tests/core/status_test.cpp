#include "core/status.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

Result<int> ParsePositive(int x) {
  if (x <= 0) return Status::InvalidArgument("not positive: " + std::to_string(x));
  return x;
}

Result<int> Doubled(int x) {
  DI_ASSIGN_OR_RETURN(int v, ParsePositive(x));
  return v * 2;
}

Status Check(int x) {
  DI_RETURN_IF_ERROR(ParsePositive(x).status());
  return Status::Ok();
}

TEST(Status, OkAndErrors) {
  EXPECT_TRUE(Status().ok());
  Status s = Status::NotFound("tensor 'x'");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NOT_FOUND: tensor 'x'");
  EXPECT_EQ(s.WithContext("model.safetensors").message(), "model.safetensors: tensor 'x'");
  EXPECT_EQ(s.WithContext("f").code(), StatusCode::kNotFound);
  EXPECT_TRUE(Status::Ok().WithContext("f").ok());
}

TEST(Result, PropagatesValuesAndErrors) {
  auto good = Doubled(21);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 42);
  auto bad = Doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "not positive: -1");
  EXPECT_TRUE(Check(3).ok());
  EXPECT_FALSE(Check(0).ok());
  EXPECT_TRUE(good.status().ok());
}

TEST(Result, MoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

}  // namespace
}  // namespace deepinfer
