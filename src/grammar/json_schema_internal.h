// Internals of the JSON Schema front end shared by its files (json_schema*.cpp); no interface for others.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "grammar/compiler.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace deepinfer::grammar::json_schema_internal {

using Json = nlohmann::ordered_json;

// Keywords that only annotate (or that the compiler reads elsewhere) and never constrain by themselves.
const std::set<std::string>& AnnotationKeywords();
// Keywords that constrain instances and that the compiler does not implement.
const std::set<std::string>& UnsupportedKeywords();
// Whether a keyword constrains instances (in any draft); unknown keywords constrain nothing.
bool ConstrainingKeyword(const std::string& k);
// The instance types (kString, kObject, ...) a keyword can reject: kAllTypes unless it constrains one type only.
uint8_t TypesConstrainedBy(const std::string& k);

Status Unsupported(const std::string& keyword, const std::string& path);
Status Invalid(const std::string& what, const std::string& path);

enum TypeBit : uint8_t {
  kNull = 1,
  kBool = 2,
  kObject = 4,
  kArray = 8,
  kString = 16,
  kInteger = 32,  // integers only
  kNumber = 64,   // numbers with a fraction (kInteger | kNumber = all numbers)
  kAllTypes = 127,
};

// The regular expression (full match, raw text) of a format the compiler constrains; null for the others.
const std::string* FormatRegex(const std::string& format);

// The `regex` format (json_schema_regex_format.cpp): canonical JSON string content that spells a valid
// ECMA-262 pattern, through a rule that calls itself for groups.
ExprId RegexFormatSyntax(Grammar* g);
// Whether a string schema's `regex` format is enforced (for both the compiler and the instance validator:
// they must agree): only where nothing else constrains the string's characters or length, since kAnd,
// kMinus and kCounted take regular operands only and the pattern syntax unrolled to a fixed group depth
// is too large an automaton to intersect.
bool RegexFormatEnforced(const Json& string_schema);

// Numbers (json_schema_number.cpp). `integer_fraction`: JsonSchemaOptions::integer_fraction.
ExprId JsonNumberAny(Grammar* g, bool integer, bool integer_fraction);
// A number (or, `integer`, an integer) under the schema's minimum/maximum/exclusive*/multipleOf.
Result<ExprId> JsonNumber(Grammar* g, const Json& s, bool integer, bool integer_fraction, const std::string& path);

// Schema-level operations on the JSON of schemas (json_schema_merge.cpp): $ref resolution, allOf merging.
class SchemaResolver {
 public:
  SchemaResolver(const Json& root, const JsonSchemaOptions& o);

  // Whether a `$ref` hides the keywords beside it (draft 7 and earlier; JsonSchemaOptions).
  bool RefOverridesSiblings() const { return ref_overrides_; }
  // Whether if/then/else are keywords: draft 7 on; under a `$schema` naming draft-03 to draft-06 they are
  // unknown words that constrain nothing.
  bool HasConditionals() const { return conditionals_; }
  // The schema without if/then/else where its draft has no such keywords (else unchanged).
  void DropUnknownConditionals(Json* s) const;

  Result<const Json*> Resolve(const std::string& ref, const std::string& path) const;
  // allOf, $ref siblings and anyOf/oneOf distribution: both schemas at once, merged at the JSON level.
  // Taken by value: a caller that moves its schemas in spares their copies (merges nest and repeat).
  Result<Json> Merge(Json a, Json b, const std::string& path, uint32_t depth) const;
  // A schema with its top-level $ref and allOf folded in.
  Result<Json> Inline(Json s, const std::string& path, uint32_t depth) const;
  // The same without a copy where there is nothing to fold in: `s` itself, or `*storage` holding the result.
  Result<const Json*> InlineView(const Json& s, const std::string& path, uint32_t depth, Json* storage) const;
  // Whether two branches can never validate the same instance (a proof: false may still be disjoint; so
  // is a question that runs out of its bounded steps).
  Result<bool> Disjoint(const Json& a, const Json& b, uint32_t depth) const;

