// Validation of one JSON instance against a schema, for the finite languages of the JSON Schema front end:
// an enum or const under other keywords (not, allOf members that cannot be merged, if/then/else, ...)
// accepts exactly its members that validate, whatever those keywords are, as long as each one that
// constrains instances is evaluated here. One that is not (unevaluated*, dynamic references) is
// kUnimplemented, and the compiler then takes its ordinary path.
//
// Semantics follow the standard as `jsonschema` implements it: numbers compare by value (1 == 1.0, and 1.0
// is an integer), objects compare regardless of member order, lengths count code points. One deliberate
// difference: the formats the compiler constrains (date, uuid, ...) are asserted here too, with the same
// regular expressions, so an enum's members meet the same format rule as the compiled strings do.
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "grammar/compiler.h"
#include "grammar/json_schema_internal.h"
#include "grammar/json_text.h"
#include "grammar/regex.h"

namespace deepinfer::grammar::json_schema_internal {

namespace {

bool IsInteger(const Json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && d == std::floor(d);
}

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

class Validator {
 public:
  Validator(const SchemaResolver& resolver, uint32_t max_depth) : r_(resolver), max_depth_(max_depth) {}

  Result<bool> Valid(const Json& schema, const Json& v, const std::string& path, uint32_t depth) {
    if (depth > max_depth_) return Status::ResourceExhausted("the schema nests deeper than " + std::to_string(max_depth_) + " levels");
    if (schema.is_boolean()) return schema.get<bool>();
    if (!schema.is_object()) return Invalid("a schema must be an object or a boolean", path);
    for (auto it = schema.begin(); it != schema.end(); ++it) {
      const std::string& k = it.key();
      if (UnsupportedKeywords().count(k) && !Implemented(k)) return Unsupported(k, path);
    }
    const uint32_t d = depth + 1;
    if (auto it = schema.find("$ref"); it != schema.end()) {
      if (!it->is_string()) return Invalid("$ref must be a string", path);
      // A negated definition: the instances its definition rejects (exact by construction, and the
      // definition's own keywords are all evaluated here).
      const std::optional<std::string> negated = SchemaResolver::NegatedRefTarget(it->get<std::string>());
      DI_ASSIGN_OR_RETURN(const Json* target, r_.Resolve(negated ? *negated : it->get<std::string>(), path));
      DI_ASSIGN_OR_RETURN(bool ok, Valid(*target, v, it->get<std::string>(), d));
      if (negated) ok = !ok;
      if (!ok || r_.RefOverridesSiblings()) return ok;
    }
    if (auto it = schema.find("type"); it != schema.end() && !TypeMatches(*it, v)) return false;
    if (auto it = schema.find("const"); it != schema.end()) {
      DI_ASSIGN_OR_RETURN(bool eq, Equal(*it, v, d));
      if (!eq) return false;
    }
    if (auto it = schema.find("enum"); it != schema.end()) {
      if (!it->is_array()) return Invalid("enum must be an array", path);
      DI_ASSIGN_OR_RETURN(bool found, InEnum(*it, v, d));
      if (!found) return false;
    }
    // The compiler's own keywords, from merging and negation: all of $patterns, none of $not_patterns,
    // one of each $any_patterns group, not one of $not_in.
    if (auto it = schema.find("$not_in"); it != schema.end() && it->is_array()) {
      for (const Json& e : *it) {
        DI_ASSIGN_OR_RETURN(bool eq, Equal(e, v, d));
        if (eq) return false;
      }
    }
    if (v.is_string()) {
      for (const char* k : {"$patterns", "$not_patterns"}) {
        auto it = schema.find(k);
        if (it == schema.end() || !it->is_array()) continue;
        for (const Json& p : *it) {
          if (!p.is_string()) return Invalid("pattern must be a string", path);
          DI_ASSIGN_OR_RETURN(bool hit, Matches(p.get<std::string>(), false, v.get<std::string>(), path));
          if (hit != (k[1] == 'p')) return false;
        }
      }
      if (auto it = schema.find("$any_patterns"); it != schema.end() && it->is_array()) {
        for (const Json& group : *it) {
          if (!group.is_array()) return Invalid("$any_patterns must hold arrays of patterns", path);
          bool hit = false;
          for (const Json& p : group) {
            if (!p.is_string()) return Invalid("pattern must be a string", path);
            DI_ASSIGN_OR_RETURN(hit, Matches(p.get<std::string>(), false, v.get<std::string>(), path));
            if (hit) break;
          }
          if (!hit) return false;
        }
      }
    }
    DI_ASSIGN_OR_RETURN(bool applicators, Applicators(schema, v, path, d));
    if (!applicators) return false;
    if (v.is_string()) return StringValid(schema, v.get<std::string>(), path);
    if (v.is_number()) return NumberValid(schema, v, path);
    if (v.is_array()) return ArrayValid(schema, v, path, d);
    if (v.is_object()) return ObjectValid(schema, v, path, d);
    return true;
  }

