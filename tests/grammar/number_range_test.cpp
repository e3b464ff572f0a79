// Integer ranges of the JSON CompileRangeSchema front end (json_schema_number.cpp): the digit-by-digit decomposition
// of [minimum, maximum] must accept exactly the canonical decimals of the integers in range, and stay
// small for long bounds (a 16-digit range once made 2^16 alternatives). Small ranges are checked against
// the bounds by brute force over every integer near them; long bounds by hand and by random numbers near
// the bounds, compared as 64-bit integers.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "grammar/compiler.h"
#include "grammar/constraint.h"

namespace deepinfer::grammar {
namespace {

struct Built {
  size_t exprs = 0;
  CompiledGrammar compiled;
};

Built CompileRangeSchema(const std::string& text) {
  ConstraintSpec spec;
  spec.text = text;
  auto g = BuildGrammar(spec);
  EXPECT_TRUE(g.ok()) << text << ": " << g.status().ToString();
  Built b;
  if (!g.ok()) return b;
  b.exprs = g->num_exprs();
  auto c = Compile(*g);
  EXPECT_TRUE(c.ok()) << text << ": " << c.status().ToString();
  if (c.ok()) b.compiled = std::move(*c);
  return b;
}

// A number schema compiles to one automaton without calls: running it byte by byte is Matches() without
// the stack bookkeeping, fast enough for a million strings (Matches itself is checked on a sample).
bool RunDfa(const CompiledGrammar& g, const std::string& s) {
  uint32_t st = g.start();
  for (char c : s) {
    st = g.Next(st, static_cast<uint8_t>(c));
    if (st == CompiledGrammar::kDead) return false;
  }
  return g.accepting(st);
}

TEST(NumberRange, SmallIntegerRangesAgreeWithBruteForce) {
  // Bounds of one to four digits, on both sides of zero, equal and crossing at digit-count changes.
  const int64_t bounds[] = {-1000, -999, -101, -100, -99, -10, -9, -1, 0, 1, 9, 10, 11, 99, 100, 109, 190, 999, 1000, 1234};
  size_t checked = 0;
  for (int64_t lo : bounds) {
    for (int64_t hi : bounds) {
      if (hi < lo) continue;
      for (bool excl : {false, true}) {
        const std::string schema = excl ? "{\"type\":\"integer\",\"exclusiveMinimum\":" + std::to_string(lo) +
                                              ",\"exclusiveMaximum\":" + std::to_string(hi) + "}"
                                        : "{\"type\":\"integer\",\"minimum\":" + std::to_string(lo) +
                                              ",\"maximum\":" + std::to_string(hi) + "}";
        const int64_t a = excl ? lo + 1 : lo, b = excl ? hi - 1 : hi;
        if (a > b) continue;  // an empty range is an error, not a language
        Built built = CompileRangeSchema(schema);
        ASSERT_EQ(built.compiled.num_call_edges(), 0u) << schema;
        for (int64_t v = -1300; v <= 1300; ++v) {
          const std::string text = std::to_string(v);
          EXPECT_EQ(RunDfa(built.compiled, text), v >= a && v <= b) << schema << " on " << v;
          if (v % 97 == 0) {
            EXPECT_EQ(built.compiled.Matches(text), v >= a && v <= b) << schema << " on " << v;
          }
          ++checked;
        }
        // Non-canonical spellings of in-range values are never accepted.
        std::string padded(1, '0');  // appended piecewise: GCC 12 warns, wrongly, on "0" + std::to_string()
        padded += std::to_string(a < 0 ? -a : a);
        EXPECT_FALSE(built.compiled.Matches(padded)) << schema;
        EXPECT_FALSE(built.compiled.Matches("-0")) << schema;
        EXPECT_FALSE(built.compiled.Matches("")) << schema;
      }
    }
  }
  EXPECT_GT(checked, 100000u);
}

TEST(NumberRange, LongBoundsStaySmallAndExact) {
  struct Case {
    uint64_t lo, hi;
  };
  // sp_418's bounds (16 digits, 0..2^53-1), a range inside one digit count, and ranges whose bounds
  // differ in every digit (all below 2^53: the schema's numbers are doubles).
  for (const Case& c : {Case{0, 9007199254740991ULL}, Case{1000000000000000ULL, 8999999999999999ULL},
                        Case{1234567890123456ULL, 8765432109876543ULL}, Case{5, 987654321098765ULL},
                        Case{999999999999999ULL, 1000000000000001ULL}}) {
    const std::string schema =
        "{\"type\":\"integer\",\"minimum\":" + std::to_string(c.lo) + ",\"maximum\":" + std::to_string(c.hi) + "}";
    Built b = CompileRangeSchema(schema);
    // One chain of alternatives per bound and digit count: a few thousand nodes at most (2^16 before).
    EXPECT_LT(b.exprs, 3000u) << schema;
    EXPECT_TRUE(b.compiled.Matches(std::to_string(c.lo))) << schema;
    EXPECT_TRUE(b.compiled.Matches(std::to_string(c.hi))) << schema;
    EXPECT_FALSE(b.compiled.Matches(std::to_string(c.hi + 1))) << schema;
    if (c.lo > 0) {
      EXPECT_FALSE(b.compiled.Matches(std::to_string(c.lo - 1))) << schema;
    }
    // Random numbers near the bounds: the bounds with a few digits changed, and their lengths +-1.
    std::mt19937_64 rng(c.lo ^ c.hi);
    size_t yes = 0, no = 0;
    for (int i = 0; i < 400; ++i) {
      std::string s = std::to_string(rng() % 2 ? c.lo : c.hi);
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < edits; ++k) s[rng() % s.size()] = static_cast<char>('0' + rng() % 10);
      if (rng() % 4 == 0) s += static_cast<char>('0' + rng() % 10);
      if (rng() % 4 == 0 && s.size() > 1) s.pop_back();
      while (s.size() > 1 && s[0] == '0') s.erase(0, 1);
      const uint64_t v = std::stoull(s);  // at most 18 digits: fits
      const bool want = v >= c.lo && v <= c.hi;
      (want ? yes : no) += 1;
      EXPECT_EQ(b.compiled.Matches(s), want) << schema << " on " << s;
    }
    EXPECT_GT(yes, 0u) << schema;
    EXPECT_GT(no, 0u) << schema;
  }
}

}  // namespace
}  // namespace deepinfer::grammar
