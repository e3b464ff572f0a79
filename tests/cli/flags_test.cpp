#include "cli/flags.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace deepinfer::cli {
namespace {

using Args = std::vector<std::string>;

std::string Error(Flags& flags, const Args& args) {
  Status s = flags.Check(args);
  return s.ok() ? "" : s.message();
}

TEST(Flags, TypedValuesBothSpellings) {
  std::string model;
  int64_t steps = 8;
  double seconds = 0.3;
  bool stream = false;
  std::vector<int64_t> list;
  Flags flags("bench model");
  flags.Path("--model", &model).Int<int64_t>("--steps", &steps, 1, 100).Double("--seconds", &seconds, 0.001, 10);
  flags.Switch("--stream", &stream).IntList("--prompts", &list, 1, 4096);
  ASSERT_EQ(Error(flags, {"--model", "dir", "--steps=12", "--seconds", "2.5", "--stream", "--prompts", "512,4096"}), "");
  EXPECT_EQ(model, "dir");
  EXPECT_EQ(steps, 12);
  EXPECT_EQ(seconds, 2.5);
  EXPECT_TRUE(stream);
  EXPECT_EQ(list, (std::vector<int64_t>{512, 4096}));
  EXPECT_TRUE(flags.given("--steps"));
  EXPECT_FALSE(flags.given("--nothing"));
}

TEST(Flags, IntegerBoundsAreInclusiveAndExact) {
  int64_t v = 0;
  for (const auto& [text, ok] : std::vector<std::pair<std::string, bool>>{
           {"1", true}, {"100", true}, {"0", false}, {"101", false}, {"-1", false}, {"1.0", false}, {"", false},
           {" 5", false}, {"5x", false}, {"99999999999999999999", false}, {"+5", false}}) {
    Flags flags("t");
    flags.Int<int64_t>("--n", &v, 1, 100);
    EXPECT_EQ(flags.Check({"--n", text}).ok(), ok) << text;
  }
  Flags flags("t");
  flags.Int<int64_t>("--n", &v, 1, 100);
  EXPECT_EQ(Error(flags, {"--n", "0"}), "--n must be an integer in [1, 100] (got '0')");
}

TEST(Flags, UnsignedDoesNotWrap) {
  // init-model --seed -1 once became 2^64-1.
  uint64_t seed = 7;
  Flags flags("init-model");
  flags.Int<uint64_t>("--seed", &seed, 0, UINT64_MAX);
  EXPECT_FALSE(flags.Check({"--seed", "-1"}).ok());
  EXPECT_EQ(seed, 7u);
  EXPECT_TRUE(flags.Check({"--seed", "18446744073709551615"}).ok());
  EXPECT_EQ(seed, UINT64_MAX);
  EXPECT_FALSE(flags.Check({"--seed", "18446744073709551616"}).ok());
}

TEST(Flags, DoublesMustBeFinite) {
  double d = 0;
  for (const char* text : {"nan", "inf", "-inf", "1e400", "0x", "2.5e", "11"}) {
    Flags flags("t");
    flags.Double("--x", &d, 0, 10);
    EXPECT_FALSE(flags.Check({"--x", text}).ok()) << text;
  }
}

TEST(Flags, MissingUnknownAndRequired) {
  std::string model;
  bool b = false;
  Flags flags("generate");
  flags.Path("--model", &model).Required();
  flags.Switch("--stream", &b);
  EXPECT_EQ(Error(flags, {"--model"}), "--model needs a value");
  EXPECT_EQ(Error(flags, {"--bogus"}), "unknown option '--bogus'");
  EXPECT_EQ(Error(flags, {"--stream"}), "--model is required");
  EXPECT_EQ(Error(flags, {"--model", "m", "--stream=yes"}), "--stream takes no value");
  EXPECT_EQ(Error(flags, {"--model", ""}), "--model needs a non-empty path");
  EXPECT_EQ(Error(flags, {"--model", "m", "extra"}), "unexpected argument 'extra'");
}

TEST(Flags, ValuesMayStartWithADash) {
  std::vector<std::string> stops;
  Flags flags("parse");
  flags.Strings("--stop", &stops);
  ASSERT_EQ(Error(flags, {"--stop", "--", "--stop", "-x"}), "");
  EXPECT_EQ(stops, (std::vector<std::string>{"--", "-x"}));
}

TEST(Flags, InvalidUtf8IsAUsageError) {
  std::string prompt;
  std::vector<std::string> rest;
  Flags flags("generate");
  flags.String("--prompt", &prompt).Positionals("TEXT", &rest);
  EXPECT_EQ(Error(flags, {"--prompt", "a\xff"}), "--prompt is not valid UTF-8");
  EXPECT_EQ(Error(flags, {"\xc3"}), "TEXT is not valid UTF-8");
  EXPECT_EQ(Error(flags, {"--prompt=\xed\xa0\x80"}), "--prompt is not valid UTF-8");  // a surrogate
}

TEST(Flags, PositionalsCountAndDoubleDash) {
  std::vector<std::string> files;
  bool json = false;
  Flags flags("inspect");
  flags.Switch("--json", &json).Positionals("MODEL_DIR", &files, 1, 1);
  EXPECT_EQ(Error(flags, {}), "MODEL_DIR is required");
  EXPECT_EQ(Error(flags, {"a", "b"}), "more than one MODEL_DIR given");
  ASSERT_EQ(Error(flags, {"--", "--json"}), "");
  EXPECT_EQ(files, (std::vector<std::string>{"--json"}));
  EXPECT_FALSE(json);
  ASSERT_EQ(Error(flags, {"-"}), "");  // '-' (standard input) is a positional
}

TEST(Flags, ChoicesListTheirNames) {
  enum class P { kExact, kBf16 };
  P p = P::kExact;
  Flags flags("bench model");
  flags.Choice("--precision", &p, {{"exact", P::kExact}, {"bf16", P::kBf16}});
  EXPECT_EQ(Error(flags, {"--precision", "fp4"}), "--precision takes exact, bf16 (got 'fp4')");
  ASSERT_EQ(Error(flags, {"--precision", "bf16"}), "");
  EXPECT_EQ(p, P::kBf16);
}

TEST(Flags, ListsAreBounded) {
  std::vector<int64_t> list;
  Flags flags("t");
  flags.IntList("--m", &list, 1, 10, 3);
  EXPECT_TRUE(flags.Check({"--m", "1,2,3"}).ok());
  EXPECT_FALSE(flags.Check({"--m", "1,2,3,4"}).ok());
  EXPECT_FALSE(flags.Check({"--m", "1,,2"}).ok());
  EXPECT_FALSE(flags.Check({"--m", "1,11"}).ok());
  EXPECT_FALSE(flags.Check({"--m", ""}).ok());
}

TEST(Flags, BadValuesAreQuotedShortAndPrintable) {
  int64_t v = 0;
  Flags flags("t");
  flags.Int<int64_t>("--n", &v, 0, 1);
  const std::string message = Error(flags, {"--n", std::string(1000, 'x') + "\n"});
  EXPECT_LT(message.size(), 160u);
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

TEST(Flags, UsageLineFormat) {
  EXPECT_EQ(UsageLine("bench model", "--model is required"),
            "deepinfer bench model: --model is required (see 'deepinfer bench model --help')");
}

TEST(Flags, HumanBytesPicksTheLargestUnitKeepingOneOrMore) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1536), "1.50 KiB");               // 1536 / 1024
  EXPECT_EQ(HumanBytes(uint64_t{3} << 30), "3.00 GiB");  // 3 * 1024^3
  EXPECT_EQ(HumanBytes(uint64_t{2048} << 40), "2.00 PiB");  // 2048 TiB, past the last step only PiB remains
  EXPECT_EQ(HumanBytes(uint64_t{4096} << 50), "4096.00 PiB");  // PiB is the largest unit
}

}  // namespace
}  // namespace deepinfer::cli
