#include "core/log.h"

#include <gtest/gtest.h>

#include <vector>

namespace deepinfer {
namespace {

std::vector<std::string>* g_lines = nullptr;
void Capture(std::string_view line) { g_lines->emplace_back(line); }

TEST(Log, LevelsAndFields) {
  std::vector<std::string> lines;
  g_lines = &lines;
  SetLogSink(Capture);
  const LogLevel saved = GetLogLevel();
  SetLogLevel(LogLevel::kInfo);
  DI_LOG(kDebug, "hidden").Field("x", 1);
  DI_LOG(kInfo, "loaded").Field("tensors", 42).Field("path", "/m dir").Field("ok", true);
  DI_LOG(kError, "failed").Field("why", "a \"quote\"\n");
  SetLogLevel(saved);
  SetLogSink(nullptr);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find(" INFO loaded tensors=42 path=\"/m dir\" ok=true"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find(" ERROR failed why=\"a \\\"quote\\\"\\n\""), std::string::npos) << lines[1];
  LogLevel parsed;
  EXPECT_TRUE(ParseLogLevel("warn", &parsed));
  EXPECT_EQ(parsed, LogLevel::kWarn);
  EXPECT_FALSE(ParseLogLevel("loud", &parsed));
}

}  // namespace
}  // namespace deepinfer
