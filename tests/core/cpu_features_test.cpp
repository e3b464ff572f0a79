#include "core/cpu_features.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

namespace deepinfer {
namespace {

// The kernel's own view of the CPU (/proc/cpuinfo) must agree with our cpuid detection.
TEST(CpuFeatures, AgreesWithProcCpuinfo) {
  if (std::getenv("DEEPINFER_ISA") != nullptr) GTEST_SKIP() << "DEEPINFER_ISA caps the detection";
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      for (std::string w; words >> w;) flags.insert(w);
      break;
    }
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags";
  auto has = [&](const char* f) { return flags.count(f) > 0; };
  const CpuFeatures& cpu = GetCpuFeatures();
  EXPECT_EQ(cpu.avx2, has("avx2"));
  EXPECT_EQ(cpu.fma, has("fma"));
  EXPECT_EQ(cpu.avx512f, has("avx512f"));
  EXPECT_EQ(cpu.avx512bw, has("avx512bw"));
  EXPECT_EQ(cpu.avx512_bf16, has("avx512_bf16"));
  EXPECT_EQ(cpu.avx512_vnni, has("avx512_vnni"));
  EXPECT_FALSE(cpu.best_isa().empty());
}

}  // namespace
}  // namespace deepinfer
