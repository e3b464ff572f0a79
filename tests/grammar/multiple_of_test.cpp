// multipleOf for any decimal step, its negation and several steps at once (json_schema_number.cpp, the
// remainder automaton of Grammar::Multiple): exact on the digits as written. Expected verdicts are derived
// by hand in each comment, or by integer arithmetic on hundredths for the exhaustive check.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/json_schema.h"
#include "schema_case.h"

namespace deepinfer::grammar {
namespace {

// Integer steps with no finite range: 3 decides by the digit sum (1+2+...+9 = 45; twenty-one 9s sum to
// 189 = 3 * 63; 10^21 + 1 sums to 2), 7 by the remainder itself (7 * 142857 = 999999).
TEST(MultipleOf, IntegerStepsWithoutARange) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"type":"integer","multipleOf":3})", {"0", "3", "-3", "123456789", "999999999999999999999"},
            {"1", "-4", "10", "1000000000000000000001", "3.0"}},
           {R"({"type":"integer","minimum":0,"multipleOf":7})", {"0", "7", "999999", "700"}, {"1", "-7", "999998", "70000001"}},
           // A number schema: 6.0 is a multiple of 3 (the value counts, not the spelling); 6.5 is not.
           {R"({"type":"number","multipleOf":3})", {"6", "6.0", "-9.000"}, {"6.5", "4", "6.01"}},
       })
    CheckSchemaCase(c);
}

// Fractional steps other than 10^-k: 0.25 = 25/100, so x is a multiple when 100x is an integer divisible by
// 25; 2.5 = 25/10 likewise with 10x. An integer type keeps only the integers among them (multiples of 5
// for 2.5), and every integer is a multiple of 0.1.
TEST(MultipleOf, FractionalSteps) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"type":"number","multipleOf":0.25})", {"0", "0.25", "-1.75", "2.5", "3.50", "12"},
            {"0.1", "0.125", "1.255", "0.2"}},
           {R"({"type":"integer","multipleOf":2.5})", {"0", "5", "-10", "25"}, {"2", "7", "2.5"}},
           {R"({"type":"integer","multipleOf":0.1})", {"0", "5", "-12", "1234567"}, {"0.5", "0.1"}},
           // With bounds as well: the range and the step hold together.
           {R"({"type":"number","minimum":1,"exclusiveMaximum":3,"multipleOf":0.75})", {"1.5", "2.25"},
            {"0.75", "3", "3.75", "1", "2"}},
       })
    CheckSchemaCase(c);
}

// not multipleOf: the numbers that are no multiple of the step. Exponent spellings are left out (the
// automaton reads plain decimals): 1e1 is refused although 10 is no multiple of 4.
TEST(MultipleOf, Negated) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"type":"integer","not":{"multipleOf":7}})", {"1", "-6", "15", "706"}, {"0", "7", "-14", "700", "1.5"}},
           {R"({"type":"number","not":{"multipleOf":2.5}})", {"1", "2.4", "2.51", "2.50001", "-0.5"},
            {"2.5", "5", "-7.5", "2.500", "0", "1e1"}},
           // Other types meet every multipleOf (it constrains numbers only), so its negation rejects them.
           {R"({"not":{"multipleOf":4}})", {"3", "4.5", "-6"}, {"8", "-4", "0", R"("a")", "null", "[]"}},
           // A oneOf of steps: 6 is a multiple of both 2 and 3 (rejected), 4 of 2 alone, 9 of 3 alone, 5
           // of neither.
           {R"({"type":"integer","oneOf":[{"multipleOf":2},{"multipleOf":3}]})", {"4", "9", "-2", "3"}, {"6", "0", "5", "12"}},
       })
    CheckSchemaCase(c);
}

// Several steps at once (allOf members): multiples of 6 and of 4 are the multiples of 12; of 0.5 and
// 0.75, the multiples of 1.5.
TEST(MultipleOf, SeveralSteps) {
  for (const SchemaCase& c : std::vector<SchemaCase>{
           {R"({"type":"integer","allOf":[{"multipleOf":6},{"multipleOf":4}]})", {"0", "12", "24", "-36"}, {"6", "8", "18", "4"}},
           {R"({"type":"number","allOf":[{"multipleOf":0.5},{"multipleOf":0.75}]})", {"1.5", "3", "-4.5", "0"},
            {"0.5", "0.75", "2.25", "1"}},
           // multiples of 5 that are no multiples of 10 (an enum filtered the same way: 15 and 25 stay).
           {R"({"allOf":[{"multipleOf":5},{"not":{"multipleOf":10}}],"type":"integer"})", {"5", "15", "-25"}, {"10", "0", "7"}},
           {R"({"enum":[10,15,25,30],"multipleOf":5,"not":{"multipleOf":10}})", {"15", "25"}, {"10", "30"}},
       })
    CheckSchemaCase(c);
}

// Every spelling with up to three fraction digits of the values -4.000 .. 4.000, against multipleOf 0.25
// in [-3, 3]: valid exactly when the value in thousandths is divisible by 250 and within +-3000.
TEST(MultipleOf, ExhaustiveThousandths) {
  auto g = JsonSchemaToGrammar(R"({"type":"number","minimum":-3,"maximum":3,"multipleOf":0.25})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto cg = Compile(*g);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  int checked = 0;
  for (int64_t t = -4000; t <= 4000; ++t) {
    const int64_t a = t < 0 ? -t : t;
    char text[32];
    std::snprintf(text, sizeof text, "%s%lld.%03lld", t < 0 ? "-" : "", static_cast<long long>(a / 1000),
                  static_cast<long long>(a % 1000));
    const bool valid = t % 250 == 0 && a <= 3000;
    EXPECT_EQ(cg->Matches(text), valid) << text;
    ++checked;
  }
  EXPECT_EQ(checked, 8001);
}

}  // namespace
}  // namespace deepinfer::grammar