 private:
  static bool Implemented(const std::string& k) {
    return k == "if" || k == "then" || k == "else" || k == "dependentSchemas" || k == "dependentRequired" ||
           k == "dependencies" || k == "propertyNames" || k == "contains" || k == "minContains" || k == "maxContains";
  }

  static bool TypeMatches(const Json& type, const Json& v) {
    auto one = [&](const Json& t) {
      if (!t.is_string()) return false;
      const std::string& n = t.get_ref<const std::string&>();
      if (n == "null") return v.is_null();
      if (n == "boolean") return v.is_boolean();
      if (n == "object") return v.is_object();
      if (n == "array") return v.is_array();
      if (n == "string") return v.is_string();
      if (n == "number") return v.is_number();
      if (n == "integer") return IsInteger(v);
      if (n == "$fraction") return v.is_number() && !IsInteger(v);
      return false;
    };
    if (type.is_array()) {
      for (const Json& t : type)
        if (one(t)) return true;
      return false;
    }
    return one(type);
  }

  // Whether `v` equals a member of the enum array `e`. A large enum is indexed on first use by a hash that
  // equal scalars share (numbers by value), so validating each member of an enum of thousands against the
  // enum itself takes linear time, not quadratic. The index lives as long as the validator and is keyed
  // by the enum's address: every schema this class sees outlives it (the caller's, or the resolver's).
  Result<bool> InEnum(const Json& e, const Json& v, uint32_t depth) {
    constexpr size_t kIndexedEnum = 16;
    if (e.size() >= kIndexedEnum && !v.is_array() && !v.is_object()) {
      auto [index, fresh] = enum_index_.try_emplace(&e);
      if (fresh)
        for (const Json& m : e)
          if (!m.is_array() && !m.is_object()) index->second.emplace(ScalarHash(m), &m);
      // A container never equals a scalar, so only the scalars with v's hash are compared.
      for (auto [k, end] = index->second.equal_range(ScalarHash(v)); k != end; ++k) {
        DI_ASSIGN_OR_RETURN(bool eq, Equal(*k->second, v, depth));
        if (eq) return true;
      }
      return false;
    }
    for (const Json& m : e) {
      DI_ASSIGN_OR_RETURN(bool eq, Equal(m, v, depth));
      if (eq) return true;
    }
    return false;
  }
  // Equal scalars (Equal below) hash alike: numbers by their double value, so 1 and 1.0 meet.
  static size_t ScalarHash(const Json& v) {
    if (v.is_number()) {
      const double d = v.get<double>();
      return std::hash<double>{}(d == 0 ? 0.0 : d) ^ 0x9E3779B97F4A7C15ULL;
    }
    if (v.is_string()) return std::hash<std::string>{}(v.get_ref<const std::string&>());
    if (v.is_boolean()) return v.get<bool>() ? 1 : 2;
    return 3 + static_cast<size_t>(v.type());
  }

