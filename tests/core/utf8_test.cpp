#include "core/utf8.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>

#include "test_data.h"

namespace deepinfer {
namespace {

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// Golden cases from tools/core/gen_utf8_corpus.py (Python's strict and errors="replace" decoding).
TEST(Utf8, AgreesWithPythonOnCorpus) {
  auto lines = test_support::ReadLines(test_support::SourcePath("tests/core/data/utf8_corpus.jsonl"));
  ASSERT_GT(lines.size(), 1000u);
  for (const auto& line : lines) {
    auto c = nlohmann::json::parse(line);
    const std::string bytes = FromHex(c["hex"]);
    EXPECT_EQ(utf8::IsValid(bytes), c["valid"].get<bool>()) << c["hex"];
    EXPECT_EQ(utf8::ToValidLossy(bytes), FromHex(c["lossy_hex"])) << c["hex"];
    EXPECT_TRUE(utf8::IsValid(utf8::ToValidLossy(bytes)));
  }
}

TEST(Utf8, DecodeEncodeRoundTripsEveryScalarValue) {
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s = utf8::Encode(cp);
    char32_t back;
    ASSERT_EQ(utf8::Decode(s, 0, &back), s.size());
    ASSERT_EQ(back, cp);
  }
  char32_t cp;
  EXPECT_EQ(utf8::Decode("\xed\xa0\x80", 0, &cp), 0u);  // a surrogate is not a scalar value
  EXPECT_EQ(cp, utf8::kReplacementChar);
}

// Property: cutting a valid string anywhere leaves exactly the cut character's leading bytes as the tail.
TEST(Utf8, IncompleteTailOfEveryPrefix) {
  const std::string text = "a\u00e9\u4e2d\U0001F600z\U0010FFFF";
  size_t char_start = 0;
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    char32_t cp;
    if (cut < text.size() && utf8::Decode(text, cut, &cp) > 0) char_start = cut;
    const std::string prefix = text.substr(0, cut);
    size_t expected = 0;
    if (cut < text.size() && char_start < cut) expected = cut - char_start;
    EXPECT_EQ(utf8::IncompleteTailLength(prefix), expected) << "cut=" << cut;
    EXPECT_TRUE(utf8::IsValid(prefix.substr(0, prefix.size() - expected)));
  }
  EXPECT_EQ(utf8::IncompleteTailLength("\xff"), 0u);          // never valid: not held back
  EXPECT_EQ(utf8::IncompleteTailLength("\xe0\x80"), 0u);      // overlong prefix: already invalid
  EXPECT_EQ(utf8::IncompleteTailLength("\xf0\x9f\x98"), 3u);  // a 4-byte emoji missing its last byte
}

TEST(Utf8, IteratorCountsInvalidBytesOneByOne) {
  utf8::CodePointIterator it("a\xff\xe4\xb8\xad");
  std::vector<char32_t> cps;
  char32_t cp;
  size_t off, len;
  while (it.Next(&cp, &off, &len)) cps.push_back(cp);
  EXPECT_EQ(cps, (std::vector<char32_t>{U'a', utf8::kReplacementChar, U'\u4e2d'}));
  EXPECT_EQ(utf8::CountCodePoints("a\xff\xe4\xb8\xad"), 3u);
}

TEST(Utf8, RandomBytesNeverBreakInvariants) {
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 9, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    const size_t bad = utf8::FindInvalid(s);
    EXPECT_EQ(bad == s.size(), utf8::IsValid(s));
    EXPECT_TRUE(utf8::IsValid(s.substr(0, bad)));
    EXPECT_LE(utf8::IncompleteTailLength(s), 3u);
  }
}

}  // namespace
}  // namespace deepinfer
