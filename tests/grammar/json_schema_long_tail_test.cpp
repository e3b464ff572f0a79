// JSON Schema keywords of the benchmark's long tail: `integer` as integer literals only. Expected verdicts
// are derived by hand from the standard, the reasoning in each comment.
#include <gtest/gtest.h>

#include "grammar/compiler.h"
#include "grammar/json_schema.h"

namespace deepinfer::grammar {
namespace {

struct LongTailCase {
  std::string schema;
  std::vector<std::string> yes, no;
};

void CheckLongTailCase(const LongTailCase& c) {
  auto g = JsonSchemaToGrammar(c.schema);
  ASSERT_TRUE(g.ok()) << c.schema << ": " << g.status().ToString();
  auto cg = Compile(*g);
  ASSERT_TRUE(cg.ok()) << c.schema << ": " << cg.status().ToString();
  for (const auto& s : c.yes) EXPECT_TRUE(cg->Matches(s)) << c.schema << " should accept " << s;
  for (const auto& s : c.no) EXPECT_FALSE(cg->Matches(s)) << c.schema << " should reject " << s;
}

TEST(JsonSchemaIntegers, IntegerLiteralsOnly) {
  for (const LongTailCase& c : std::vector<LongTailCase>{
           // -?(0|[1-9][0-9]*): no fraction (35.0 and 35.000 are integers to draft 6+, not to a typed int
           // field), no exponent.
           {R"({"type":"integer"})", {"35", "-7", "0", "12345678901234567890"}, {"35.0", "35.000", "1e2", "1E2", "01", "3.5"}},
           // Draft 4 calls 12345.0 no integer at all: rejected there too.
           {R"({"$schema":"http://json-schema.org/draft-04/schema#","type":"integer","maximum":100000})",
            {"12345", "-3"}, {"12345.0", "100001"}},
           // Bounds and multipleOf as before, on literals: 10, 20, 30 are the multiples of 10 in [5, 30].
           {R"({"type":"integer","minimum":5,"maximum":30,"multipleOf":10})", {"10", "20", "30"}, {"10.0", "0", "40", "15"}},
           {R"({"type":"integer","exclusiveMinimum":0,"maximum":126})", {"1", "35", "126"}, {"0", "126.0", "35.0", "127"}},
           // A type list with integer: the integer part spells literals, the string part strings.
           {R"({"type":["integer","string"]})", {"3", R"("3.0")"}, {"3.0"}},
           // `number` keeps JSON's full syntax: fraction, exponent, and the integral spelling 3.0.
           {R"({"type":"number"})", {"35", "35.0", "1e2", "-1.5E-3"}, {"01", ".5", "1."}},
           // A number that must be integral (multipleOf 1) may still be written 3.0, as JSON's numbers allow.
           {R"({"type":"number","multipleOf":1})", {"3", "3.0"}, {"3.5"}},
       })
    CheckLongTailCase(c);
}

}  // namespace
}  // namespace deepinfer::grammar