  Result<bool> Equal(const Json& a, const Json& b, uint32_t depth) {
    if (depth > max_depth_ * 4) return Status::ResourceExhausted("a value nests too deep");
    if (a.is_number() && b.is_number()) {
      if ((a.is_number_integer() || a.is_number_unsigned()) && (b.is_number_integer() || b.is_number_unsigned())) {
        return a == b;
      }
      return a.get<double>() == b.get<double>();
    }
    if (a.type() != b.type()) return false;
    if (a.is_array()) {
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        DI_ASSIGN_OR_RETURN(bool eq, Equal(a[i], b[i], depth + 1));
        if (!eq) return false;
      }
      return true;
    }
    if (a.is_object()) {
      if (a.size() != b.size()) return false;
      for (auto it = a.begin(); it != a.end(); ++it) {
        auto jt = b.find(it.key());
        if (jt == b.end()) return false;
        DI_ASSIGN_OR_RETURN(bool eq, Equal(it.value(), *jt, depth + 1));
        if (!eq) return false;
      }
      return true;
    }
    return a == b;
  }

  Result<bool> Applicators(const Json& s, const Json& v, const std::string& path, uint32_t d) {
    if (auto it = s.find("allOf"); it != s.end() && it->is_array()) {
      for (size_t i = 0; i < it->size(); ++i) {
        DI_ASSIGN_OR_RETURN(bool ok, Valid((*it)[i], v, path + "/allOf/" + std::to_string(i), d));
        if (!ok) return false;
      }
    }
    if (auto it = s.find("anyOf"); it != s.end() && it->is_array()) {
      bool any = false;
      for (size_t i = 0; i < it->size() && !any; ++i) {
        DI_ASSIGN_OR_RETURN(any, Valid((*it)[i], v, path + "/anyOf/" + std::to_string(i), d));
      }
      if (!any) return false;
    }
    if (auto it = s.find("oneOf"); it != s.end() && it->is_array()) {
      size_t n = 0;
      for (size_t i = 0; i < it->size(); ++i) {
        DI_ASSIGN_OR_RETURN(bool ok, Valid((*it)[i], v, path + "/oneOf/" + std::to_string(i), d));
        n += ok;
      }
      if (n != 1) return false;
    }
    if (auto it = s.find("not"); it != s.end()) {
      DI_ASSIGN_OR_RETURN(bool ok, Valid(*it, v, path + "/not", d));
      if (ok) return false;
    }
    if (auto it = s.find("if"); it != s.end() && r_.HasConditionals()) {
      DI_ASSIGN_OR_RETURN(bool cond, Valid(*it, v, path + "/if", d));
      const char* branch = cond ? "then" : "else";
      if (auto b = s.find(branch); b != s.end()) {
        DI_ASSIGN_OR_RETURN(bool ok, Valid(*b, v, path + "/" + branch, d));
        if (!ok) return false;
      }
    }
    return true;
  }

  // The automaton cached under `key` in the schema's shared cache, its root rule `name` defined once by
  // `define(grammar)` (an expression, or an error reported at `where`).
  template <class Define>
  Result<const CompiledGrammar*> CompiledOnce(const std::string& key, const char* name, const std::string& where,
                                              Define define) {
    SchemaResolver::CompiledPatterns& compiled = r_.Patterns();
    auto it = compiled.find(key);
    if (it == compiled.end()) {
      Grammar g;
      const uint32_t rule = g.AddRule(name);
      Result<ExprId> root = define(&g);
      if (!root.ok()) return root.status().WithContext(where);
      g.Define(rule, *root);
      g.set_root(rule);
      auto cg = grammar::Compile(g);
      if (!cg.ok()) return cg.status().WithContext(where);
      it = compiled.emplace(key, std::make_unique<CompiledGrammar>(std::move(*cg))).first;
    }
    return it->second.get();
  }

  // A pattern (or a format's expression, `full`) against the raw text.
  Result<bool> Matches(const std::string& pattern, bool full, const std::string& text, const std::string& path) {
    DI_ASSIGN_OR_RETURN(const CompiledGrammar* cg,
                        CompiledOnce((full ? "F" : "P") + pattern, "p", path + "/pattern", [&](Grammar* g) {
                          RegexOptions ro;
                          ro.full_match = full;
                          return CompileRegex(pattern, ro, g);
                        }));
    return cg->Matches(text);
  }

  // The `regex` format, by the compiler's own rules over the text's canonical JSON spelling (cached apart
  // from the patterns, whose keys start "P" or "F").
  Result<bool> ValidRegexFormat(const std::string& text, const std::string& path) {
    DI_ASSIGN_OR_RETURN(const CompiledGrammar* cg, CompiledOnce("R", "regex", path + "/format", [](Grammar* g) {
                          return Result<ExprId>(RegexFormatSyntax(g));
                        }));
    const std::string quoted = JsonQuote(text);
    return cg->Matches(std::string_view(quoted).substr(1, quoted.size() - 2));
  }

