#include "core/json.h"

#include <string>

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

std::string Nested(int depth, const std::string& open = "[", const std::string& close = "]") {
  std::string text;
  for (int i = 0; i < depth; ++i) text += open;
  text += "1";
  for (int i = 0; i < depth; ++i) text += close;
  return text;
}

TEST(Json, ParsesWhatNlohmannParses) {
  const std::string text = R"({"b": [1, -2, 3.5, true, null, "x\u00e9"], "a": {"c": {}}, "d": 18446744073709551615})";
  auto parsed = ParseJson(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, nlohmann::json::parse(text));
  auto ordered = ParseOrderedJson(text);
  ASSERT_TRUE(ordered.ok());
  EXPECT_EQ(*ordered, nlohmann::ordered_json::parse(text));
  EXPECT_EQ(ordered->begin().key(), "b");  // insertion order kept
}

TEST(Json, DepthLimitIsExact) {
  JsonLimits limits;
  limits.max_depth = 5;
  // Depth counts open containers: 5 brackets are allowed, 6 are not, for arrays and objects alike.
  EXPECT_TRUE(ParseJson(Nested(5), limits).ok());
  EXPECT_FALSE(ParseJson(Nested(6), limits).ok());
  EXPECT_TRUE(ParseJson(Nested(5, "{\"k\":", "}"), limits).ok());
  EXPECT_FALSE(ParseOrderedJson(Nested(6, "{\"k\":", "}"), limits).ok());
  EXPECT_TRUE(ParseJson("1", JsonLimits{16, 0}).ok());  // a scalar has depth 0
  EXPECT_FALSE(ParseJson("[]", JsonLimits{16, 0}).ok());
}

TEST(Json, HugeDepthIsAnErrorNotACrash) {
  // 1,000,000 levels: a recursive parser or a recursive destructor of a built value would overflow the
  // stack; here the parse stops at level 129 and reports it.
  auto parsed = ParseJson(Nested(1000000));
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "JSON nests deeper than 128 levels");
  EXPECT_FALSE(ParseOrderedJson(std::string(1000000, '[')).ok());
  EXPECT_EQ(JsonTextDepth(std::string(1000000, '['), 300), 301);  // stops just past the limit
}

TEST(Json, SizeLimitIsCheckedFirst) {
  JsonLimits limits;
  limits.max_bytes = 4;
  EXPECT_TRUE(ParseJson("[12]", limits).ok());
  auto parsed = ParseJson("[123]", limits);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("exceeds the limit of 4"), std::string::npos);
}

TEST(Json, MalformedInputGivesOneCleanLine) {
  for (const char* text : {"", "{", "[1,]", "{\"a\" 1}", "nul", "[1] 2", "\"\xff\"", "1e999", "{\"a\":\n\n}"}) {
    auto parsed = ParseJson(text);
    ASSERT_FALSE(parsed.ok()) << text;
    const std::string& m = parsed.status().message();
    EXPECT_EQ(m.rfind("invalid JSON", 0), 0u) << m;
    EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(Json, DuplicateKeysLastValueFirstPlace) {
  auto ordered = ParseOrderedJson(R"({"a": 1, "b": 2, "a": 3})");
  ASSERT_TRUE(ordered.ok());
  EXPECT_EQ(ordered->dump(), R"({"a":3,"b":2})");
  auto plain = ParseJson(R"({"a": 1, "a": 3})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->dump(), R"({"a":3})");
}

TEST(Json, WideObjectsParseInLinearTime) {
  // 200,000 members in one object: collecting members before building keeps this fast; a quadratic
  // builder would take minutes. The ctest timeout is the assertion's backstop, the count the check.
  std::string text = "{";
  for (int i = 0; i < 200000; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  text += "}";
  auto ordered = ParseOrderedJson(text);
  ASSERT_TRUE(ordered.ok());
  EXPECT_EQ(ordered->size(), 200000u);
  EXPECT_EQ((*ordered)["k199999"], 199999);
}

TEST(Json, DumpNeverThrowsOnInvalidUtf8) {
  nlohmann::json value = std::string("a\xff" "b");
  EXPECT_THROW((void)value.dump(), nlohmann::json::type_error);
  EXPECT_EQ(DumpJson(value), "\"a\xEF\xBF\xBD" "b\"");
}

TEST(Json, TextDepthIgnoresBracketsInStrings) {
  EXPECT_EQ(JsonTextDepth(R"(["[[[", {"a": "]]"}])", 10), 2);
  EXPECT_EQ(JsonTextDepth(R"("\"[[")", 10), 0);
}

}  // namespace
}  // namespace deepinfer
