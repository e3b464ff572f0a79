#include "core/py_json.h"

#include <gtest/gtest.h>

#include <cstring>

#include "test_data.h"

namespace deepinfer {
namespace {

// Golden outputs from tools/core/gen_py_json_corpus.py: Python's json.dumps under five option sets, and
// repr() of random doubles.
TEST(PyJson, MatchesPythonJsonDumpsOnCorpus) {
  auto lines = test_support::ReadLines(test_support::SourcePath("tests/core/data/py_json_corpus.jsonl"));
  ASSERT_GT(lines.size(), 1000u);
  const std::map<std::string, PyJsonOptions> options = {
      {"default", PyJsonOptions::Default()},
      {"ascii", {true, false, -1, ", ", ": "}},
      {"indent2", PyJsonOptions::Indented(2)},
      {"sorted", {false, true, -1, ", ", ": "}},
      {"compact", PyJsonOptions::Compact()},
  };
  int values = 0, floats = 0;
  for (const auto& line : lines) {
    auto c = nlohmann::json::parse(line);
    if (c.contains("float_bits")) {
      uint64_t bits = std::stoull(c["float_bits"].get<std::string>(), nullptr, 16);
      double x;
      std::memcpy(&x, &bits, sizeof x);
      EXPECT_EQ(PyFloatRepr(x), c["repr"].get<std::string>()) << c["float_bits"];
      ++floats;
      continue;
    }
    auto value = nlohmann::ordered_json::parse(c["input"].get<std::string>());
    for (auto& [name, expected] : c["outputs"].items()) {
      ASSERT_TRUE(options.count(name)) << name;
      EXPECT_EQ(PyJsonDumps(value, options.at(name)), expected.get<std::string>()) << name << " " << c["input"];
    }
    ++values;
  }
  EXPECT_GT(values, 100);
  EXPECT_GT(floats, 100);
}

// Hand-derived from Python's rules: repr switches to exponent form at 1e16 and below 1e-4.
TEST(PyJson, FloatReprBoundaries) {
  EXPECT_EQ(PyFloatRepr(1e16), "1e+16");
  EXPECT_EQ(PyFloatRepr(1e15), "1000000000000000.0");
  EXPECT_EQ(PyFloatRepr(0.0001), "0.0001");
  EXPECT_EQ(PyFloatRepr(0.00001), "1e-05");
  EXPECT_EQ(PyFloatRepr(-0.0), "-0.0");
  EXPECT_EQ(PyFloatRepr(1.5), "1.5");
  nlohmann::ordered_json special = {std::nan(""), INFINITY, -INFINITY};
  EXPECT_EQ(PyJsonDumps(special), "[NaN, Infinity, -Infinity]");
}

TEST(PyJson, StringEscapes) {
  EXPECT_EQ(PyJsonString("a\"b\\c\n\t\x01\x7f\u00e9"), "\"a\\\"b\\\\c\\n\\t\\u0001\x7f\u00e9\"");
  EXPECT_EQ(PyJsonString("\u00e9\U0001F600", /*ensure_ascii=*/true), "\"\\u00e9\\ud83d\\ude00\"");
}

}  // namespace
}  // namespace deepinfer
