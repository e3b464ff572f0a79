#include "sampling/stop_strings.h"

#include <gtest/gtest.h>

namespace deepinfer::sampling {
namespace {

// Feeds the pieces and returns everything released, and whether/which stop matched.
std::pair<std::string, std::string> FeedAll(StopStringMatcher& m, const std::vector<std::string>& pieces) {
  std::string out, matched;
  for (const std::string& piece : pieces) {
    StopStringMatcher::Step step = m.Feed(piece);
    out += step.release;
    if (step.stopped) matched = step.matched;
  }
  if (matched.empty()) out += m.Flush();
  return {out, matched};
}

TEST(StopStrings, MatchAcrossPiecesAndCutBeforeTheStop) {
  StopStringMatcher m({"END"}, false);
  EXPECT_EQ(FeedAll(m, {"hello E", "N", "D and more"}), (std::pair<std::string, std::string>{"hello ", "END"}));
}

TEST(StopStrings, IncludeStopKeepsIt) {
  StopStringMatcher m({"END"}, true);
  EXPECT_EQ(FeedAll(m, {"ab", "cEN", "Dx"}).first, "abcEND");
}

TEST(StopStrings, HoldsBackOnlyWhatCouldStartAStop) {
  StopStringMatcher m({"<stop>"}, false);
  EXPECT_EQ(m.Feed("abc<st").release, "abc");
  EXPECT_EQ(m.held_bytes(), 3u);
  // "<stx" is no stop: everything up to the last '<'-free point is released.
  EXPECT_EQ(m.Feed("x<").release, "<stx");
  EXPECT_EQ(m.Flush(), "<");
}

TEST(StopStrings, EarliestMatchWins) {
  StopStringMatcher m({"world", "lo w"}, false);
  EXPECT_EQ(FeedAll(m, {"hello world"}), (std::pair<std::string, std::string>{"hel", "lo w"}));
}

TEST(StopStrings, NoStopsPassEverythingThrough) {
  StopStringMatcher m({"", ""}, false);
  EXPECT_FALSE(m.active());
  EXPECT_EQ(m.Feed("E").release, "E");
}

TEST(StopStrings, NothingAfterAStop) {
  StopStringMatcher m({"x"}, false);
  EXPECT_TRUE(m.Feed("ax").stopped);
  StopStringMatcher::Step after = m.Feed("more");
  EXPECT_FALSE(after.stopped);
  EXPECT_EQ(after.release, "");
}

TEST(StopStrings, PropertyReleasedTextIsThePrefixBeforeTheFirstStop) {
  // Random texts over a small alphabet, cut into random pieces: the released text equals the text before
  // the first occurrence of any stop (or all of it), whatever the cuts.
  const std::vector<std::string> stops = {"aba", "bb", "cab"};
  uint32_t state = 1;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const int len = static_cast<int>(next() >> 28) + 1;
    for (int i = 0; i < len; ++i) text += "abc"[(next() >> 16) % 3];
    size_t first = std::string::npos;
    for (const std::string& s : stops) first = std::min(first, text.find(s));
    const std::string expected = first == std::string::npos ? text : text.substr(0, first);
    std::vector<std::string> pieces;
    for (size_t at = 0; at < text.size();) {
      const size_t n = std::min<size_t>(text.size() - at, (next() >> 29) + 1);
      pieces.push_back(text.substr(at, n));
      at += n;
    }
    StopStringMatcher m(stops, false);
    ASSERT_EQ(FeedAll(m, pieces).first, expected) << text;
  }
}

}  // namespace
}  // namespace deepinfer::sampling
