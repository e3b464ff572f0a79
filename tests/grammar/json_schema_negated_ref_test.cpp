// Negations of references into recursive definitions (each a definition of its own, built once), and
// schemas whose merged parts recur inside their own members (a rule for the recursion). Expected verdicts
// are derived by hand from the standard, in each comment.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/json_schema.h"
#include "schema_case.h"

namespace deepinfer::grammar {
namespace {

// tree: an object with `kids`, an array of trees. leaf: an object whose `v`, if any, is an integer.
const char* const kTreeAndLeaf =
    R"("definitions":{"tree":{"type":"object","required":["kids"],"properties":{"kids":{"type":"array","items":{"$ref":"#/definitions/tree"}}}},)"
    R"("leaf":{"type":"object","properties":{"v":{"type":"integer"}}}})";

// oneOf [tree, leaf]: exactly one of them. Branch leaf keeps out the trees through the negated definition
// of tree (an object that is no tree: kids absent, not an array, or holding an element that is no tree).
TEST(JsonSchemaNegatedRef, OneOfOverARecursiveDefinition) {
  CheckSchemaCase({std::string("{") + kTreeAndLeaf + R"(,"oneOf":[{"$ref":"#/definitions/tree"},{"$ref":"#/definitions/leaf"}]})",
                   {
                       // Leaf only: no kids.
                       "{}", R"({"v":1})",
                       // Tree only: v is not an integer.
                       R"({"kids":[],"v":"a"})", R"({"kids":[{"kids":[]}],"v":"x"})",
                       // Leaf only: the element {} is no tree, so neither is the whole (found one level down).
                       R"({"kids":[{}]})",
                       // Leaf only: the element {"kids":[{}]} is no tree (two levels down).
                       R"({"kids":[{"kids":[{}]}]})",
                       // Leaf only: kids is not an array.
                       R"({"kids":1})",
                   },
                   {
                       // Both: a tree without v.
                       R"({"kids":[]})", R"({"kids":[],"v":1})", R"({"kids":[{"kids":[]}]})",
                       R"({"kids":[{"kids":[{"kids":[]}]}]})",
                       // Neither: no tree (element {}), and v is no integer.
                       R"({"kids":[{}],"v":"x"})", R"({"kids":3,"v":[]})",
                       // Neither: not objects.
                       R"("s")", "1", "[]", "null",
                   }});
}

// list: an object with an integer n and, optionally, a next list. `not` list within objects: n absent or
// no integer, or a next that is no list, at any depth.
TEST(JsonSchemaNegatedRef, NotOfASelfReference) {
  CheckSchemaCase({R"({"definitions":{"list":{"type":"object","required":["n"],"properties":{"n":{"type":"integer"},)"
                   R"("next":{"$ref":"#/definitions/list"}}}},"type":"object","not":{"$ref":"#/definitions/list"}})",
                   // In the grammar's member order: the member a case of the negation needs comes first.
                   {"{}", R"({"n":"a"})", R"({"next":{},"n":1})", R"({"next":7,"n":1})",
                    R"({"next":{"next":{"n":"x"},"n":2},"n":1})"},
                   {R"({"n":1})", R"({"n":1,"next":{"n":2}})", R"({"n":1,"next":{"n":2,"next":{"n":3}}})",
                    // Not objects: the schema's own type.
                    R"("s")", "1"}});
}

// Two definitions that reach each other: a is an object whose b, if present, is an array of a's. Its
// negation: not an object, or b present and no array, or b an array with an element that is no a.
TEST(JsonSchemaNegatedRef, NotOfMutualReferences) {
  CheckSchemaCase({R"({"definitions":{"a":{"type":"object","properties":{"b":{"$ref":"#/definitions/b"}}},)"
                   R"("b":{"type":"array","items":{"$ref":"#/definitions/a"}}},"not":{"$ref":"#/definitions/a"}})",
                   {"1", R"("s")", "[]", R"({"b":1})", R"({"b":[1]})", R"({"b":[{"b":[{"b":"x"}]}]})", R"({"b":[{},{"b":{}}]})"},
                   {"{}", R"({"b":[]})", R"({"b":[{},{"b":[]}]})", R"({"c":1})", R"({"b":[{"b":[{"b":[]}]}]})"}});
}

// A definition that calls itself at its own instance (no member or element between) has no negation
// over finite instances that a rule could state: refused, naming the keyword.
TEST(JsonSchemaNegatedRef, RecursionAtTheInstanceItselfIsRefused) {
  auto g = JsonSchemaToGrammar(R"({"definitions":{"r":{"anyOf":[{"$ref":"#/definitions/r"},{"type":"string"}]}},)"
                               R"("not":{"$ref":"#/definitions/r"}})");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented) << g.status().ToString();
  EXPECT_NE(g.status().message().find("'not'"), std::string::npos) << g.status().ToString();
}

// More negated definitions than one schema may build: refused cleanly, naming the keyword.
TEST(JsonSchemaNegatedRef, DefinitionBudgetIsBounded) {
  // 80 lists d0..d79, each an object whose optional `n` is another list of its own kind; not anyOf of all.
  std::string defs, refs;
  for (int i = 0; i < 80; ++i) {
    std::string name = "d";
    name += std::to_string(i);
    if (i > 0) defs.append(","), refs.append(",");
    defs.append("\"").append(name).append(R"(":{"type":"object","required":["k)").append(std::to_string(i));
    defs.append(R"("],"properties":{"n":{"$ref":"#/definitions/)").append(name).append(R"("}}})");
    refs.append(R"({"$ref":"#/definitions/)").append(name).append(R"("})");
  }
  auto g = JsonSchemaToGrammar(R"({"definitions":{)" + defs + R"(},"not":{"anyOf":[)" + refs + "]}}");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented) << g.status().ToString();
}

// Foo's child is a Foo and a Named at once: the merged schema recurs inside its own member `child`, so it
// becomes a rule instead of unfolding without end. Named: a string `name` is required.
TEST(JsonSchemaNegatedRef, MergedRecursionBecomesARule) {
  CheckSchemaCase({R"({"definitions":{"Foo":{"type":"object","properties":{"child":{"allOf":[{"$ref":"#/definitions/Foo"},)"
                   R"({"$ref":"#/definitions/Named"}]}}},"Named":{"required":["name"],"properties":{"name":{"type":"string"}}}},)"
                   R"("$ref":"#/definitions/Foo"})",
                   // In the grammar's member order: Foo's members, then Named's.
                   {"{}", R"({"child":{"name":"a"}})", R"({"child":{"child":{"name":"b"},"name":"a"}})",
                    R"({"child":{"child":{"child":{"name":"c"},"name":"b"},"name":"a"}})"},
                   {R"({"child":{}})", R"({"child":{"name":1}})", R"({"child":{"name":"a","child":{}}})",
                    R"({"child":{"name":"a","child":{"name":"b","child":{"name":2}}}})", "1"}});
}

// oneOf over two recursive definitions of the same shape: each branch keeps out the other's negated
// definition, which recurs beside its own definition at every level (a rule for the pair). a: objects
// whose `x`, if present, is an a, with an integer `n` required; b: the same with a string `s` required.
TEST(JsonSchemaNegatedRef, OneOfOverTwoRecursiveDefinitions) {
  CheckSchemaCase({R"({"definitions":{"a":{"type":"object","required":["n"],"properties":{"n":{"type":"integer"},"x":{"$ref":"#/definitions/a"}}},)"
                   R"("b":{"type":"object","required":["s"],"properties":{"s":{"type":"string"},"x":{"$ref":"#/definitions/b"}}}},)"
                   R"("oneOf":[{"$ref":"#/definitions/a"},{"$ref":"#/definitions/b"}]})",
                   {
                       // a only, b only.
                       R"({"n":1})", R"({"s":"t"})", R"({"n":1,"x":{"n":2}})", R"({"s":"t","x":{"s":"u"}})",
                       // Both n and s, but x is an a and no b (x lacks s): a only. In the grammar's member
                       // order: a's members, then those b's negation adds.
                       R"({"n":1,"x":{"n":2},"s":"t"})",
                       // Both at the top, x both, x.x an a only: a only.
                       R"({"n":1,"x":{"n":2,"x":{"n":3},"s":"u"},"s":"t"})",
                   },
                   {
                       // Both: x absent, or x both all the way down.
                       R"({"n":1,"s":"t"})", R"({"n":1,"s":"t","x":{"n":2,"s":"u"}})",
                       // Neither.
                       "{}", R"({"n":"a"})", R"({"n":1,"x":{}})", R"({"s":"t","x":{"n":1}})", "[]",
                   }});
}

// Disjointness of definitions that recur in several members each branches out at every level: the
// question is bounded, so the schema compiles. a needs k and s, both a's, and b needs n, an a: neither
// has a finite instance, so the oneOf is c alone (an object whose s, if present, is a c and whose x, if
// present, is an integer).
TEST(JsonSchemaNegatedRef, DisjointnessOfRecursiveDefinitionsIsBounded) {
  CheckSchemaCase({R"({"definitions":{"a":{"type":"object","properties":{"k":{"$ref":"#/definitions/a"},"n":{"$ref":"#/definitions/a"},)"
                   R"("s":{"$ref":"#/definitions/a"}},"required":["k","s"]},"b":{"type":"object","properties":{"k":{"$ref":"#/definitions/b"},)"
                   R"("n":{"$ref":"#/definitions/a"},"x":{"$ref":"#/definitions/a"}},"required":["n"]},"c":{"type":"object",)"
                   R"("properties":{"s":{"$ref":"#/definitions/c"},"x":{"type":"integer"}}}},)"
                   R"("oneOf":[{"$ref":"#/definitions/c"},{"$ref":"#/definitions/a"},{"$ref":"#/definitions/b"}]})",
                   {"{}", R"({"x":1})", R"({"s":{}})", R"({"s":{"s":{"x":2}}})"},
                   {R"({"x":"a"})", R"({"s":1})", R"({"s":{"x":[]}})", "1", "[]"}});
}

}  // namespace
}  // namespace deepinfer::grammar