  Result<bool> StringValid(const Json& s, const std::string& text, const std::string& path) {
    const size_t n = CodePoints(text);
    if (auto it = s.find("minLength"); it != s.end() && it->is_number() && static_cast<double>(n) < it->get<double>()) return false;
    if (auto it = s.find("maxLength"); it != s.end() && it->is_number() && static_cast<double>(n) > it->get<double>()) return false;
    if (auto it = s.find("pattern"); it != s.end()) {
      if (!it->is_string()) return Invalid("pattern must be a string", path);
      DI_ASSIGN_OR_RETURN(bool ok, Matches(it->get<std::string>(), false, text, path));
      if (!ok) return false;
    }
    if (auto it = s.find("format"); it != s.end() && it->is_string()) {
      if (const std::string* re = FormatRegex(it->get<std::string>())) {
        DI_ASSIGN_OR_RETURN(bool ok, Matches(*re, true, text, path));
        if (!ok) return false;
      }
      if (*it == "regex" && RegexFormatEnforced(s)) {
        DI_ASSIGN_OR_RETURN(bool ok, ValidRegexFormat(text, path));
        if (!ok) return false;
      }
    }
    return true;
  }

  static Result<bool> NumberValid(const Json& s, const Json& v, const std::string& path) {
    const double x = v.get<double>();
    auto num = [&](const char* k) -> std::optional<double> {
      auto it = s.find(k);
      if (it != s.end() && it->is_number()) return it->get<double>();
      return std::nullopt;
    };
    auto flag = [&](const char* k) {
      auto it = s.find(k);
      return it != s.end() && it->is_boolean() && it->get<bool>();
    };
    if (auto m = num("minimum"); m && (flag("exclusiveMinimum") ? x <= *m : x < *m)) return false;
    if (auto m = num("maximum"); m && (flag("exclusiveMaximum") ? x >= *m : x > *m)) return false;
    if (auto m = num("exclusiveMinimum"); m && x <= *m) return false;
    if (auto m = num("exclusiveMaximum"); m && x >= *m) return false;
    if (auto it = s.find("multipleOf"); it != s.end() && it->is_number()) {
      DI_ASSIGN_OR_RETURN(bool multiple, MultipleOf(*it, v, path));
      if (!multiple) return false;
    }
    // The compiler's own, from merging and negation: every step of $multiples, none of $not_multiples.
    for (const char* key : {"$multiples", "$not_multiples"}) {
      auto it = s.find(key);
      if (it == s.end() || !it->is_array()) continue;
      for (const Json& m : *it) {
        DI_ASSIGN_OR_RETURN(bool multiple, MultipleOf(m, v, path));
        if (multiple != (key[1] == 'm')) return false;
      }
    }
    return true;
  }

  static Result<bool> MultipleOf(const Json& step, const Json& v, const std::string& path) {
    if (!step.is_number() || !(step.get<double>() > 0)) return Invalid("multipleOf must be positive", path);
    const double m = step.get<double>();
    if ((v.is_number_integer() || v.is_number_unsigned()) && (step.is_number_integer() || step.is_number_unsigned())) {
      const auto a = v.is_number_unsigned() ? static_cast<long double>(v.get<uint64_t>()) : static_cast<long double>(v.get<int64_t>());
      return std::fmod(a, static_cast<long double>(m)) == 0;
    }
    const double q = v.get<double>() / m;
    return std::isfinite(q) && q == std::floor(q);
  }

