#include <random>

#include <gtest/gtest.h>

#include "block_manager_driver.h"

namespace deepinfer::kvcache {
namespace {

TEST(BlockManagerProperty, RandomWorkloadsKeepEveryInvariantAndLeakNothing) {
  std::mt19937 rng(20261201);
  for (int run = 0; run < 300; ++run) {
    std::vector<uint8_t> bytes(4096);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    const Status s = test_support::RunBlockManagerOps(bytes.data(), bytes.size());
    ASSERT_TRUE(s.ok()) << "run " << run << ": " << s.message();
  }
}

}  // namespace
}  // namespace deepinfer::kvcache
