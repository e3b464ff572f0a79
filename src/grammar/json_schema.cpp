#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "core/json.h"
#include "grammar/compiler.h"
#include "grammar/json_schema_internal.h"
#include "grammar/json_text.h"
#include "grammar/regex.h"

namespace deepinfer::grammar {

namespace {

using namespace json_schema_internal;  // NOLINT(google-build-using-namespace): the front end's own internals

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& o) : root_(root), o_(o), r_(root, o) {}

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
  ExprId StringRule(const std::string& key, ExprId body, bool any_spelling, uint32_t min, uint32_t max) {
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
  ExprId CanonicalAnyChar() {
    if (canon_char_ == 0xFFFFFFFFu) canon_char_ = JsonCanonicalChars(&g_, {{0, 0x10FFFF}});
    return canon_char_;
  }

  // The recursive rules of an unconstrained JSON value.
  ExprId AnyValue() {
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

  Result<ExprId> Format(const std::string& f) {
    const std::string* re = FormatRegex(f);
    if (!re) return CanonicalStar();
    RegexOptions ro;
    ro.full_match = true;
    ro.json_string = true;
    return CompileRegex(*re, ro, &g_);
  }
  ExprId CanonicalStar() { return g_.Star(CanonicalAnyChar()); }
  static bool KnownFormat(const std::string& f) {
    static const std::set<std::string> k = {"date", "time", "date-time", "duration", "uuid", "email",
                                            "hostname", "ipv4", "ipv6", "uri"};
    return k.count(f) > 0;
  }

  Result<ExprId> String(const Json& s, const std::string& path) {
    uint32_t min = 0, max = kUnbounded;
    DI_RETURN_IF_ERROR(ReadCount(s, "minLength", 1e6, path, &min));
    DI_RETURN_IF_ERROR(ReadCount(s, "maxLength", 1e6, path, &max));
    std::vector<ExprId> constraints;
    std::string key = "string";  // names the rule: equal constraints share one
    if (auto it = s.find("pattern"); it != s.end()) {
      if (!it->is_string()) return Invalid("pattern must be a string", path);
      key += " pattern " + JsonQuote(it->get<std::string>());
      RegexOptions ro;
      ro.full_match = false;
      ro.json_string = true;
      auto re = CompileRegex(it->get<std::string>(), ro, &g_);
      if (!re.ok()) return re.status().WithContext(path + "/pattern");
      constraints.push_back(*re);
    }
    if (auto it = s.find("format"); it != s.end() && it->is_string() && KnownFormat(it->get<std::string>())) {
      key += " format " + it->get<std::string>();
      DI_ASSIGN_OR_RETURN(ExprId f, Format(it->get<std::string>()));
      constraints.push_back(f);
    }
    if (auto it = s.find("$patterns"); it != s.end()) {
      for (const auto& p : *it) {
        if (!p.is_string()) return Invalid("pattern must be a string", path);
        key += " pattern " + JsonQuote(p.get<std::string>());
        RegexOptions ro;
        ro.full_match = false;
        ro.json_string = true;
        auto re = CompileRegex(p.get<std::string>(), ro, &g_);
        if (!re.ok()) return re.status().WithContext(path + "/pattern");
        constraints.push_back(*re);
      }
    }
    // Negated patterns and excluded values (from `not`, Negate): canonical strings without them.
    std::vector<ExprId> excluded;
    if (auto it = s.find("$not_patterns"); it != s.end()) {
      for (const auto& p : *it) {
        if (!p.is_string()) return Invalid("pattern must be a string", path);
        key += " not pattern " + JsonQuote(p.get<std::string>());
        RegexOptions ro;
        ro.full_match = false;
        ro.json_string = true;
        auto re = CompileRegex(p.get<std::string>(), ro, &g_);
        if (!re.ok()) return re.status().WithContext(path + "/not/pattern");
        excluded.push_back(*re);
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

  // No instance validates both branches: the grammar of allOf [a, b] accepts nothing, shown on the IR
  // (ProvablyEmpty) or, for two string schemas (whose patterns meet in a kAnd), by compiling it. A proof
  // either way; anything else (an error, a budget spent) is no proof. The checks share one budget per
  // schema, as each one compiles both branches again.
  bool IntersectionEmpty(const Json& a, const Json& b, uint32_t depth) {
    constexpr uint32_t kMaxPairChecks = 512;
    if (++*pair_checks_ > kMaxPairChecks) return false;
    SchemaCompiler sub(root_, o_);
    sub.pair_checks_ = pair_checks_;
    const uint32_t rule = sub.g_.AddRule("both");
    sub.g_.set_root(rule);
    auto e = sub.Compile(Json{{"allOf", Json::array({a, b})}}, "#", depth + 1);
    if (!e.ok()) return false;
    sub.g_.Define(rule, *e);
    if (ProvablyEmpty(sub.g_, *e)) return true;
    if ((SchemaResolver::TypesOf(a) & SchemaResolver::TypesOf(b)) != kString) return false;
    CompileLimits limits;
    limits.max_compile_ms = 50;
    auto cg = grammar::Compile(sub.g_, limits);
    return !cg.ok() && cg.status().code() == StatusCode::kInvalidArgument &&
           cg.status().message() == "the grammar accepts no string";
  }

  // A case of ¬B_j, "member p present and failing B_j's schema for it", within branch i (`bi`): where
  // B_i's and B_j's schemas for p never meet, any value of p that B_i allows fails B_j, so the case is
  // "p present". Cases of several ¬B_j then read the same, and the oneOf factors them out.
  // The form without `required` ("p absent, or present and failing", from a required member of B_j) holds
  // for all of B_i then: the result is true.
  Result<Json> PresentIsEnough(const Json& c, const Json& bi, const Json& bj, uint32_t depth) const {
    if (!c.is_object() || (c.size() != 3 && c.size() != 2) || c.value("type", Json()) != "object") return c;
    auto req = c.find("required"), props = c.find("properties");
    const bool absent_too = c.size() == 2;
    if (props == c.end() || !props->is_object() || props->size() != 1) return c;
    if (!absent_too && (req == c.end() || !req->is_array() || req->size() != 1 || (*req)[0] != props->begin().key())) return c;
    const std::string& p = props->begin().key();
    auto si = bi.is_object() ? bi.find("properties") : bi.end();
    auto sj = bj.is_object() ? bj.find("properties") : bj.end();
    if (si == bi.end() || sj == bj.end() || !si->is_object() || !sj->is_object() || !si->contains(p) || !sj->contains(p)) return c;
    DI_ASSIGN_OR_RETURN(bool d, r_.Disjoint((*si)[p], (*sj)[p], depth + 1));
    if (!d) return c;
    if (absent_too) return Json(true);
    return Json{{"type", "object"}, {"required", *req}};
  }

  // Whether two patterns (unanchored, on raw text) can match the same string: false only where the
  // automaton of both at once is proven empty; an error or a spent budget counts as meeting.
  static bool PatternsMeet(const std::string& a, const std::string& b) {
    if (a == b) return true;
    Grammar t;
    const uint32_t rule = t.AddRule("both");
    t.set_root(rule);
    RegexOptions ro;
    ro.full_match = false;
    auto x = CompileRegex(a, ro, &t);
    auto y = CompileRegex(b, ro, &t);
    if (!x.ok() || !y.ok()) return true;
    t.Define(rule, t.And(*x, *y));
    CompileLimits limits;
    limits.max_compile_ms = 50;
    auto cg = grammar::Compile(t, limits);
    return cg.ok() || cg.status().message() != "the grammar accepts no string";
  }

  // The candidates of a finite language: the schema's const or enum, or those of an allOf member (itself
  // or its $ref's target).
  std::optional<Json> FiniteValues(const Json& s, const std::string& path) {
    auto own = [](const Json& x) -> std::optional<Json> {
      if (!x.is_object()) return std::nullopt;
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

  Result<ExprId> Compile(const Json& schema, const std::string& path, uint32_t depth) {
    if (depth > o_.max_depth) return Status::ResourceExhausted("the schema nests deeper than " + std::to_string(o_.max_depth) + " levels");
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
    if (auto it = schema.find("$ref"); it != schema.end()) {
      bool alone = true;  // draft 7 and earlier: it always is, whatever is beside it
      for (auto k = schema.begin(); k != schema.end() && !r_.RefOverridesSiblings(); ++k)
        if (k.key() != "$ref" && !AnnotationKeywords().count(k.key()) && k.key().rfind("x-", 0) != 0) alone = false;
      if (alone) {
        if (!it->is_string()) return Invalid("$ref must be a string", path);
        std::string ref = it->get<std::string>();
        if (ref == "#/") ref = "#";
        auto found = ref_rules_.find(ref);
        if (found != ref_rules_.end()) return Ref(found->second);
        DI_ASSIGN_OR_RETURN(const Json* target, r_.Resolve(ref, path));
        uint32_t rule = g_.AddRule(ref);
        ref_rules_[ref] = rule;
        DI_ASSIGN_OR_RETURN(ExprId body, Compile(*target, ref, depth + 1));
        g_.Define(rule, body);
        return Ref(rule);
      }
    }
    DI_ASSIGN_OR_RETURN(Json s, r_.Inline(schema, path, depth));
    if (s.is_boolean()) return s.get<bool>() ? AnyValue() : g_.Nothing();
    for (auto it = s.begin(); it != s.end(); ++it)
      if (UnsupportedKeywords().count(it.key())) return Unsupported(it.key(), path);
    if (auto it = s.find("uniqueItems"); it != s.end() && it->is_boolean() && it->get<bool>()) {
      auto mx = s.find("maxItems");
      if (!(mx != s.end() && mx->is_number() && mx->get<double>() <= 1) && (r_.TypesOf(s) & kArray))
        return Unsupported("uniqueItems", path);
    }
    DI_ASSIGN_OR_RETURN(std::optional<Json> rewritten, r_.Rewrite(s, path, depth));
    if (rewritten) return Compile(*rewritten, path, depth + 1);
    if (auto it = s.find("anyOf"); it != s.end() || s.contains("oneOf")) {
      bool one = it == s.end();
      const Json& branches = one ? s["oneOf"] : *it;
      std::string kw = one ? "oneOf" : "anyOf";
      if (!branches.is_array() || branches.empty()) return Invalid(kw + " must be a non-empty array", path);
      Json rest = s;
      rest.erase(kw);
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
      bool distribute = r_.HasConstraints(rest);
      std::vector<Json> merged;
      for (size_t i = 0; i < branches.size(); ++i) {
        if (distribute) {
          DI_ASSIGN_OR_RETURN(Json m, r_.Merge(rest, branches[i], path + "/" + kw + "/" + std::to_string(i), depth + 1));
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
        // stay few; otherwise an error.
        constexpr double kMaxAlternatives = 256;
        for (size_t i = 0; i < merged.size(); ++i)
          for (size_t j = i + 1; j < merged.size(); ++j) {
            DI_ASSIGN_OR_RETURN(bool d, r_.Disjoint(merged[i], merged[j], depth));
            if (!d) d = IntersectionEmpty(merged[i], merged[j], depth);
            if (!d) overlaps[i].push_back(j), overlaps[j].push_back(i);
          }
        // Each ¬B_j is an anyOf of cases; those that cannot meet branch i (Disjoint) are dropped. Where
        // every case is dropped, branch i lies inside B_j (sub), so it adds nothing; and branch i needs no
        // ¬B_j where it also excludes a B_k that holds B_j (¬B_k implies ¬B_j; of two equal ones the
        // first stays).
        std::vector<std::optional<Json>> negated(merged.size());
        std::vector<std::map<size_t, Json>> kept(merged.size());  // kept[i][j]: the cases of ¬B_j that meet B_i
        for (size_t i = 0; i < merged.size(); ++i)
          for (size_t j : overlaps[i]) {
            if (!negated[j]) negated[j] = r_.Negate(branches[j], path + "/" + kw + "/" + std::to_string(j), depth + 1);
            if (!negated[j]) return Unsupported("oneOf (with branches that may overlap)", path);
            auto any = negated[j]->is_object() ? negated[j]->find("anyOf") : negated[j]->end();
            const bool cases = any != negated[j]->end() && negated[j]->size() == 1 && any->is_array();
            Json k = Json::array();
            for (const Json& c : cases ? *any : Json::array({*negated[j]})) {
              DI_ASSIGN_OR_RETURN(bool d, r_.Disjoint(merged[i], c, depth + 1));
              if (!d) k.push_back(c);
            }
            kept[i][j] = std::move(k);
          }
        auto sub = [&](size_t a, size_t b) {
          auto found = kept[a].find(b);
          return found != kept[a].end() && found->second.empty();
        };
        double alternatives = 0;
        const std::vector<Json> base = merged;  // before any exclusion is merged in
        for (size_t i = 0; i < merged.size(); ++i) {
          for (size_t j : overlaps[i]) contained[i] = contained[i] || sub(i, j);
          if (contained[i]) continue;
          std::vector<Json> lists;  // per ¬B_j needed: its cases
          for (size_t j : overlaps[i]) {
            bool implied = false;
            for (size_t k : overlaps[i])
              if (k != j && sub(j, k) && (!sub(k, j) || k < j)) implied = true;
            if (implied) continue;
            Json cases = Json::array();
            bool always = false;  // a case that all of B_i meets: ¬B_j needs no exclusion
            for (Json c : kept[i][j]) {
              DI_ASSIGN_OR_RETURN(c, PresentIsEnough(c, base[i], base[j], depth));
              always = always || (c.is_boolean() && c.get<bool>());
              if (std::find(cases.begin(), cases.end(), c) == cases.end()) cases.push_back(std::move(c));
            }
            if (!always) lists.push_back(std::move(cases));
          }
          // ∧_j (c ∨ R_j) = c ∨ ∧_j R_j: cases every list shares become alternatives of their own, so the
          // product runs over the rest only.
          Json common = Json::array();
          bool rest_empty = false;
          while (!lists.empty() && !rest_empty) {
            auto shared = std::find_if(lists[0].begin(), lists[0].end(), [&](const Json& c) {
              return std::all_of(lists.begin(), lists.end(), [&](const Json& l) { return std::find(l.begin(), l.end(), c) != l.end(); });
            });
            if (shared == lists[0].end()) break;
            const Json c = *shared;
            common.push_back(c);
            for (Json& l : lists) {
              l.erase(std::find(l.begin(), l.end(), c));
              rest_empty = rest_empty || l.empty();
            }
          }
          double product = rest_empty ? 0 : 1;
          for (const Json& l : lists) product *= rest_empty ? 1.0 : static_cast<double>(l.size());
          alternatives += static_cast<double>(common.size()) + product;
          if (alternatives > kMaxAlternatives) return Unsupported("oneOf (with branches that may overlap)", path);
          std::vector<Json> exclusions;
          for (const Json& l : lists) exclusions.push_back(l.size() == 1 ? l[0] : Json{{"anyOf", l}});
          if (!common.empty()) {
            Json any = common;
            if (!rest_empty && !exclusions.empty()) any.push_back(Json{{"allOf", exclusions}});
            exclusions = {any.size() == 1 ? any[0] : Json{{"anyOf", any}}};
          }
          for (const Json& e : exclusions) {
            DI_ASSIGN_OR_RETURN(merged[i], r_.Merge(merged[i], e, path + "/" + kw + "/" + std::to_string(i), depth + 1));
          }
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

  Result<ExprId> Typed(const Json& s, uint8_t types, const std::string& path, uint32_t depth) {
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
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
        if (s.contains(k)) return Unsupported(std::string("not (of type integer beside '") + k + "')", path);
      RegexOptions ro;
      ro.full_match = true;
      DI_ASSIGN_OR_RETURN(ExprId e, CompileRegex("-?(0|[1-9][0-9]*)\\.[0-9]*[1-9][0-9]*", ro, &g_));
      alts.push_back(e);
    } else if ((types & (kInteger | kNumber)) != 0) {
      DI_ASSIGN_OR_RETURN(ExprId e, JsonNumber(&g_, s, (types & kNumber) == 0, o_.integer_fraction, path));
      alts.push_back(e);
    }
    if (types & kArray) {
      DI_ASSIGN_OR_RETURN(ExprId e, Array(s, path, depth));
      alts.push_back(e);
    }
    if (types & kObject) {
      DI_ASSIGN_OR_RETURN(ExprId e, Object(s, path, depth));
      alts.push_back(e);
    }
    return g_.Alt(std::move(alts));
  }

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

  Result<ExprId> Array(const Json& s, const std::string& path, uint32_t depth) {
    std::vector<ExprId> prefix;
    const Json* rest_schema = nullptr;
    Json rest_true = true;
    auto it_prefix = s.find("prefixItems");
    auto it_items = s.find("items");
    if (it_prefix != s.end()) {
      if (!it_prefix->is_array()) return Invalid("prefixItems must be an array", path);
      for (size_t i = 0; i < it_prefix->size(); ++i) {
        DI_ASSIGN_OR_RETURN(ExprId e, Compile((*it_prefix)[i], path + "/prefixItems/" + std::to_string(i), depth + 1));
        prefix.push_back(e);
      }
      rest_schema = it_items != s.end() ? &*it_items : &rest_true;
    } else if (it_items != s.end() && it_items->is_array()) {  // draft 7 tuple
      for (size_t i = 0; i < it_items->size(); ++i) {
        DI_ASSIGN_OR_RETURN(ExprId e, Compile((*it_items)[i], path + "/items/" + std::to_string(i), depth + 1));
        prefix.push_back(e);
      }
      auto add = s.find("additionalItems");
      rest_schema = add != s.end() ? &*add : &rest_true;
    } else {
      rest_schema = it_items != s.end() ? &*it_items : &rest_true;
    }
    uint32_t min = 0, max = kUnbounded;
    DI_RETURN_IF_ERROR(ReadCount(s, "minItems", 1e5, path, &min));
    DI_RETURN_IF_ERROR(ReadCount(s, "maxItems", 1e5, path, &max));
    bool rest_allowed = !(rest_schema->is_boolean() && !rest_schema->get<bool>());
    ExprId item = 0;
    if (rest_allowed) {
      DI_ASSIGN_OR_RETURN(item, Compile(*rest_schema, path + "/items", depth + 1));
    }
    ExprId sep = Tok(",");
    const uint32_t m = static_cast<uint32_t>(prefix.size());
    ExprId body;
    auto el = [&](ExprId e) { return g_.Seq({e, Ws()}); };
    // contains: some element (the witness) also meets it. Elements before and after it take the items
    // schema; the counts split around it (a before, b after, a + 1 + b within min..max).
    std::vector<Json> needs;
    if (auto c = s.find("contains"); c != s.end()) needs.push_back(*c);
    if (auto c = s.find("$contains"); c != s.end() && c->is_array())
      for (const Json& x : *c) needs.push_back(x);
    if (!needs.empty()) {
      constexpr uint32_t kMaxSplit = 64;
      if (needs.size() > 1) return Unsupported("contains (more than one kind of element)", path);
      if (m > 0) return Unsupported("contains beside tuple items", path);
      if (!rest_allowed || max == 0) return g_.Nothing();
      DI_ASSIGN_OR_RETURN(ExprId witness, Compile(Json{{"allOf", Json::array({*rest_schema, needs[0]})}}, path + "/contains", depth + 1));
      const ExprId before = g_.Seq({el(item), sep}), after = g_.Seq({sep, el(item)});
      std::vector<ExprId> alts;
      if (max == kUnbounded) {
        if (min > kMaxSplit) return Unsupported("contains (with minItems above " + std::to_string(kMaxSplit) + ")", path);
        const uint32_t need = min > 0 ? min - 1 : 0;  // elements besides the witness
        for (uint32_t a = 0; a < need; ++a)
          alts.push_back(g_.Seq({g_.Repeat(before, a, a), el(witness), g_.Repeat(after, need - a, kUnbounded)}));
        alts.push_back(g_.Seq({g_.Repeat(before, need, kUnbounded), el(witness), g_.Star(after)}));
      } else {
        if (max > kMaxSplit) return Unsupported("contains (with maxItems above " + std::to_string(kMaxSplit) + ")", path);
        for (uint32_t a = 0; a < max; ++a) {
          const uint32_t lo = min > a + 1 ? min - a - 1 : 0, hi = max - a - 1;
          alts.push_back(g_.Seq({g_.Repeat(before, a, a), el(witness), g_.Repeat(after, lo, hi)}));
        }
      }
      return g_.Seq({Tok("["), g_.Alt(std::move(alts)), Lit("]")});
    }
    if (m == 0) {
      if (!rest_allowed) {
        body = g_.Empty();
        if (min > 0) return g_.Nothing();
      } else {
        uint32_t lo = min == 0 ? 0 : min - 1;
        uint32_t hi = max == kUnbounded ? kUnbounded : (max == 0 ? 0 : max - 1);
        if (max == 0) {
          body = g_.Empty();
        } else {
          ExprId list = g_.Seq({el(item), g_.Repeat(g_.Seq({sep, el(item)}), lo, hi)});
          body = min == 0 ? g_.Optional(list) : list;
        }
      }
    } else {
      ExprId tail;
      if (!rest_allowed) {
        if (min > m) return g_.Nothing();
        tail = g_.Empty();
      } else {
        uint32_t lo = min > m ? min - m : 0;
        uint32_t hi = max == kUnbounded ? kUnbounded : (max > m ? max - m : 0);
        tail = g_.Repeat(g_.Seq({sep, el(item)}), lo, hi);
      }
      const uint32_t pm = max == kUnbounded ? m : std::min(m, max);
      ExprId cur = pm == m ? tail : g_.Empty();
      for (uint32_t j = pm; j >= 1; --j) {
        cur = g_.Seq({j > 1 ? sep : g_.Empty(), el(prefix[j - 1]), cur});
        if (j > min) cur = g_.Optional(cur);
      }
      body = cur;
    }
    return g_.Seq({Tok("["), body, Lit("]")});
  }

  // An object (`s`, its keywords merged). `$some` (from negations: a member whose key meets a key schema
  // and whose value meets a value schema must exist) is taken here: the witness is a listed name (that
  // name required, its schema and the value schema both), or one of the other members (ObjectBody).
  Result<ExprId> Object(const Json& s, const std::string& path, uint32_t depth) {
    auto some = s.find("$some");
    if (some == s.end()) return ObjectBody(s, nullptr, path, depth);
    if (!some->is_array() || some->size() != 1) return Unsupported("not (of several object keywords that need a member each)", path);
    const Json& w = (*some)[0];
    Json rest = s;
    rest.erase("$some");
    std::vector<ExprId> alts;
    Json names = Json::array();
    const Json props = s.value("properties", Json::object());
    if (props.is_object())
      for (auto p = props.begin(); p != props.end(); ++p) names.push_back(p.key());
    if (auto req = s.find("required"); req != s.end() && req->is_array())
      for (const Json& n : *req)
        if (n.is_string() && std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    DI_ASSIGN_OR_RETURN(Json good, ValidMembers(r_, o_.max_depth, w.at("key"), names, path));
    for (const Json& n : good) {
      const std::string name = n.get<std::string>();
      Json t = rest;
      Json own = props.is_object() && props.contains(name) ? props[name]
                 : s.contains("additionalProperties")   ? s["additionalProperties"]
                                                        : Json(!o_.strict);
      t["properties"][name] = Json{{"allOf", Json::array({own, w.at("value")})}};
      if (!t.contains("required") || !t["required"].is_array()) t["required"] = Json::array();
      if (std::find(t["required"].begin(), t["required"].end(), n) == t["required"].end()) t["required"].push_back(n);
      DI_ASSIGN_OR_RETURN(ExprId e, ObjectBody(t, nullptr, path, depth + 1));
      alts.push_back(e);
    }
    DI_ASSIGN_OR_RETURN(ExprId e, ObjectBody(rest, &w, path, depth + 1));
    alts.push_back(e);
    return g_.Alt(std::move(alts));
  }

  // The key text a key schema ({$patterns, $not_patterns, $not_in}: from negations) allows, within `any`.
  Result<ExprId> KeyBody(const Json& k, ExprId any, const std::string& path) {
    ExprId body = any;
    std::vector<ExprId> out;
    for (const char* kw : {"$patterns", "$not_patterns"}) {
      auto it = k.find(kw);
      if (it == k.end() || !it->is_array()) continue;
      for (const Json& p : *it) {
        if (!p.is_string()) return Invalid("pattern must be a string", path);
        RegexOptions ro;
        ro.full_match = false;
        ro.json_string = true;
        auto re = CompileRegex(p.get<std::string>(), ro, &g_);
        if (!re.ok()) return re.status().WithContext(path);
        if (kw[1] == 'p') body = g_.And(body, *re);
        else out.push_back(*re);
      }
    }
    if (auto it = k.find("$not_in"); it != k.end() && it->is_array())
      for (const Json& v : *it)
        if (v.is_string()) {
          const std::string q = JsonQuote(v.get<std::string>());
          out.push_back(Lit(q.substr(1, q.size() - 2)));
        }
    return out.empty() ? body : g_.Minus(body, g_.Alt(std::move(out)));
  }

  // The object without $some; `witness` ({key, value}): one of the members no property lists must meet it.
  Result<ExprId> ObjectBody(const Json& s, const Json* witness, const std::string& path, uint32_t depth) {
    std::vector<std::string> names;
    std::vector<const Json*> schemas;
    std::vector<uint8_t> required;
    std::set<std::string> req;
    std::vector<std::string> req_order;  // unlisted required names keep the order of `required`
    if (auto it = s.find("required"); it != s.end() && it->is_array())
      for (const auto& r : *it)
        if (r.is_string() && req.insert(r.get<std::string>()).second) req_order.push_back(r.get<std::string>());
    Json any = true;
    const Json* additional = o_.strict ? nullptr : &any;
    Json additional_false = false;
    if (auto it = s.find("additionalProperties"); it != s.end()) additional = &*it;
    if (additional && additional->is_boolean() && !additional->get<bool>()) additional = nullptr;
    const Json* patterns = nullptr;
    if (auto it = s.find("patternProperties"); it != s.end() && it->is_object() && !it->empty()) patterns = &*it;
    if (auto it = s.find("properties"); it != s.end() && it->is_object()) {
      for (auto p = it->begin(); p != it->end(); ++p) {
        names.push_back(p.key());
        schemas.push_back(&p.value());
      }
    }
    std::vector<Json> owned;
    owned.reserve(req.size() + names.size());
    for (const auto& r : req_order) {
      if (std::find(names.begin(), names.end(), r) != names.end()) continue;
      names.push_back(r);
      // A required name nothing lists takes the additional schema: none where additionalProperties is
      // false (so the object cannot be), anything under strict's default.
      schemas.push_back(additional ? additional : s.contains("additionalProperties") ? &additional_false : &any);
    }
    // Listed names matching a pattern must satisfy that pattern's schema too.
    std::vector<Grammar> pattern_tests;
    if (patterns) {
      for (auto p = patterns->begin(); p != patterns->end(); ++p) {
        Grammar t;
        uint32_t r = t.AddRule("p");
        RegexOptions ro;
        ro.full_match = false;
        auto re = CompileRegex(p.key(), ro, &t);
        if (!re.ok()) return re.status().WithContext(path + "/patternProperties");
        t.Define(r, *re);
        auto cg = grammar::Compile(t);
        if (!cg.ok()) return cg.status().WithContext(path + "/patternProperties");
        for (size_t i = 0; i < names.size(); ++i) {
          if (cg->Matches(names[i])) {
            owned.push_back(Json{{"allOf", Json::array({*schemas[i], p.value()})}});
            schemas[i] = &owned.back();
          }
        }
      }
    }
    // propertyNames (a pattern, lengths; Rewrite lets no other form through): listed names it rejects
    // cannot appear, and other keys are spelled within it.
    ExprId key_any = CanonicalStar();
    std::set<std::string> bad_names;
    if (auto it = s.find("propertyNames"); it != s.end()) {
      Json listed = Json::array();
      for (const auto& n : names) listed.push_back(n);
      DI_ASSIGN_OR_RETURN(Json good, ValidMembers(r_, o_.max_depth, *it, listed, path + "/propertyNames"));
      for (const auto& n : names)
        if (std::find(good.begin(), good.end(), Json(n)) == good.end()) bad_names.insert(n);
      DI_ASSIGN_OR_RETURN(Json k, r_.Inline(*it, path + "/propertyNames", depth + 1));
      if (k.is_boolean()) {
        if (!k.get<bool>()) key_any = g_.Nothing();
      } else {
        std::vector<std::string> pats;
        if (auto p = k.find("pattern"); p != k.end() && p->is_string()) pats.push_back(p->get<std::string>());
        if (auto p = k.find("$patterns"); p != k.end() && p->is_array())
          for (const Json& x : *p)
            if (x.is_string()) pats.push_back(x.get<std::string>());
        for (const auto& pat : pats) {
          RegexOptions ro;
          ro.full_match = false;
          ro.json_string = true;
          auto re = CompileRegex(pat, ro, &g_);
          if (!re.ok()) return re.status().WithContext(path + "/propertyNames/pattern");
          key_any = g_.And(key_any, *re);
        }
        uint32_t lo = 0, hi = kUnbounded;
        DI_RETURN_IF_ERROR(ReadCount(k, "minLength", 1e6, path + "/propertyNames", &lo));
        DI_RETURN_IF_ERROR(ReadCount(k, "maxLength", 1e6, path + "/propertyNames", &hi));
        if (hi != kUnbounded && hi > 1024) return Unsupported("propertyNames (maxLength above 1024)", path);
        if (lo > 1024) return Unsupported("propertyNames (minLength above 1024)", path);
        if (lo > 0 || hi != kUnbounded) key_any = g_.And(key_any, g_.Repeat(CanonicalAnyChar(), lo, hi));
      }
    }
    std::vector<ExprId> items;
    for (size_t i = 0; i < names.size(); ++i) {
      if (bad_names.count(names[i])) {
        if (req.count(names[i])) return g_.Nothing();  // required, yet no key may be spelled so
        continue;
      }
      DI_ASSIGN_OR_RETURN(ExprId v, Compile(*schemas[i], path + "/properties/" + names[i], depth + 1));
      items.push_back(g_.Seq({Lit(JsonQuote(names[i])), Ws(), Tok(":"), v, Ws()}));
      required.push_back(req.count(names[i]) ? 1 : 0);
    }
    // Other members: keys not listed (canonical spelling), by pattern, then the additional schema.
    std::vector<ExprId> extra_alts, witness_alts;
    std::vector<ExprId> listed_bodies;
    for (const auto& n : names) {
      std::string q = JsonQuote(n);
      listed_bodies.push_back(Lit(q.substr(1, q.size() - 2)));
    }
    auto key_body_excluding = [&](ExprId body, const std::vector<ExprId>& out) {
      return out.empty() ? body : g_.Minus(body, g_.Alt(out));
    };
    std::vector<ExprId> pattern_bodies;
    if (patterns) {
      for (auto p = patterns->begin(); p != patterns->end(); ++p) {
        RegexOptions ro;
        ro.full_match = false;
        ro.json_string = true;
        auto re = CompileRegex(p.key(), ro, &g_);
        if (!re.ok()) return re.status().WithContext(path + "/patternProperties");
        pattern_bodies.push_back(g_.And(*re, key_any));
      }
      // A key matching several patterns takes all their schemas: one alternative per set of patterns a key
      // can match together (pairwise overlapping), its keys those of every pattern in the set and of no
      // other that meets them all.
      std::vector<std::string> keys;
      std::vector<const Json*> values;
      for (auto p = patterns->begin(); p != patterns->end(); ++p) keys.push_back(p.key()), values.push_back(&p.value());
      const size_t k = keys.size();
      std::vector<std::vector<uint8_t>> meet(k, std::vector<uint8_t>(k, 1));
      for (size_t i = 0; i < k; ++i)
        for (size_t j = i + 1; j < k; ++j) meet[i][j] = meet[j][i] = PatternsMeet(keys[i], keys[j]) ? 1 : 0;
      constexpr size_t kMaxPatternSets = 64;
      std::vector<std::vector<size_t>> sets;
      // Cliques of the overlap graph, each grown from its smallest member upwards (no recursion).
      std::vector<std::vector<size_t>> stack;
      for (size_t i = k; i-- > 0;) stack.push_back({i});
      while (!stack.empty()) {
        std::vector<size_t> set = std::move(stack.back());
        stack.pop_back();
        if (sets.size() >= kMaxPatternSets)
          return Unsupported("patternProperties (more than " + std::to_string(kMaxPatternSets) + " overlapping pattern sets)", path);
        for (size_t j = k; j-- > set.back() + 1;) {
          bool all = true;
          for (size_t m : set) all = all && meet[m][j];
          if (!all) continue;
          std::vector<size_t> grown = set;
          grown.push_back(j);
          stack.push_back(std::move(grown));
        }
        sets.push_back(std::move(set));
      }
      for (const auto& set : sets) {
        ExprId body = pattern_bodies[set[0]];
        for (size_t m = 1; m < set.size(); ++m) body = g_.And(body, pattern_bodies[set[m]]);
        std::vector<ExprId> out = listed_bodies;
        for (size_t j = 0; j < k; ++j) {
          bool in = std::find(set.begin(), set.end(), j) != set.end(), all = true;
          for (size_t m : set) all = all && meet[m][j];
          if (!in && all) out.push_back(pattern_bodies[j]);
        }
        Json schema = *values[set[0]];
        std::string where = path + "/patternProperties/" + keys[set[0]];
        if (set.size() > 1) {
          schema = Json{{"allOf", Json::array()}};
          for (size_t m : set) schema["allOf"].push_back(*values[m]);
        }
        DI_ASSIGN_OR_RETURN(ExprId v, Compile(schema, where, depth + 1));
        extra_alts.push_back(g_.Seq({Lit("\""), key_body_excluding(body, out), Lit("\""), Ws(), Tok(":"), v, Ws()}));
        if (witness) {
          DI_ASSIGN_OR_RETURN(ExprId wk, KeyBody(witness->at("key"), key_body_excluding(body, out), where));
          DI_ASSIGN_OR_RETURN(ExprId wv, Compile(Json{{"allOf", Json::array({schema, witness->at("value")})}}, where, depth + 1));
          witness_alts.push_back(g_.Seq({Lit("\""), wk, Lit("\""), Ws(), Tok(":"), wv, Ws()}));
        }
      }
    }
    if (additional) {
      std::vector<ExprId> out = listed_bodies;
      out.insert(out.end(), pattern_bodies.begin(), pattern_bodies.end());
      DI_ASSIGN_OR_RETURN(ExprId v, Compile(*additional, path + "/additionalProperties", depth + 1));
      extra_alts.push_back(g_.Seq({Lit("\""), key_body_excluding(key_any, out), Lit("\""), Ws(), Tok(":"), v, Ws()}));
      if (witness) {
        DI_ASSIGN_OR_RETURN(ExprId wk, KeyBody(witness->at("key"), key_body_excluding(key_any, out), path));
        DI_ASSIGN_OR_RETURN(ExprId wv, Compile(Json{{"allOf", Json::array({*additional, witness->at("value")})}},
                                               path + "/additionalProperties", depth + 1));
        witness_alts.push_back(g_.Seq({Lit("\""), wk, Lit("\""), Ws(), Tok(":"), wv, Ws()}));
      }
    }
    bool has_extra = !extra_alts.empty();
    uint32_t min = 0, max = kUnbounded;
    DI_RETURN_IF_ERROR(ReadCount(s, "minProperties", 1e4, path, &min));
    DI_RETURN_IF_ERROR(ReadCount(s, "maxProperties", 1e4, path, &max));
    const ExprId extra = g_.Alt(std::move(extra_alts));
    if (witness) {
      // Other members with the witness among them: a required item of k other members then the witness,
      // one item to the count, so each k shifts the bounds by k (k up to 64 where they bind).
      if (witness_alts.empty()) return g_.Nothing();
      const ExprId wm = g_.Alt(std::move(witness_alts));
      const ExprId before = g_.Seq({extra, Tok(",")});
      std::vector<std::pair<ExprId, std::pair<uint32_t, uint32_t>>> xs;  // item, its bounds
      constexpr uint32_t kMaxSplit = 64;
      if (!has_extra) {
        xs.push_back({wm, {min, max}});
      } else if (min <= 1 && max == kUnbounded) {
        xs.push_back({g_.Seq({g_.Star(before), wm}), {min, max}});
      } else {
        const uint32_t top = max == kUnbounded ? (min > 0 ? min - 1 : 0) : max - 1;
        if (top > kMaxSplit) return Unsupported("not (of object keywords under min/maxProperties above 64)", path);
        for (uint32_t k = 0; k <= top; ++k) {
          const bool last = max == kUnbounded && k == top;
          xs.push_back({g_.Seq({g_.Repeat(before, k, last ? kUnbounded : k), wm}),
                        {min > k ? min - k : 0, max == kUnbounded ? kUnbounded : max - k}});
        }
      }
      std::vector<ExprId> alts;
      for (const auto& [x, bounds] : xs) {
        std::vector<ExprId> its = items;
        std::vector<uint8_t> req_flags = required;
        its.push_back(x);
        req_flags.push_back(1);
        if (has_extra) its.push_back(extra), req_flags.push_back(0);
        alts.push_back(g_.Seq({Tok("{"), g_.SepList(std::move(its), std::move(req_flags), Tok(","), true, has_extra, bounds.first, bounds.second), Lit("}")}));
      }
      return g_.Alt(std::move(alts));
    }
    if (has_extra) {
      items.push_back(extra);
      required.push_back(0);
    }
    ExprId body = g_.SepList(std::move(items), std::move(required), Tok(","), true, has_extra, min, max);
    return g_.Seq({Tok("{"), body, Lit("}")});
  }

  const Json& root_;
  const JsonSchemaOptions& o_;
  SchemaResolver r_;
  Grammar g_;
  std::map<std::string, uint32_t> ref_rules_;
  std::map<std::string, uint32_t> string_rules_;
  uint32_t any_value_rule_ = 0xFFFFFFFFu;
  uint32_t any_object_rule_ = 0xFFFFFFFFu;
  ExprId ws_ = 0xFFFFFFFFu;
  ExprId canon_char_ = 0xFFFFFFFFu;
  uint32_t own_pair_checks_ = 0;
  uint32_t* pair_checks_ = &own_pair_checks_;  // shared with the compilers of IntersectionEmpty
};

}  // namespace

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