  Result<bool> ArrayValid(const Json& s, const Json& v, const std::string& path, uint32_t d) {
    const double n = static_cast<double>(v.size());
    if (auto it = s.find("minItems"); it != s.end() && it->is_number() && n < it->get<double>()) return false;
    if (auto it = s.find("maxItems"); it != s.end() && it->is_number() && n > it->get<double>()) return false;
    size_t covered = 0;
    auto each = [&](const Json& sub, size_t from, const std::string& where) -> Result<bool> {
      for (size_t i = from; i < v.size(); ++i) {
        DI_ASSIGN_OR_RETURN(bool ok, Valid(sub, v[i], where, d));
        if (!ok) return false;
      }
      return true;
    };
    const auto prefix = s.find("prefixItems");
    const auto items = s.find("items");
    const Json* tuple = prefix != s.end() && prefix->is_array() ? &*prefix
                        : items != s.end() && items->is_array() ? &*items
                                                                : nullptr;
    if (tuple) {
      for (size_t i = 0; i < tuple->size() && i < v.size(); ++i) {
        DI_ASSIGN_OR_RETURN(bool ok, Valid((*tuple)[i], v[i], path + "/prefixItems/" + std::to_string(i), d));
        if (!ok) return false;
      }
      covered = tuple->size();
    }
    if (items != s.end() && !items->is_array()) {
      DI_ASSIGN_OR_RETURN(bool ok, each(*items, covered, path + "/items"));
      if (!ok) return false;
    } else if (items != s.end() && items->is_array()) {
      if (auto add = s.find("additionalItems"); add != s.end()) {
        DI_ASSIGN_OR_RETURN(bool ok, each(*add, covered, path + "/additionalItems"));
        if (!ok) return false;
      }
    }
    if (auto it = s.find("uniqueItems"); it != s.end() && it->is_boolean() && it->get<bool>()) {
      for (size_t i = 0; i < v.size(); ++i)
        for (size_t j = i + 1; j < v.size(); ++j) {
          DI_ASSIGN_OR_RETURN(bool eq, Equal(v[i], v[j], d));
          if (eq) return false;
        }
    }
    if (auto it = s.find("$contains"); it != s.end() && it->is_array()) {  // merged contains: one hit each
      for (const Json& c : *it) {
        bool hit = false;
        for (size_t i = 0; i < v.size() && !hit; ++i) {
          DI_ASSIGN_OR_RETURN(hit, Valid(c, v[i], path + "/contains", d));
        }
        if (!hit) return false;
      }
    }
    if (auto it = s.find("contains"); it != s.end()) {
      double hits = 0;
      for (const Json& e : v) {
        DI_ASSIGN_OR_RETURN(bool ok, Valid(*it, e, path + "/contains", d));
        hits += ok;
      }
      double lo = 1;
      if (auto m = s.find("minContains"); m != s.end() && m->is_number()) lo = m->get<double>();
      if (hits < lo) return false;
      if (auto m = s.find("maxContains"); m != s.end() && m->is_number() && hits > m->get<double>()) return false;
    }
    return true;
  }

