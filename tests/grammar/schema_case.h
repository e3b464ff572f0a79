// A JSON Schema with strings its grammar must accept and strings it must reject: the shape of the
// hand-derived schema tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/json_schema.h"

namespace deepinfer::grammar {

struct SchemaCase {
  std::string schema;
  std::vector<std::string> yes, no;
};

inline void CheckSchemaCase(const SchemaCase& c) {
  auto g = JsonSchemaToGrammar(c.schema);
  ASSERT_TRUE(g.ok()) << c.schema << ": " << g.status().ToString();
  auto cg = Compile(*g);
  ASSERT_TRUE(cg.ok()) << c.schema << ": " << cg.status().ToString();
  for (const auto& s : c.yes) EXPECT_TRUE(cg->Matches(s)) << c.schema << " should accept " << s;
  for (const auto& s : c.no) EXPECT_FALSE(cg->Matches(s)) << c.schema << " should reject " << s;
}

}  // namespace deepinfer::grammar