  // Lowerings before compiling (json_schema_rewrite.cpp). Rewrite: the schema with `not`, if/then/else,
  // dependencies or a trivial propertyNames lowered to other keywords (nullopt: none there; an error
  // where one has no exact lowering). Negate: a schema for exactly the instances `schema` rejects, or
  // nullopt. ExactlyOneRequired: a oneOf of required-only branches as anyOf alternatives, or nullopt.
  Result<std::optional<Json>> Rewrite(const Json& s, const std::string& path, uint32_t depth) const;
  // `within` (TypeBits): the types of the instances the negation will meet (the schema it is merged into
  // holds no others); a keyword that constrains only other types never fails for those, so it adds no case.
  std::optional<Json> Negate(const Json& schema, const std::string& path, uint32_t depth, uint8_t within = kAllTypes) const;
  Result<std::optional<std::vector<Json>>> ExactlyOneRequired(const Json& branches, const Json& rest,
                                                              const std::string& path, uint32_t depth) const;
  // SharedCases: anyOf `branches` beside allOf members of `rest` that are anyOf lists as well, where some
  // cases c are in every one of those lists: rest' ∧ (c ∨ (the lists without c, all of them)), exact by
  // distributivity, or nullopt. Negated oneOf branches repeat such a case in every list (an instance of
  // another type), and distributing the rest over every list compiled 2^n combinations.
  static std::optional<Json> SharedCases(const Json& branches, const Json& rest);
  // PatternAlternatives: an anyOf of pattern-only branches as one $any_patterns group, or nullopt.
  Result<std::optional<Json>> PatternAlternatives(const Json& branches, const std::string& path, uint32_t depth) const;

  // Several if/then/else (`conditions`, each {if, then?, else?}) that hold together, under a schema whose
  // types are `types`: an anyOf of cells, where each `if` tests members' const/enum values (and
  // `required`, type object), split by those values, each cell with the then/else its ifs select.
  Result<Json> Conditionals(const std::vector<Json>& conditions, uint8_t types, const std::string& path,
                            uint32_t depth) const;

  // oneOf (json_schema_oneof.cpp): each merged branch (rest ∧ B_i) in `merged` keeps out the branches
  // `overlaps` says it may meet; the result marks the branches that lie inside another (they add
  // nothing). kUnimplemented where a negation has no exact form or the alternatives grow too many.
  Result<std::vector<uint8_t>> MakeExclusive(const Json& branches, const std::vector<std::vector<size_t>>& overlaps,
                                             const std::string& kw, const std::string& path, uint32_t depth,
                                             std::vector<Json>* merged) const;
  // A case of a negation read within branch i (`bi`) against branch j (`bj`), simplified (see the file);
  // nullopt where it stays as it is.
  Result<std::optional<Json>> PresentIsEnough(const Json& c, const Json& bi, const Json& bj, uint32_t depth) const;

  // Negated definitions (json_schema_rewrite.cpp): a `$ref` to `kNegatedRefPrefix` + R names the
  // instances that R's target rejects, a schema built once per R and resolved like any other target, so a
  // negation meets a recursive definition as a rule of its own (the compiler makes every `$ref` alone one).
  static constexpr const char* kNegatedRefPrefix = "$not:";
  // R where `ref` names the negation of R, else nullopt.
  static std::optional<std::string> NegatedRefTarget(const std::string& ref);
  // A sub-compiler's resolver reads (and adds to) the negated definitions and the compiled patterns of the
  // one it checks for.
  void ShareNegatedDefinitions(const SchemaResolver& other) {
    negated_ = other.negated_;
    patterns_ = other.patterns_;
  }

  // The validator's compiled patterns (json_schema_validate.cpp), keyed by the pattern and whether it must
  // match whole: each check of one schema (enum members, a witness, a pair of branches) starts a validator
  // of its own, and they meet the same few patterns, each compiled to an automaton, again and again.
  using CompiledPatterns = std::map<std::string, std::unique_ptr<CompiledGrammar>>;
  CompiledPatterns& Patterns() const { return *patterns_; }