  Result<bool> ObjectValid(const Json& s, const Json& v, const std::string& path, uint32_t d) {
    const double n = static_cast<double>(v.size());
    if (auto it = s.find("minProperties"); it != s.end() && it->is_number() && n < it->get<double>()) return false;
    if (auto it = s.find("maxProperties"); it != s.end() && it->is_number() && n > it->get<double>()) return false;
    auto has_all = [&](const Json& names) {
      if (!names.is_array()) return true;
      for (const Json& r : names)
        if (r.is_string() && !v.contains(r.get<std::string>())) return false;
      return true;
    };
    if (auto it = s.find("required"); it != s.end() && !has_all(*it)) return false;
    const auto props = s.find("properties");
    const auto patterns = s.find("patternProperties");
    const auto additional = s.find("additionalProperties");
    const auto names = s.find("propertyNames");
    for (auto m = v.begin(); m != v.end(); ++m) {
      const std::string& key = m.key();
      bool matched = false, listed = false;
      if (props != s.end() && props->is_object()) {
        if (auto p = props->find(key); p != props->end()) {
          matched = listed = true;
          DI_ASSIGN_OR_RETURN(bool ok, Valid(*p, m.value(), path + "/properties/" + key, d));
          if (!ok) return false;
        }
      }
      if (patterns != s.end() && patterns->is_object()) {
        for (auto p = patterns->begin(); p != patterns->end(); ++p) {
          DI_ASSIGN_OR_RETURN(bool hit, Matches(p.key(), false, key, path + "/patternProperties"));
          if (!hit) continue;
          matched = true;
          DI_ASSIGN_OR_RETURN(bool ok, Valid(p.value(), m.value(), path + "/patternProperties/" + p.key(), d));
          if (!ok) return false;
        }
      }
      // $pattern_guards (from merging): a guard's schema holds for a key no property lists that a pattern
      // matches and none of the guard's patterns does.
      if (matched && !listed) {
        if (auto guards = s.find("$pattern_guards"); guards != s.end() && guards->is_array()) {
          for (const Json& g : *guards) {
            if (!g.is_object() || !g.contains("schema") || !g.contains("patterns") || !g["patterns"].is_array())
              return Invalid("$pattern_guards must hold {patterns, schema} objects", path);
            bool own = false;
            for (const Json& p : g["patterns"]) {
              if (!p.is_string()) return Invalid("pattern must be a string", path);
              DI_ASSIGN_OR_RETURN(bool hit, Matches(p.get<std::string>(), false, key, path + "/patternProperties"));
              own = own || hit;
            }
            if (own) continue;
            DI_ASSIGN_OR_RETURN(bool ok, Valid(g["schema"], m.value(), path + "/$pattern_guards", d));
            if (!ok) return false;
          }
        }
      }
      if (!matched && additional != s.end()) {
        DI_ASSIGN_OR_RETURN(bool ok, Valid(*additional, m.value(), path + "/additionalProperties", d));
        if (!ok) return false;
      }
      if (names != s.end()) {
        DI_ASSIGN_OR_RETURN(bool ok, Valid(*names, Json(key), path + "/propertyNames", d));
        if (!ok) return false;
      }
    }
    // $some (from negations): a member whose key and value meet the given schemas, for each.
    if (auto it = s.find("$some"); it != s.end() && it->is_array()) {
      static const Json kAny(true);
      for (const Json& w : *it) {
        bool hit = false;
        // The schemas by reference (never a copy): the enum index below is keyed by where a schema lives.
        auto part = [&](const char* name) -> const Json& {
          auto p = w.find(name);
          return p == w.end() ? kAny : *p;
        };
        for (auto m = v.begin(); m != v.end() && !hit; ++m) {
          DI_ASSIGN_OR_RETURN(bool key_ok, Valid(part("key"), Json(m.key()), path + "/$some", d));
          if (!key_ok) continue;
          DI_ASSIGN_OR_RETURN(hit, Valid(part("value"), m.value(), path + "/$some", d));
        }
        if (!hit) return false;
      }
    }
    // dependencies (draft 7: names or a schema), dependentRequired and dependentSchemas (2019-09).
    for (const char* k : {"dependencies", "dependentRequired", "dependentSchemas"}) {
      auto it = s.find(k);
      if (it == s.end() || !it->is_object()) continue;
      for (auto dep = it->begin(); dep != it->end(); ++dep) {
        if (!v.contains(dep.key())) continue;
        if (dep.value().is_array()) {
          if (!has_all(dep.value())) return false;
        } else {
          DI_ASSIGN_OR_RETURN(bool ok, Valid(dep.value(), v, path + "/" + k + "/" + dep.key(), d));
          if (!ok) return false;
        }
      }
    }
    return true;
  }

  const SchemaResolver& r_;
  uint32_t max_depth_;
  std::unordered_map<const Json*, std::unordered_multimap<size_t, const Json*>> enum_index_;
};

}  // namespace

Result<Json> ValidMembers(const SchemaResolver& resolver, uint32_t max_depth, const Json& schema, const Json& values,
                          const std::string& path) {
  Validator validator(resolver, max_depth);
  Json out = Json::array();
  for (const Json& v : values) {
    DI_ASSIGN_OR_RETURN(bool ok, validator.Valid(schema, v, path, 0));
    if (ok) out.push_back(v);
  }
  return out;
}

Result<bool> ValidatesAll(const SchemaResolver& resolver, uint32_t max_depth, const std::vector<const Json*>& schemas,
                          const Json& v, const std::string& path) {
  Validator validator(resolver, max_depth);
  for (const Json* s : schemas) {
    DI_ASSIGN_OR_RETURN(bool ok, validator.Valid(*s, v, path, 0));
    if (!ok) return false;
  }
  return true;
}

}  // namespace deepinfer::grammar::json_schema_internal
