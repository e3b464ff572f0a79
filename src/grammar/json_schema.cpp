#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "core/json.h"
#include "core/log.h"
#include "grammar/compiler.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/json_text.h"
#include "grammar/regex.h"

namespace deepinfer::grammar {

namespace json_schema_internal {

// A string value as a rule of its own, `"` body `"`, one per distinct (constraint, bounds): a bounded one
// runs with a counter in its frame (ExprKind::kCounted), and rules without patterns are the same in
// every grammar, so their mask entries are shared. `any_spelling`: the body is every JSON spelling of
// unconstrained characters (then `body` is unused); else `body` constrains canonically spelled text.
ExprId SchemaCompiler::StringRule(const std::string& key, ExprId body, bool any_spelling, uint32_t min, uint32_t max) {
  std::string name = key;
  if (min > 0 || max != kUnbounded)
    name += "{" + std::to_string(min) + "," + (max == kUnbounded ? std::string() : std::to_string(max)) + "}";
  if (auto it = string_rules_.find(name); it != string_rules_.end()) return Ref(it->second);
  ExprId unit = any_spelling ? JsonAnyChar(&g_) : CanonicalAnyChar();
  ExprId content;
  if (min == 0 && max == kUnbounded) {
    content = any_spelling ? g_.Star(unit) : body;
  } else if (any_spelling) {
    content = g_.Counted(g_.Star(unit), unit, g_.Repeat(unit, min, max), min, max);
  } else {
    content = g_.Counted(body, unit, g_.And(body, g_.Repeat(unit, min, max)), min, max);
  }
  uint32_t rule = g_.AddRule(name);
  g_.Define(rule, g_.Seq({Lit("\""), content, Lit("\"")}));
  g_.Keep(rule);
  string_rules_[name] = rule;
  return Ref(rule);
}

// The recursive rules of an unconstrained JSON value.
ExprId SchemaCompiler::AnyValue() {
  if (any_value_rule_ != 0xFFFFFFFFu) return Ref(any_value_rule_);
  any_value_rule_ = g_.AddRule("json_value");
  any_object_rule_ = g_.AddRule("json_object");
  uint32_t arr = g_.AddRule("json_array");
  ExprId value = Ref(any_value_rule_);
  ExprId member = g_.Seq({AnyString(), Ws(), Tok(":"), value});
  ExprId comma = Tok(",");
  g_.Define(any_object_rule_,
            g_.Seq({Tok("{"), g_.Optional(g_.Seq({member, Ws(), g_.Star(g_.Seq({comma, member, Ws()}))})), Lit("}")}));
  g_.Define(arr, g_.Seq({Tok("["), g_.Optional(g_.Seq({value, Ws(), g_.Star(g_.Seq({comma, value, Ws()}))})), Lit("]")}));
  g_.Define(any_value_rule_, g_.Alt({Lit("null"), Lit("true"), Lit("false"), JsonNumberAny(&g_, false, o_.integer_fraction), AnyString(),
                                     Ref(any_object_rule_), Ref(arr)}));
  return Ref(any_value_rule_);
}

Result<ExprId> SchemaCompiler::String(const Json& s, const std::string& path) {
  uint32_t min = 0, max = kUnbounded;
  DI_RETURN_IF_ERROR(ReadCount(s, "minLength", 1e6, path, &min));
  DI_RETURN_IF_ERROR(ReadCount(s, "maxLength", 1e6, path, &max));
  std::vector<ExprId> constraints;
  std::string key = "string";  // names the rule: equal constraints share one
  // A pattern as JSON Schema reads it: matched anywhere in the string's canonical JSON spelling.
  auto pattern = [&](const Json& p, const char* where) -> Result<ExprId> {
    if (!p.is_string()) return Invalid("pattern must be a string", path);
    RegexOptions ro;
    ro.full_match = false;
    ro.json_string = true;
    auto re = CompileRegex(p.get<std::string>(), ro, &g_);
    if (!re.ok()) return re.status().WithContext(path + where);
    return *re;
  };
  if (auto it = s.find("pattern"); it != s.end()) {
    DI_ASSIGN_OR_RETURN(ExprId re, pattern(*it, "/pattern"));
    key += " pattern " + JsonQuote(it->get<std::string>());
    constraints.push_back(re);
  }
  if (auto it = s.find("format"); it != s.end() && it->is_string() && KnownFormat(it->get<std::string>())) {
    key += " format " + it->get<std::string>();
    DI_ASSIGN_OR_RETURN(ExprId f, Format(it->get<std::string>()));
    constraints.push_back(f);
  }
  if (auto it = s.find("format"); it != s.end() && *it == "regex" && RegexFormatEnforced(s)) {
    key += " format regex";
    constraints.push_back(RegexFormat());
  }
  if (auto it = s.find("$patterns"); it != s.end()) {
    for (const auto& p : *it) {
      DI_ASSIGN_OR_RETURN(ExprId re, pattern(p, "/pattern"));
      key += " pattern " + JsonQuote(p.get<std::string>());
      constraints.push_back(re);
    }
  }
  // Groups of alternative patterns (anyOf of patterns, PatternAlternatives): one of each group.
  if (auto it = s.find("$any_patterns"); it != s.end()) {
    for (const auto& group : *it) {
      if (!group.is_array() || group.empty()) return Invalid("$any_patterns must hold non-empty arrays of patterns", path);
      std::vector<ExprId> alts;
      key += " any of (";
      for (const auto& p : group) {
        DI_ASSIGN_OR_RETURN(ExprId re, pattern(p, "/anyOf/pattern"));
        key += " pattern " + JsonQuote(p.get<std::string>());
        alts.push_back(re);
      }
      key += " )";
      constraints.push_back(g_.Alt(std::move(alts)));
    }
  }
  // Negated patterns and excluded values (from `not`, Negate): canonical strings without them.
  std::vector<ExprId> excluded;
  if (auto it = s.find("$not_patterns"); it != s.end()) {
    for (const auto& p : *it) {
      DI_ASSIGN_OR_RETURN(ExprId re, pattern(p, "/not/pattern"));
      key += " not pattern " + JsonQuote(p.get<std::string>());
      excluded.push_back(re);
    }
  }
  if (auto it = s.find("$not_in"); it != s.end()) {
    for (const auto& v : *it) {
      if (!v.is_string()) continue;
      const std::string q = JsonQuote(v.get<std::string>());
      key += " not " + q;
      excluded.push_back(Lit(q.substr(1, q.size() - 2)));
    }
  }
  if (constraints.empty() && excluded.empty()) return StringRule("string", g_.Empty(), true, min, max);
  ExprId body = constraints.empty() ? CanonicalStar() : constraints[0];
  for (size_t i = 1; i < constraints.size(); ++i) body = g_.And(body, constraints[i]);
  if (!excluded.empty()) body = g_.Minus(body, g_.Alt(std::move(excluded)));
  return StringRule(key, body, false, min, max);
}

namespace {

// A schema's content hash: its values spelled into `buf` in document order (an object's member order
// matters: it is the order of the grammar's properties), each with its type and length, without recursion;
// then the project's HashBytes over them.
Hash128 SchemaContentHash(const Json& root, std::string* buf) {
  buf->clear();
  auto put = [buf](uint64_t v) { buf->append(reinterpret_cast<const char*>(&v), sizeof v); };
  auto put_text = [&](const std::string& t) { put(t.size()), buf->append(t); };
  std::vector<const Json*> stack = {&root};
  while (!stack.empty()) {
    const Json& j = *stack.back();
    stack.pop_back();
    put(static_cast<uint64_t>(j.type()));
    switch (j.type()) {
      case Json::value_t::object:
        put(j.size());
        // Members pushed in reverse, so they are spelled in order; each key is spelled as its member is pushed.
        for (auto it = j.rbegin(); it != j.rend(); ++it) put_text(it.key()), stack.push_back(&it.value());
        break;
      case Json::value_t::array:
        put(j.size());
        for (auto it = j.rbegin(); it != j.rend(); ++it) stack.push_back(&*it);
        break;
      case Json::value_t::string:
        put_text(j.get_ref<const std::string&>());
        break;
      case Json::value_t::boolean:
        put(j.get<bool>() ? 1 : 0);
        break;
      case Json::value_t::number_integer:
        put(static_cast<uint64_t>(j.get<int64_t>()));
        break;
      case Json::value_t::number_unsigned:
        put(j.get<uint64_t>());
        break;
      case Json::value_t::number_float: {
        const double d = j.get<double>();
        uint64_t w = 0;
        std::memcpy(&w, &d, sizeof w);
        put(w);
        break;
      }
      default:
        break;
    }
  }
  return HashBytes(*buf);
}

}  // namespace

// No instance validates both branches: the grammar of allOf [a, b] accepts nothing, shown on the IR
// (ProvablyEmpty) or, for two string schemas (whose patterns meet in a kAnd), by compiling it. A proof
// either way; anything else (an error, a budget spent) is no proof. The checks share one budget per
// schema, as each one compiles both branches again.
bool SchemaCompiler::IntersectionEmpty(const Json& a, const Json& b, uint32_t depth) {
  constexpr uint32_t kMaxPairChecks = 512;
  if (++*pair_checks_ > kMaxPairChecks) return false;
  Hash128 key = SchemaContentHash(a, &hash_bytes_);
  {
    const Hash128 kb = SchemaContentHash(b, &hash_bytes_);
    key = Hash128{key.high * 0x9E3779B97F4A7C15ULL ^ kb.low, (key.low ^ (key.low >> 31)) * 0xC2B2AE3D27D4EB4FULL ^ kb.high};
  }
  if (auto it = pair_verdicts_->find(key); remember_pair_verdicts_ && it != pair_verdicts_->end() &&
                                             depth <= it->second.depth &&
                                             *pair_checks_ + it->second.checks <= kMaxPairChecks) {
    *pair_checks_ += it->second.checks;
    ++*pair_verdicts_reused_;
    return it->second.disjoint;
  }
  const uint32_t checks_before = *pair_checks_;
  auto verdict = [&](bool disjoint) {
    // Nested checks cut short by the budget may have shaped the grammar: no verdict to keep then.
    if (*pair_checks_ <= kMaxPairChecks) (*pair_verdicts_)[key] = PairVerdict{disjoint, *pair_checks_ - checks_before, depth};
    return disjoint;
  };
  // An instance both accept settles it without compiling them together. Under `strict`, objects
  // without additionalProperties allow fewer members than the validator knows, so no such shortcut.
  if (!o_.strict && ProvablyMeet(r_, o_.max_depth, a, b)) return verdict(false);
  SchemaCompiler sub(root_, o_);
  sub.r_.ShareNegatedDefinitions(r_);  // the branches may name negated definitions
  sub.pair_checks_ = pair_checks_;
  sub.pair_verdicts_ = pair_verdicts_;
  sub.remember_pair_verdicts_ = remember_pair_verdicts_;
  sub.pair_verdicts_reused_ = pair_verdicts_reused_;
  sub.translate_deadline_ = translate_deadline_;  // the checks spend the schema's budget, not a fresh one
  const uint32_t rule = sub.g_.AddRule("both");
  sub.g_.set_root(rule);
  auto e = sub.Compile(Json{{"allOf", Json::array({a, b})}}, "#", depth + 1);
  if (!e.ok()) return false;  // the depth or the time limit may be why: no verdict to keep
  sub.g_.Define(rule, *e);
  if (ProvablyEmpty(sub.g_, *e)) return verdict(true);
  if ((SchemaResolver::TypesOf(a) & SchemaResolver::TypesOf(b)) != kString) return verdict(false);
  CompileLimits limits;
  limits.max_compile_ms = 50;
  auto cg = grammar::Compile(sub.g_, limits);
  if (cg.ok()) return verdict(false);
  if (cg.status().code() == StatusCode::kInvalidArgument && cg.status().message() == "the grammar accepts no string")
    return verdict(true);
  return false;
}

// The candidates of a finite language: the schema's const or enum, or those of an allOf member (itself
// or its $ref's target).
std::optional<Json> SchemaCompiler::FiniteValues(const Json& s, const std::string& path) {
  auto own = [&](const Json& x) -> std::optional<Json> {
    if (!x.is_object()) return std::nullopt;
    // Draft 7 and earlier: an enum beside a $ref is ignored, the reference alone decides.
    if (x.contains("$ref") && r_.RefOverridesSiblings()) return std::nullopt;
    if (auto c = x.find("const"); c != x.end()) return Json::array({*c});
    if (auto e = x.find("enum"); e != x.end() && e->is_array()) return *e;
    return std::nullopt;
  };
  if (auto v = own(s)) return v;
  auto all = s.find("allOf");
  if (all == s.end() || !all->is_array()) return std::nullopt;
  for (const Json& m : *all) {
    if (auto v = own(m)) return v;
    if (!m.is_object()) continue;
    if (auto ref = m.find("$ref"); ref != m.end() && ref->is_string()) {
      auto target = r_.Resolve(ref->get<std::string>(), path);
      if (target.ok())
        if (auto v = own(**target)) return v;
    }
  }
  return std::nullopt;
}


Result<ExprId> SchemaCompiler::Compile(const Json& schema, const std::string& path, uint32_t depth) {
  if (depth > o_.max_depth || !schema.is_object()) {
    rule_body_ = false;
    return CompileUncached(schema, path, depth);
  }
  const bool rule_body = std::exchange(rule_body_, false);
  const Hash128 key = SchemaContentHash(schema, &hash_bytes_);
  if (auto it = compiled_.find(key); it != compiled_.end() && depth <= it->second.depth) return it->second.expr;
  // A `$ref` alone is a rule already (CompileUncached).
  if (schema.contains("$ref") && schema.size() == 1) return CompileUncached(schema, path, depth);
  constexpr uint32_t kNoRule = 0xFFFFFFFFu;
  auto [outer, first] = in_progress_.try_emplace(key, InProgress{containers_, kNoRule});
  if (!first && containers_ > outer->second.containers && !rule_body) {
    // The same schema inside a member or element of its own instance: a smaller instance, so the rule
    // describes exactly the finite instances (a recursion at the instance itself unfolds as before, and
    // meets the depth limit).
    if (outer->second.rule == kNoRule) outer->second.rule = g_.AddRule("recursion " + path);
    return Ref(outer->second.rule);
  }
  Result<ExprId> compiled = CompileUncached(schema, path, depth);
  if (first) {
    const uint32_t rule = in_progress_[key].rule;
    in_progress_.erase(key);
    if (rule != kNoRule) {
      // Defined either way: on an error nothing that refers to it is kept. A body that only calls another
      // rule takes that rule's body instead (the automaton compiler needs no rule to be a lone call); this
      // occurrence keeps the expression itself, so no caller receives a lone call either.
      ExprId body = compiled.ok() ? *compiled : g_.Nothing();
      if (const Expr& x = g_.expr(body); x.kind == ExprKind::kRef && x.rule < g_.rules().size() && g_.rules()[x.rule].defined)
        body = g_.rules()[x.rule].body;
      g_.Define(rule, body);
    }
  }
  DI_ASSIGN_OR_RETURN(ExprId e, std::move(compiled));
  Compiled& c = compiled_[key];
  if (c.depth <= depth) c = Compiled{e, depth};
  return e;
}

Result<ExprId> SchemaCompiler::CompileUncached(const Json& schema, const std::string& path, uint32_t depth) {
  if (depth > o_.max_depth) return Status::ResourceExhausted("the schema nests deeper than " + std::to_string(o_.max_depth) + " levels");
  // Every subschema passes here, so the budget is checked often enough to bound the whole translation.
  if (std::chrono::steady_clock::now() >= translate_deadline_)
    return Status::DeadlineExceeded("translating the schema into a grammar took longer than the limit (at " + path + ")");
  if (schema.is_boolean()) return schema.get<bool>() ? AnyValue() : g_.Nothing();
  if (!schema.is_object()) return Invalid("a schema must be an object or a boolean", path);
  // An enum or const (at the top or in an allOf member) makes the language finite: exactly the members
  // the whole schema validates, however its other keywords combine (json_schema_validate.cpp). Where
  // the validator cannot evaluate a keyword, the ordinary path below decides.
  if (std::optional<Json> values = FiniteValues(schema, path)) {
    auto members = ValidMembers(r_, o_.max_depth, schema, *values, path);
    if (members.ok()) return Values(*members, schema, kAllTypes);
  }
  // A $ref alone (annotations aside) becomes a rule, so recursive schemas stay finite.
  auto ref_alone = [&](const Json& x) {
    if (!x.is_object() || !x.contains("$ref")) return false;
    bool alone = true;  // draft 7 and earlier: it always is, whatever is beside it
    for (auto k = x.begin(); k != x.end() && !r_.RefOverridesSiblings(); ++k)
      if (k.key() != "$ref" && !AnnotationKeywords().count(k.key()) && k.key().rfind("x-", 0) != 0) alone = false;
    return alone;
  };
  if (auto it = schema.find("$ref"); it != schema.end()) {
    if (ref_alone(schema)) {
      if (!it->is_string()) return Invalid("$ref must be a string", path);
      std::string ref = it->get<std::string>();
      if (ref == "#/") ref = "#";
      auto found = ref_rules_.find(ref);
      if (found != ref_rules_.end()) return Ref(found->second);
      DI_ASSIGN_OR_RETURN(const Json* target, r_.Resolve(ref, path));
      // A target that is itself only a reference (an alias, `"A": {"$ref": "#/$defs/B"}`) is followed to the
      // schema it names, so that no rule's body is a lone call of another rule: the automaton compiler gives
      // such a rule over an object's rule an empty language. A cycle of aliases stays as it is (it
      // describes no instance).
      for (std::set<std::string> seen = {ref}; ref_alone(*target) && (*target)["$ref"].is_string();) {
        std::string next = (*target)["$ref"].get<std::string>();
        if (next == "#/") next = "#";
        if (!seen.insert(next).second) break;
        if (auto f = ref_rules_.find(next); f != ref_rules_.end()) return Ref(f->second);
        DI_ASSIGN_OR_RETURN(target, r_.Resolve(next, path));
        ref = std::move(next);
      }
      uint32_t rule = g_.AddRule(ref);
      ref_rules_[ref] = rule;
      // Never a call of the rule Compile makes for a recursion of the same content: a rule whose body is
      // a lone call of another trips the automaton compiler (above).
      rule_body_ = true;
      DI_ASSIGN_OR_RETURN(ExprId body, Compile(*target, ref, depth + 1));
      g_.Define(rule, body);
      return Ref(rule);
    }
  }
  // An allOf with one member that constrains anything (annotations aside, here and in the other members) is
  // that member, compiled as written: a `$ref` in it stays a rule, so a recursion through
  // `allOf: [{$ref}, {title}]` stays finite as it does through the `$ref` alone.
  auto annotations_only = [](const Json& x, const char* besides) {
    if (x.is_boolean()) return x.get<bool>();
    if (!x.is_object()) return false;
    for (auto k = x.begin(); k != x.end(); ++k)
      if (k.key() != besides && !AnnotationKeywords().count(k.key()) && k.key().rfind("x-", 0) != 0) return false;
    return true;
  };
  if (auto it = schema.find("allOf"); it != schema.end() && it->is_array() && annotations_only(schema, "allOf")) {
    const Json* only = nullptr;
    size_t at = 0, constraining = 0;
    for (size_t i = 0; i < it->size(); ++i)
      if (!annotations_only((*it)[i], "")) only = &(*it)[i], at = i, ++constraining;
    if (constraining == 1) return Compile(*only, path + "/allOf/" + std::to_string(at), depth + 1);
  }
  Json inlined;
  DI_ASSIGN_OR_RETURN(const Json* view, r_.InlineView(schema, path, depth, &inlined));
  const Json& s = *view;
  if (s.is_boolean()) return s.get<bool>() ? AnyValue() : g_.Nothing();
  for (auto it = s.begin(); it != s.end(); ++it)
    if (UnsupportedKeywords().count(it.key())) return Unsupported(it.key(), path);
  DI_ASSIGN_OR_RETURN(std::optional<Json> rewritten, r_.Rewrite(s, path, depth));
  if (rewritten) return Compile(*rewritten, path, depth + 1);
  if (auto it = s.find("anyOf"); it != s.end() || s.contains("oneOf")) {
    bool one = it == s.end();
    const Json& branches = one ? s["oneOf"] : *it;
    std::string kw = one ? "oneOf" : "anyOf";
    if (!branches.is_array() || branches.empty()) return Invalid(kw + " must be a non-empty array", path);
    // The schema without its branches, copied key by key: the branches (cells of conditionals, merged
    // subschemas) are most of it.
    Json rest = Json::object();
    rest.get_ref<Json::object_t&>().reserve(s.size());  // no growth: it would copy each member (ordered_map)
    for (auto k = s.begin(); k != s.end(); ++k)
      if (k.key() != kw) rest[k.key()] = k.value();
    if (one && branches.size() > 1) {
      DI_ASSIGN_OR_RETURN(std::optional<std::vector<Json>> exact, r_.ExactlyOneRequired(branches, rest, path, depth));
      if (exact) {
        std::vector<ExprId> alts;
        for (size_t i = 0; i < exact->size(); ++i) {
          DI_ASSIGN_OR_RETURN(ExprId e, Compile((*exact)[i], path + "/oneOf", depth + 1));
          alts.push_back(e);
        }
        return g_.Alt(std::move(alts));
      }
    }
    if (!one) {
      DI_ASSIGN_OR_RETURN(std::optional<Json> alternatives, r_.PatternAlternatives(branches, path, depth));
      if (alternatives) {
        DI_ASSIGN_OR_RETURN(Json m, r_.Merge(std::move(rest), std::move(*alternatives), path, depth + 1));
        return Compile(m, path, depth + 1);
      }
      if (std::optional<Json> factored = SchemaResolver::SharedCases(branches, rest))
        return Compile(*factored, path, depth + 1);
    }
    bool distribute = r_.HasConstraints(rest);
    // Branches of this call's own inlined copy that nothing reads again (anyOf: MakeExclusive and the
    // as-written compile below are for oneOf or undistributed branches) move into their merge.
    const bool branches_spare = view == &inlined && distribute && !one;
    std::vector<Json> merged;
    merged.reserve(branches.size());
    for (size_t i = 0; i < branches.size(); ++i) {
      if (distribute) {
        Json branch = branches_spare ? std::move(inlined[kw][i]) : branches[i];
        DI_ASSIGN_OR_RETURN(Json m, r_.Merge(rest, std::move(branch), path + "/" + kw + "/" + std::to_string(i), depth + 1));
        merged.push_back(std::move(m));
      } else {
        DI_ASSIGN_OR_RETURN(Json m, r_.Inline(branches[i], path, depth + 1));
        merged.push_back(std::move(m));
      }
    }
    std::vector<std::vector<size_t>> overlaps(merged.size());
    std::vector<uint8_t> contained(merged.size(), 0);
    if (one && merged.size() > 1) {
      // Branches that may overlap: each keeps out the others it may meet (exclusivity by negation),
      // rest ∧ B_i ∧ ¬B_j for those j, where each ¬B_j is exact (Negate) and the alternatives it adds
      // stay few; otherwise an error (MakeExclusive).
      for (size_t i = 0; i < merged.size(); ++i)
        for (size_t j = i + 1; j < merged.size(); ++j) {
          DI_ASSIGN_OR_RETURN(bool d, r_.Disjoint(merged[i], merged[j], depth));
          if (!d) d = IntersectionEmpty(merged[i], merged[j], depth);
          if (!d) overlaps[i].push_back(j), overlaps[j].push_back(i);
        }
      std::vector<Json> as_merged;
      if (o_.one_of_as_any_of) as_merged = merged;  // MakeExclusive may have changed some when it gives up
      auto exclusive = r_.MakeExclusive(branches, overlaps, kw, path, depth, &merged);
      if (!exclusive.ok() && exclusive.status().code() == StatusCode::kUnimplemented && o_.one_of_as_any_of) {
        DI_LOG(kWarn, "JSON Schema oneOf compiled as anyOf: its branches may overlap and no exact exclusion was found, "
                      "so an instance that meets two of them is accepted too")
            .Field("pointer", path)
            .Field("reason", exclusive.status().message());
        g_.AddWarning("oneOf at " + path + " taken as anyOf: an instance that meets two of its branches is accepted too");
        merged = std::move(as_merged);
        for (auto& o : overlaps) o.clear();
        contained.assign(merged.size(), 0);
      } else {
        DI_ASSIGN_OR_RETURN(contained, std::move(exclusive));
      }
    }
    std::vector<ExprId> alts;
    for (size_t i = 0; i < merged.size(); ++i) {
      // A branch that nothing was merged into compiles as written, so a `$ref` in it stays a rule (its
      // inlined form would expand a recursive reference until the depth limit).
      if (contained[i]) continue;
      const bool as_written = !distribute && (!one || merged.size() == 1 || overlaps[i].empty());
      DI_ASSIGN_OR_RETURN(ExprId e, Compile(as_written ? branches[i] : merged[i], path + "/" + kw + "/" + std::to_string(i), depth + 1));
      alts.push_back(e);
    }
    return g_.Alt(std::move(alts));
  }
  return Typed(s, r_.TypesOf(s), path, depth);
}

Result<ExprId> SchemaCompiler::Typed(const Json& s, uint8_t types, const std::string& path, uint32_t depth) {
  // A merged schema with a const or enum: its members that pass every other keyword merged in too.
  std::optional<Json> values;
  if (auto it = s.find("const"); it != s.end()) values = Json::array({*it});
  else if (auto e = s.find("enum"); e != s.end()) values = *e;
  if (values) {
    if (!values->is_array()) return Invalid("enum must be an array", path);
    DI_ASSIGN_OR_RETURN(Json members, ValidMembers(r_, o_.max_depth, s, *values, path));
    return Values(members, s, types);
  }
  std::vector<ExprId> alts;
  bool no_null = false, no_true = false, no_false = false;
  if (auto it = s.find("$not_in"); it != s.end()) {
    for (const auto& v : *it) {
      if (v.is_null()) no_null = true;
      if (v.is_boolean()) (v.get<bool>() ? no_true : no_false) = true;
      if (v.is_number() || v.is_object() || v.is_array()) return Unsupported("not (of an enum with numbers or containers)", path);
    }
  }
  if ((types & kNull) && !no_null) alts.push_back(Lit("null"));
  if (types & kBool) {
    if (!no_true) alts.push_back(Lit("true"));
    if (!no_false) alts.push_back(Lit("false"));
  }
  if (types & kString) {
    DI_ASSIGN_OR_RETURN(ExprId e, String(s, path));
    alts.push_back(e);
  }
  if ((types & (kInteger | kNumber)) == kNumber) {
    // Numbers that are not integers (the negation of type integer): a fraction with a digit other than
    // 0, spelled without exponent (each such value has that spelling; with one, 1.5e1 would be 15).
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "$multiples", "$not_multiples"})
      if (s.contains(k)) return Unsupported(std::string("not (of type integer beside '") + k + "')", path);
    RegexOptions ro;
    ro.full_match = true;
    DI_ASSIGN_OR_RETURN(ExprId e, CompileRegex("-?(0|[1-9][0-9]*)\\.[0-9]*[1-9][0-9]*", ro, &g_));
    alts.push_back(e);
  } else if ((types & (kInteger | kNumber)) != 0) {
    // `integer` is spelled as an integer literal only: 35.0 is an integer to the standard but not to the
    // programs that read the output (a typed int field refuses it). `number` keeps JSON's full syntax.
    const bool integer_only = (types & kNumber) == 0;
    DI_ASSIGN_OR_RETURN(ExprId e, JsonNumber(&g_, s, integer_only, o_.integer_fraction && !integer_only, path));
    alts.push_back(e);
  }
  // Whatever Array and Object compile describes an element or a member (Compile's recursion rules).
  struct Container {
    explicit Container(uint32_t* n) : n_(n) { ++*n_; }
    ~Container() { --*n_; }
    Container(const Container&) = delete;
    Container& operator=(const Container&) = delete;
    uint32_t* n_;
  };
  if (types & kArray) {
    const Container inside(&containers_);
    DI_ASSIGN_OR_RETURN(ExprId e, Array(s, path, depth));
    alts.push_back(e);
  }
  if (types & kObject) {
    const Container inside(&containers_);
    DI_ASSIGN_OR_RETURN(ExprId e, Object(s, path, depth));
    alts.push_back(e);
  }
  return g_.Alt(std::move(alts));
}

}  // namespace json_schema_internal

using json_schema_internal::Json;
using json_schema_internal::SchemaCompiler;

Result<Grammar> JsonSchemaToGrammar(std::string_view schema_json, const JsonSchemaOptions& options) {
  if (schema_json.size() > options.max_schema_bytes)
    return Status::ResourceExhausted("the schema is larger than " + std::to_string(options.max_schema_bytes) + " bytes");
  // Parsed without recursion and with a nesting bound, so nlohmann's own recursive copies and compares
  // of the value stay bounded too.
  auto parsed = ParseOrderedJson(schema_json, JsonLimits{options.max_schema_bytes, static_cast<int>(options.max_depth) * 4});
  if (!parsed.ok()) return Status::InvalidArgument("the schema is not valid JSON: " + parsed.status().message());
  Json schema = std::move(*parsed);
  SchemaCompiler c(schema, options);
  return c.Run();
}

Grammar JsonObjectGrammar(const JsonSchemaOptions& options) {
  Json empty = Json::object();
  SchemaCompiler c(empty, options);
  return c.AnyObjectGrammar();
}

}  // namespace deepinfer::grammar