  static bool HasConstraints(const Json& s);
  // The TypeBits of the instances the schema's type/const/enum allow.
  static uint8_t TypesOf(const Json& s);

 private:
  // The negation of a `$ref` alone: the target's own negation inlined where that is finite, else (the target
  // reaches itself) a `$ref` to its negated definition; nullopt where neither is exact.
  std::optional<Json> NegateRef(const std::string& ref, const std::string& path, uint32_t depth, uint8_t within) const;
  // Builds R's negated definition; false where some part of it has no exact negation or a budget is spent.
  bool BuildNegatedDefinition(const std::string& ref, const Json& target, const std::string& path, uint32_t depth) const;

  // What the negations of references share. A definition is built while the others it meets are still
  // being built (recursion): a reference to one in progress is taken as exact, which holds because every
  // recursion it closes lies under a member or element (`descents`: negations of a member's or an
  // element's schema entered so far), so the rule it makes describes a smaller instance each time; and
  // where any definition fails, every one begun since fails with it.
  struct NegatedDefinitions {
    enum class State : uint8_t { kBuilding, kDone, kFailed };
    struct Entry {
      Json schema;
      State state = State::kBuilding;
      uint32_t descents = 0;  // `descents` when it was begun
      size_t order = 0;       // when it was begun
    };
    std::map<std::string, Entry> by_ref;  // nodes stay put: Resolve hands out pointers into them
    std::set<std::string> self_reaching;  // refs whose inline negation met themselves
    std::vector<std::string> inlining;    // refs whose targets are being negated inline, outermost first
    uint32_t descents = 0;
  };
  // The member or element negations (properties, items, ...) count as descents while they run.
  class Descent {
   public:
    explicit Descent(NegatedDefinitions* n) : n_(n) { ++n_->descents; }
    ~Descent() { --n_->descents; }
    Descent(const Descent&) = delete;
    Descent& operator=(const Descent&) = delete;

   private:
    NegatedDefinitions* n_;
  };

  const Json& root_;
  const JsonSchemaOptions& o_;
  bool ref_overrides_ = false;
  bool conditionals_ = true;
  std::shared_ptr<NegatedDefinitions> negated_ = std::make_shared<NegatedDefinitions>();
  std::shared_ptr<CompiledPatterns> patterns_ = std::make_shared<CompiledPatterns>();
  // Disjoint's budget: calls under way, and the steps left to the outermost one.
  mutable uint32_t disjoint_nesting_ = 0;
  mutable uint32_t disjoint_steps_ = 0;
};

// A schema that no instance meets, by its form: false, an empty enum, or an allOf with a false member.
bool NeverHolds(const Json& s);

// Whether the language of `root` in `g` is provably empty, from the IR alone (kAnd/kMinus are taken as
// non-empty when their first operand is, so a `true` is exact).
bool ProvablyEmpty(const Grammar& g, ExprId root);

// The members of `values` (a JSON array) that `schema` validates (json_schema_validate.cpp); kUnimplemented
// where the schema uses a keyword that constrains instances and is not evaluated there.
Result<Json> ValidMembers(const SchemaResolver& resolver, uint32_t max_depth, const Json& schema, const Json& values,
                          const std::string& path);
// Whether every one of `schemas` validates `v`; kUnimplemented as for ValidMembers.
Result<bool> ValidatesAll(const SchemaResolver& resolver, uint32_t max_depth, const std::vector<const Json*>& schemas,
                          const Json& v, const std::string& path);

// Whether some instance validates both `a` and `b`, shown by one simple instance built from both that the
// validator accepts against each (json_schema_witness.cpp). true is a proof; false proves nothing.
bool ProvablyMeet(const SchemaResolver& resolver, uint32_t max_depth, const Json& a, const Json& b);

}  // namespace deepinfer::grammar::json_schema_internal
