// The JSON Schema compiler's class, shared by json_schema.cpp (schemas, strings, numbers, the combinators)
// and json_schema_object.cpp (arrays and objects); no interface for others (json_schema.h is).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grammar/grammar.h"
#include "core/hash.h"
#include "grammar/json_schema.h"
#include "grammar/json_schema_internal.h"
#include "grammar/json_text.h"
#include "grammar/regex.h"

namespace deepinfer::grammar::json_schema_internal {

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& o)
      : root_(root),
        o_(o),
        r_(root, o),
        translate_deadline_(std::chrono::steady_clock::now() +
                            std::chrono::microseconds(static_cast<int64_t>(std::max(0.0, o.max_translate_ms) * 1000.0))) {}

  // Tests: whether IntersectionEmpty keeps verdicts (PairVerdict) for later checks of the same pair, and
  // how many checks took a kept verdict.
  void set_remember_pair_verdicts(bool on) { remember_pair_verdicts_ = on; }
  uint32_t pair_verdicts_reused() const { return *pair_verdicts_reused_; }

  Result<Grammar> Run() {
    uint32_t r = g_.AddRule("root");
    g_.set_root(r);
    DI_ASSIGN_OR_RETURN(ExprId body, Compile(root_, "#", 0));
    g_.Define(r, g_.Seq({Ws(), body, Ws()}));
    return std::move(g_);
  }

  Grammar AnyObjectGrammar() {
    uint32_t r = g_.AddRule("root");
    g_.set_root(r);
    AnyValue();
    g_.Define(r, g_.Seq({Ws(), Ref(any_object_rule_), Ws()}));
    return std::move(g_);
  }

 private:
  // A length/count keyword ("minLength", "maxItems", ...) must be a non-negative integer; values
  // above `cap` are clamped so a huge bound cannot blow up the compiled grammar.
  Status ReadCount(const Json& s, const char* keyword, double cap, const std::string& path, uint32_t* out) {
    auto it = s.find(keyword);
    if (it == s.end() || !it->is_number()) return Status::Ok();
    double v = it->get<double>();
    if (!(v >= 0) || v != std::floor(v)) return Invalid(std::string(keyword) + " must be a non-negative integer", path);
    *out = static_cast<uint32_t>(std::min(v, cap));
    return Status::Ok();
  }
  ExprId Ref(uint32_t rule) { return g_.Ref(rule); }

  ExprId Ws() {
    if (o_.whitespace != JsonSchemaOptions::Whitespace::kFlexible) return g_.Empty();
    if (ws_ == 0xFFFFFFFFu) ws_ = g_.Star(g_.Chars({{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}, {'\r', '\r'}}));
    return ws_;
  }
  ExprId Lit(const std::string& s) { return g_.Literal(s); }
  ExprId Tok(const std::string& s) {
    if (o_.whitespace == JsonSchemaOptions::Whitespace::kPython && (s == "," || s == ":")) return Lit(s + " ");
    return g_.Seq({Lit(s), Ws()});
  }
  // `"` any string body `"`.
  ExprId AnyString() { return StringRule("string", g_.Empty(), true, 0, kUnbounded); }

  // A string value as a rule of its own, `"` body `"`, one per distinct (constraint, bounds): a bounded one
  // runs with a counter in its frame (ExprKind::kCounted), and rules without patterns are the same in
  // every grammar, so their mask entries are shared. `any_spelling`: the body is every JSON spelling of
  // unconstrained characters (then `body` is unused); else `body` constrains canonically spelled text.
  ExprId StringRule(const std::string& key, ExprId body, bool any_spelling, uint32_t min, uint32_t max);
  ExprId CanonicalAnyChar() {
    if (canon_char_ == 0xFFFFFFFFu) canon_char_ = JsonCanonicalChars(&g_, {{0, 0x10FFFF}});
    return canon_char_;
  }

  // The recursive rules of an unconstrained JSON value.
  ExprId AnyValue();

  Result<ExprId> Format(const std::string& f) {
    const std::string* re = FormatRegex(f);
    if (!re) return CanonicalStar();
    RegexOptions ro;
    ro.full_match = true;
    ro.json_string = true;
    return CompileRegex(*re, ro, &g_);
  }
  ExprId CanonicalStar() { return g_.Star(CanonicalAnyChar()); }
  static bool KnownFormat(const std::string& f) { return FormatRegex(f) != nullptr; }
  // The `regex` format's content, its rules made once per grammar.
  ExprId RegexFormat() {
    if (regex_format_ == 0xFFFFFFFFu) regex_format_ = RegexFormatSyntax(&g_);
    return regex_format_;
  }

  Result<ExprId> String(const Json& s, const std::string& path);

  // No instance validates both branches: the grammar of allOf [a, b] accepts nothing, shown on the IR
  // (ProvablyEmpty) or, for two string schemas (whose patterns meet in a kAnd), by compiling it. A proof
  // either way; anything else (an error, a budget spent) is no proof. The checks share one budget per
  // schema, as each one compiles both branches again.
  bool IntersectionEmpty(const Json& a, const Json& b, uint32_t depth);

  // Whether two patterns (unanchored, on raw text) can match the same string: false only where the
  // automaton of both at once is proven empty; an error or a spent budget counts as meeting.
  static bool PatternsMeet(const std::string& a, const std::string& b);

  // The candidates of a finite language: the schema's const or enum, or those of an allOf member (itself
  // or its $ref's target).
  std::optional<Json> FiniteValues(const Json& s, const std::string& path);

  // A schema's grammar. Equal schemas (by content) compile once: merged oneOf branches and allOf members
  // carry copies of the same sub-schemas, each compiled again before. A result made at some depth is
  // reused no deeper, where it cannot meet the depth limit the first did not.
  Result<ExprId> Compile(const Json& schema, const std::string& path, uint32_t depth);
  Result<ExprId> CompileUncached(const Json& schema, const std::string& path, uint32_t depth);

  Result<ExprId> Typed(const Json& s, uint8_t types, const std::string& path, uint32_t depth);

  Result<ExprId> Values(const Json& values, const Json& s, uint8_t types) {
    (void)s;
    std::vector<ExprId> alts;
    for (const auto& v : values) {
      uint8_t t = r_.TypesOf(Json{{"const", v}});
      if (!(t & types)) continue;
      alts.push_back(Lit(v.dump(-1, ' ', false, Json::error_handler_t::replace)));
    }
    return g_.Alt(std::move(alts));
  }

  Result<ExprId> Array(const Json& s, const std::string& path, uint32_t depth);
  // `needs` (two or more contains schemas) inside an array's brackets: some element meets each, one
  // element may meet several; `item` is the items schema `rest_schema` compiled.
  Result<ExprId> ContainsSeveral(const std::vector<Json>& needs, const Json& rest_schema, ExprId item, uint32_t min,
                                 uint32_t max, const std::string& path, uint32_t depth);
  // uniqueItems over items from a finite set of scalars (enum, const, booleans and null, a small integer
  // range): the values that validate against `items`, grouped into classes of equal values (1 and 1.0 are
  // one), or nullopt where the set is not finite, holds an object or array, or is too large.
  Result<std::optional<std::vector<Json>>> DistinctItemValues(const Json& items, const std::string& path, uint32_t depth);
  // `[` distinct members of `classes` `]`, min..max of them: one rule per set of classes used so far.
  // kUnimplemented where those sets number more than the grammar should hold.
  Result<ExprId> UniqueArray(const std::vector<Json>& classes, uint32_t min, uint32_t max, const std::string& path);

  // An object (`s`, its keywords merged). `$some` (from negations: a member whose key meets a key schema
  // and whose value meets a value schema must exist) is taken here: the witness is a listed name (that
  // name required, its schema and the value schema both), or one of the other members (ObjectBody).
  Result<ExprId> Object(const Json& s, const std::string& path, uint32_t depth);

  // Whether a patternProperties pattern of `s` matches the name.
  Result<bool> MatchesAPattern(const Json& s, const std::string& name, const std::string& path);

  // The key text a key schema ({$patterns, $not_patterns, $not_in}: from negations) allows, within `any`.
  Result<ExprId> KeyBody(const Json& k, ExprId any, const std::string& path);

  // The object without $some; `witness` ({key, value}): one of the members no property lists must meet it.
  Result<ExprId> ObjectBody(const Json& s, const Json* witness, const std::string& path, uint32_t depth,
                            const Json* second = nullptr);

  const Json& root_;
  const JsonSchemaOptions& o_;
  SchemaResolver r_;
  std::chrono::steady_clock::time_point translate_deadline_;  // from JsonSchemaOptions::max_translate_ms
  Grammar g_;
  std::map<std::string, uint32_t> ref_rules_;
  std::map<std::string, uint32_t> string_rules_;
  uint32_t any_value_rule_ = 0xFFFFFFFFu;
  uint32_t any_object_rule_ = 0xFFFFFFFFu;
  ExprId ws_ = 0xFFFFFFFFu;
  ExprId canon_char_ = 0xFFFFFFFFu;
  ExprId regex_format_ = 0xFFFFFFFFu;
  struct Compiled {
    ExprId expr;
    uint32_t depth;
  };
  std::unordered_map<Hash128, Compiled, Hash128Hasher> compiled_;  // by SchemaContentHash
  // Schemas being compiled, by content: how many arrays and objects (`containers_`) enclosed each when it
  // began, and the rule made for it where the same content recurs inside one of its own members or
  // elements (two recursive definitions merged, a definition beside its own negation): that recursion
  // becomes the rule's, as a lone `$ref` does, where unfolding it would never end.
  struct InProgress {
    uint32_t containers;
    uint32_t rule;
  };
  std::unordered_map<Hash128, InProgress, Hash128Hasher> in_progress_;
  uint32_t containers_ = 0;
  bool rule_body_ = false;  // the next Compile makes the body of a `$ref`'s rule
  std::string hash_bytes_;  // SchemaContentHash's buffer, reused
  uint32_t unique_arrays_ = 0;  // numbers the rules of each uniqueItems array
  uint32_t own_pair_checks_ = 0;
  uint32_t* pair_checks_ = &own_pair_checks_;  // shared with the compilers of IntersectionEmpty
  // IntersectionEmpty's verdicts by the two schemas' content hashes, where they depend on nothing else (no
  // error, no time limit met): nested oneOfs repeat the same pairs of branches at every level, and each
  // check compiled both again. A verdict keeps the checks its own compilation spent (nested pairs) and the
  // depth it was found at; it stands for a check no deeper whose spending stays within the budget, where
  // the compilation would run exactly as it did. Shared with the compilers of IntersectionEmpty.
  struct PairVerdict {
    bool disjoint;
    uint32_t checks;  // pair checks spent by the nested ones
    uint32_t depth;
  };
  std::unordered_map<Hash128, PairVerdict, Hash128Hasher> own_pair_verdicts_;
  std::unordered_map<Hash128, PairVerdict, Hash128Hasher>* pair_verdicts_ = &own_pair_verdicts_;
  bool remember_pair_verdicts_ = true;
  uint32_t own_pair_verdicts_reused_ = 0;
  uint32_t* pair_verdicts_reused_ = &own_pair_verdicts_reused_;
};

}  // namespace deepinfer::grammar::json_schema_internal
