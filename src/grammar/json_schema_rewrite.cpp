// Keywords the JSON Schema front end lowers to others before compiling: `not` through an exact negation of
// its schema (a reference into a recursive definition through a negated definition of its own),
// if/then/else, dependencies, trivial propertyNames, and oneOf of required-only branches.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "grammar/json_schema_internal.h"

namespace deepinfer::grammar::json_schema_internal {

namespace {

// The keywords that constrain instances (in any draft); others are unknown, so they constrain nothing.
bool ConstrainingKeyword(const std::string& k) {
  static const std::set<std::string> known = {
      "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties",
      "minProperties", "maxProperties", "propertyNames", "dependencies", "dependentRequired",
      "dependentSchemas", "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
      "contains", "minContains", "maxContains", "minLength", "maxLength", "pattern", "format", "minimum",
      "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "allOf", "anyOf", "oneOf", "not", "if",
      "then", "else", "$ref", "$dynamicRef", "$recursiveRef", "unevaluatedProperties", "unevaluatedItems",
      "$patterns", "$not_patterns", "$not_in", "$contains", "$some", "$any_patterns", "$multiples",
      "$not_multiples", "$pattern_guards"};
  return known.count(k) > 0;
}

// The types of instances a keyword can reject: each of these constrains one type only and holds for every
// other (kAllTypes for the rest).
// Negated definitions one schema may build: each is about as large as the definition it negates.
constexpr size_t kMaxNegatedDefinitions = 64;

uint8_t TypesConstrainedBy(const std::string& k) {
  static const std::set<std::string> strings = {"minLength", "maxLength", "pattern", "format", "$patterns",
                                                "$not_patterns", "$any_patterns"};
  static const std::set<std::string> numbers = {"minimum",    "maximum",    "exclusiveMinimum", "exclusiveMaximum",
                                                "multipleOf", "$multiples", "$not_multiples"};
  static const std::set<std::string> arrays = {"items", "prefixItems", "additionalItems", "minItems", "maxItems",
                                               "uniqueItems", "contains", "$contains", "minContains", "maxContains",
                                               "unevaluatedItems"};
  static const std::set<std::string> objects = {"properties", "required", "additionalProperties", "patternProperties",
                                                "minProperties", "maxProperties", "propertyNames", "dependencies",
                                                "dependentRequired", "dependentSchemas", "unevaluatedProperties", "$some",
                                                "$pattern_guards"};
  if (strings.count(k)) return kString;
  if (numbers.count(k)) return kInteger | kNumber;
  if (arrays.count(k)) return kArray;
  if (objects.count(k)) return kObject;
  return kAllTypes;
}

// Schema dependencies that each only restrict one same member (the tag) to listed values, as schema
// stores say which members go with which kind of object: {"dependencies": {"a": {"properties": {"type":
// {"enum": [...]}}}, ...}}. As one anyOf per dependency, merged, they multiply out to two branches per
// dependency; split instead by the tag's value, each cell decides every dependency: the tag absent (each
// holds vacuously), the tag equal to a listed value (the members whose list lacks it are forbidden), or
// the tag present with another value (every dependent member forbidden). The cells are disjoint and
// exactly the original. nullopt where the dependencies have another shape.
std::optional<Json> DependenciesByTag(const Json& deps) {
  std::string tag;
  std::vector<std::pair<std::string, Json>> lists;  // dependent member -> the tag's values it allows
  Json named = Json::array();                       // every listed value, in order of appearance
  for (auto d = deps.begin(); d != deps.end(); ++d) {
    if (!d->is_object()) return std::nullopt;
    const Json* props = nullptr;
    for (auto k = d->begin(); k != d->end(); ++k) {
      if (AnnotationKeywords().count(k.key())) continue;
      if (k.key() != "properties" || !k->is_object() || k->size() != 1) return std::nullopt;
      props = &*k;
    }
    if (!props) return std::nullopt;
    const std::string& member = props->begin().key();
    const Json& values_schema = props->begin().value();
    if ((!tag.empty() && member != tag) || member == d.key() || !values_schema.is_object()) return std::nullopt;
    tag = member;
    Json values;
    for (auto q = values_schema.begin(); q != values_schema.end(); ++q) {
      if (AnnotationKeywords().count(q.key())) continue;
      if (q.key() == "const" && values.is_null()) values = Json::array({*q});
      else if (q.key() == "enum" && q->is_array() && values.is_null()) values = *q;
      else return std::nullopt;
    }
    if (values.is_null()) return std::nullopt;
    for (const Json& v : values)
      if (std::find(named.begin(), named.end(), v) == named.end()) named.push_back(v);
    lists.emplace_back(d.key(), std::move(values));
  }
  if (tag.empty()) return std::nullopt;
  Json cells = Json::array({Json{{"properties", Json{{tag, false}}}}});
  auto cell = [&](Json tag_schema, const Json* value) {
    Json props = Json{{tag, std::move(tag_schema)}};
    for (const auto& [member, values] : lists)
      if (!value || std::find(values.begin(), values.end(), *value) == values.end()) props[member] = false;
    return Json{{"required", Json::array({tag})}, {"properties", std::move(props)}};
  };
  for (const Json& v : named) cells.push_back(cell(Json{{"const", v}}, &v));
  cells.push_back(cell(Json{{"not", Json{{"enum", named}}}}, nullptr));
  return Json{{"anyOf", std::move(cells)}};
}

}  // namespace

// Keywords lowered to others before compiling (nullopt: none here): `not` through its exact negation
// (Negate), if/then/else as anyOf [allOf [if, then], allOf [not if, else]], dependencies (and the
// 2019-09 dependentRequired/dependentSchemas) as "the name absent, or present and the dependency
// holding", propertyNames that every string meets dropped.
Result<std::optional<Json>> SchemaResolver::Rewrite(const Json& s, const std::string& path, uint32_t depth) const {
  if (!conditionals_ && (s.contains("if") || s.contains("then") || s.contains("else"))) {
    Json rest = s;
    DropUnknownConditionals(&rest);
    return std::optional<Json>(std::move(rest));
  }
  if (auto it = s.find("not"); it != s.end()) {
    Json rest = s;
    rest.erase("not");
    // Only instances of the types the rest allows meet the negation.
    std::optional<Json> neg = Negate(*it, path + "/not", depth + 1, TypesOf(rest));
    if (!neg) return Unsupported("not", path);
    DI_ASSIGN_OR_RETURN(Json m, Merge(rest, *neg, path, depth + 1));
    return std::optional<Json>(std::move(m));
  }
  if (auto it = s.find("if"); it != s.end()) {
    std::optional<Json> neg = Negate(*it, path + "/if", depth + 1, TypesOf(s));
    if (!neg) return Unsupported("if", path);
    Json rest = s;
    const Json then = rest.value("then", Json(true)), otherwise = rest.value("else", Json(true));
    const Json cond = *it;
    rest.erase("if");
    rest.erase("then");
    rest.erase("else");
    Json alt = {{"anyOf", Json::array({Json{{"allOf", Json::array({cond, then})}}, Json{{"allOf", Json::array({*neg, otherwise})}}})}};
    DI_ASSIGN_OR_RETURN(Json m, Merge(rest, alt, path, depth + 1));
    return std::optional<Json>(std::move(m));
  }
  if (s.contains("then") || s.contains("else")) {  // without `if` they do nothing
    Json rest = s;
    rest.erase("then");
    rest.erase("else");
    return std::optional<Json>(std::move(rest));
  }
  for (const char* k : {"dependencies", "dependentRequired", "dependentSchemas"}) {
    auto it = s.find(k);
    if (it == s.end()) continue;
    if (!it->is_object()) return Invalid(std::string(k) + " must be an object", path);
    if (std::optional<Json> cells = DependenciesByTag(*it)) {
      Json rest = s;
      rest.erase(k);
      DI_ASSIGN_OR_RETURN(Json m, Merge(rest, *cells, path, depth + 1));
      return std::optional<Json>(std::move(m));
    }
    Json all = Json::array();
    for (auto d = it->begin(); d != it->end(); ++d) {
      Json present;
      if (d.value().is_array()) {
        Json names = Json::array({d.key()});
        for (const Json& n : d.value()) names.push_back(n);
        present = Json{{"required", names}};
      } else {
        present = Json{{"allOf", Json::array({Json{{"required", Json::array({d.key()})}}, d.value()})}};
      }
      all.push_back(Json{{"anyOf", Json::array({Json{{"properties", Json{{d.key(), false}}}}, present})}});
    }
    Json rest = s;
    rest.erase(k);
    if (all.empty()) return std::optional<Json>(std::move(rest));
    DI_ASSIGN_OR_RETURN(Json m, Merge(rest, Json{{"allOf", all}}, path, depth + 1));
    return std::optional<Json>(std::move(m));
  }
  if (auto it = s.find("propertyNames"); it != s.end()) {
    // Keys are strings: a schema that every string meets constrains nothing.
    bool trivial = it->is_boolean() && it->get<bool>();
    if (it->is_object()) {
      trivial = true;
      for (auto k = it->begin(); k != it->end(); ++k)
        if (!AnnotationKeywords().count(k.key()) && !(k.key() == "type" && k.value() == "string")) trivial = false;
    }
    if (!trivial) {
      // Keys under a pattern, lengths, enum/const or a type string: the object compiler restricts its keys
      // (ObjectBody).
      DI_ASSIGN_OR_RETURN(Json names, Inline(*it, path + "/propertyNames", depth + 1));
      if (names.is_boolean()) return std::optional<Json>();
      for (auto k = names.begin(); k != names.end(); ++k)
        if (!AnnotationKeywords().count(k.key()) && ConstrainingKeyword(k.key()) &&
            !(k.key() == "type" && k.value() == "string") && k.key() != "pattern" && k.key() != "$patterns" &&
            k.key() != "minLength" && k.key() != "maxLength" && k.key() != "enum" && k.key() != "const")
          return Unsupported("propertyNames", path);
      return std::optional<Json>();
    }
    Json rest = s;
    rest.erase("propertyNames");
    return std::optional<Json>(std::move(rest));
  }
  return std::optional<Json>();
}

// Several conditionals at once. Each `if` that tests members by value only ({properties: {p: {const} or
// {enum}}, required, type: object}) is decided by which of the tested values each member has: one of the
// values some `if` names, another value, or none (absent). Those classes, over every tested member, split
// the objects into cells where every `if` is decided; each cell takes the then/else they select, and
// non-objects (where properties and required hold vacuously) take the thens of the ifs that do not ask
// for an object. Exact; cells proven empty (a required member the cell lacks) are dropped, and more than
// kMaxCells cells is an error.
Result<Json> SchemaResolver::Conditionals(const std::vector<Json>& conditions, uint8_t types, const std::string& path,
                                          uint32_t depth) const {
  constexpr size_t kMaxCells = 128;
  const Status unsupported = Unsupported("allOf with two 'if' (other than tests of member values)", path);
  struct Test {
    std::vector<std::pair<std::string, Json>> values;  // member -> the values it must be one of
    std::set<std::string> required;
    bool object = false;  // the if asks for an object
  };
  std::vector<Test> tests;
  std::vector<std::string> members;  // tested members, in order of appearance
  std::map<std::string, Json> named;  // member -> every value some if names
  for (const Json& c : conditions) {
    DI_ASSIGN_OR_RETURN(Json cond, Inline(c.at("if"), path + "/if", depth + 1));
    if (!cond.is_object()) return unsupported;
    Test t;
    for (auto k = cond.begin(); k != cond.end(); ++k) {
      if (AnnotationKeywords().count(k.key()) || !ConstrainingKeyword(k.key())) continue;
      if (k.key() == "type" && k.value() == "object") {
        t.object = true;
      } else if (k.key() == "required" && k->is_array()) {
        for (const Json& n : *k)
          if (n.is_string()) t.required.insert(n.get<std::string>());
      } else if (k.key() == "properties" && k->is_object()) {
        for (auto p = k->begin(); p != k->end(); ++p) {
          Json vals;
          if (!p->is_object()) return unsupported;
          for (auto q = p->begin(); q != p->end(); ++q) {
            if (AnnotationKeywords().count(q.key()) || !ConstrainingKeyword(q.key())) continue;
            if (q.key() == "const") vals = Json::array({*q});
            else if (q.key() == "enum" && q->is_array()) vals = *q;
            else if (q.key() != "type") return unsupported;  // a type beside the values adds nothing new
          }
          if (vals.is_null()) return unsupported;
          if (auto tp = p->find("type"); tp != p->end()) {
            Json kept = Json::array();
            for (const Json& v : vals)
              if (TypesOf(Json{{"type", *tp}}) & TypesOf(Json{{"const", v}})) kept.push_back(v);
            vals = kept;
          }
          if (!named.count(p.key())) members.push_back(p.key()), named[p.key()] = Json::array();
          for (const Json& v : vals)
            if (std::find(named[p.key()].begin(), named[p.key()].end(), v) == named[p.key()].end())
              named[p.key()].push_back(v);
          t.values.emplace_back(p.key(), vals);
        }
      } else {
        return unsupported;
      }
    }
    for (const auto& r : t.required)
      if (!named.count(r)) members.push_back(r), named[r] = Json::array();
    tests.push_back(std::move(t));
  }
  // Classes of a member: 0..n-1 its named values, n another value, n+1 absent.
  size_t cells = 1;
  for (const auto& m : members) {
    cells *= named[m].size() + 2;
    if (cells > kMaxCells) return Unsupported("allOf with two 'if' (more than " + std::to_string(kMaxCells) + " cases)", path);
  }
  Json alternatives = Json::array();
  auto add_cell = [&](Json cell, const std::vector<bool>& holds) -> Status {
    for (size_t k = 0; k < conditions.size(); ++k) {
      const char* branch = holds[k] ? "then" : "else";
      if (auto b = conditions[k].find(branch); b != conditions[k].end()) {
        DI_ASSIGN_OR_RETURN(cell, Merge(std::move(cell), *b, path + "/" + branch, depth + 1));
      }
    }
    // A required member the cell forbids: nothing is in it.
    if (cell.is_object())
      if (auto req = cell.find("required"); req != cell.end() && req->is_array())
        for (const Json& n : *req)
          if (auto props = cell.find("properties"); n.is_string() && props != cell.end() && props->is_object())
            if (auto p = props->find(n.get<std::string>()); p != props->end() && NeverHolds(*p)) return Status::Ok();
    alternatives.push_back(std::move(cell));
    return Status::Ok();
  };
  if (types & kObject) {
    std::vector<size_t> cls(members.size(), 0);
    for (size_t n = 0; n < cells; ++n) {
      size_t rest = n;
      for (size_t i = 0; i < members.size(); ++i) cls[i] = rest % (named[members[i]].size() + 2), rest /= named[members[i]].size() + 2;
      Json props = Json::object(), required = Json::array();
      for (size_t i = 0; i < members.size(); ++i) {
        const Json& vals = named[members[i]];
        if (cls[i] < vals.size()) {
          props[members[i]] = Json{{"const", vals[cls[i]]}};
          required.push_back(members[i]);
        } else if (cls[i] == vals.size()) {
          if (vals.empty()) props[members[i]] = true;
          else props[members[i]] = Json{{"not", Json{{"enum", vals}}}};
          required.push_back(members[i]);
        } else {
          props[members[i]] = false;
        }
      }
      std::vector<bool> holds;
      for (const Test& t : tests) {
        bool h = true;
        for (const auto& r : t.required) {
          const size_t i = static_cast<size_t>(std::find(members.begin(), members.end(), r) - members.begin());
          h = h && cls[i] != named[r].size() + 1;
        }
        for (const auto& [m, vals] : t.values) {
          const size_t i = static_cast<size_t>(std::find(members.begin(), members.end(), m) - members.begin());
          const Json& all = named[m];
          if (cls[i] < all.size()) h = h && std::find(vals.begin(), vals.end(), all[cls[i]]) != vals.end();
          else if (cls[i] == all.size()) h = false;
        }
        holds.push_back(h);
      }
      DI_RETURN_IF_ERROR(add_cell(Json{{"type", "object"}, {"properties", props}, {"required", required}}, holds));
    }
  }
  if (types & ~kObject & kAllTypes) {
    std::vector<bool> holds;
    for (const Test& t : tests) holds.push_back(!t.object);
    DI_RETURN_IF_ERROR(add_cell(Json{{"not", Json{{"type", "object"}}}}, holds));
  }
  if (alternatives.empty()) return Json(false);
  return Json{{"anyOf", std::move(alternatives)}};
}

// The negation of a schema as a schema the compiler takes, for the forms where it is exact (nullopt
// otherwise): booleans, type sets, required (an object missing a name), properties (an object with a
// member that fails its schema), string patterns and lengths, array counts, enum/const members (strings
// and other scalars by $not_in, integral numbers by the ranges around them, objects as the objects equal
// to them), multipleOf (for 1 the numbers with a fraction, else the numbers no multiple
// of the step: $not_multiples), and not/anyOf/allOf of those. Keywords that apply
// to one type only hold for every other type, so their negation is that type failing them, and none at
// all where `within` holds no instance of that type.
std::optional<Json> SchemaResolver::Negate(const Json& schema, const std::string& path, uint32_t depth, uint8_t within) const {
  if (depth > o_.max_depth) return std::nullopt;
  if (schema.is_boolean()) return Json(!schema.get<bool>());
  // A reference alone (annotations aside) negates as a reference: a recursive target cannot be inlined.
  if (auto ref = schema.is_object() ? schema.find("$ref") : schema.end(); schema.is_object() && ref != schema.end() && ref->is_string()) {
    bool alone = true;
    for (auto k = schema.begin(); k != schema.end() && !ref_overrides_; ++k)
      if (k.key() != "$ref" && !AnnotationKeywords().count(k.key()) && k.key().rfind("x-", 0) != 0) alone = false;
    if (alone) return NegateRef(ref->get<std::string>(), path, depth + 1, within);
  }
  auto inlined = Inline(schema, path, depth + 1);
  // Not an object: a boolean schema negates to its opposite; anything else (an array where a keyword's value
  // is not a schema) has no negation here.
  if (!inlined.ok() || !inlined->is_object())
    return inlined.ok() && inlined->is_boolean() ? std::optional<Json>(Json(!inlined->get<bool>())) : std::nullopt;
  const Json& s = *inlined;
  Json any = Json::array();  // not (A and B and ...) = (not A) or (not B) or ...
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    const Json& v = it.value();
    if (AnnotationKeywords().count(k) || k.rfind("x-", 0) == 0 || !ConstrainingKeyword(k)) continue;
    // An annotation; or `regex`, whose failing strings (no valid pattern) no grammar here spells: taken as
    // met, the negation leaves them out, a subset of the exact one (Negate recurses only into negations, so
    // the subset carries through `not` and oneOf's other branches without turning into a superset).
    if (k == "format" && v.is_string() && !FormatRegex(v.get<std::string>())) continue;
    if ((TypesConstrainedBy(k) & within) == 0) continue;  // fails only for instances the caller never has
    if (k == "type") {
      const uint8_t keep = static_cast<uint8_t>(~SchemaResolver::TypesOf(Json{{"type", v}})) & kAllTypes;
      Json t = Json::array();
      if (keep & kNull) t.push_back("null");
      if (keep & kBool) t.push_back("boolean");
      if (keep & kObject) t.push_back("object");
      if (keep & kArray) t.push_back("array");
      if (keep & kString) t.push_back("string");
      if ((keep & kInteger) && (keep & kNumber)) t.push_back("number");
      else if (keep & kInteger) t.push_back("integer");
      else if (keep & kNumber) t.push_back("$fraction");  // numbers but not integers: no standard type says it
      any.push_back(Json{{"type", t}});
    } else if (k == "required" && v.is_array()) {
      const auto props = s.find("properties");
      for (const Json& n : v) {
        if (!n.is_string()) return std::nullopt;
        if (props != s.end() && props->is_object() && props->contains(n.get<std::string>())) continue;  // below
        any.push_back(Json{{"type", "object"}, {"properties", Json{{n.get<std::string>(), false}}}});
      }
    } else if (k == "properties" && v.is_object()) {
      const auto req = s.find("required");
      for (auto p = v.begin(); p != v.end(); ++p) {
        const Descent member(negated_.get());
        auto neg = Negate(p.value(), path + "/properties/" + p.key(), depth + 1);
        if (!neg) return std::nullopt;
        // A required member: absent, or present and failing, is one case (properties hold for absent ones).
        if (req != s.end() && req->is_array() && std::find(req->begin(), req->end(), Json(p.key())) != req->end())
          any.push_back(Json{{"type", "object"}, {"properties", Json{{p.key(), *neg}}}});
        else
          any.push_back(Json{{"type", "object"}, {"required", Json::array({p.key()})}, {"properties", Json{{p.key(), *neg}}}});
      }
    } else if (k == "pattern" && v.is_string()) {
      any.push_back(Json{{"type", "string"}, {"$not_patterns", Json::array({v})}});
    } else if (k == "$any_patterns" && v.is_array()) {
      // A string matching none of some group's patterns.
      for (const Json& group : v) any.push_back(Json{{"type", "string"}, {"$not_patterns", group}});
    } else if ((k == "minLength" || k == "maxLength" || k == "minItems" || k == "maxItems" || k == "minProperties" ||
                k == "maxProperties") && v.is_number()) {
      const double n = v.get<double>();
      const bool min = k.rfind("min", 0) == 0;
      const std::string what = k.substr(3);
      const char* type = what == "Length" ? "string" : what == "Items" ? "array" : "object";
      if (min && n <= 0) {
        any.push_back(false);
      } else {
        any.push_back(Json{{"type", type}, {(min ? "max" : "min") + what, min ? n - 1 : n + 1}});
      }
    } else if (k == "format" && v.is_string()) {
      // A string the format's regex (a full match) rejects.
      any.push_back(Json{{"type", "string"}, {"$not_patterns", Json::array({"^(?:" + *FormatRegex(v.get<std::string>()) + ")$"})}});
    } else if ((k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum") && v.is_number()) {
      // A number on the other side of the bound; draft 4's boolean exclusiveMinimum/Maximum make its
      // minimum/maximum exclusive, so the other side then includes the bound.
      const bool lower = k == "minimum" || k == "exclusiveMinimum";
      bool exclusive = k.rfind("exclusive", 0) == 0;
      if (!exclusive) {
        auto flag = s.find(lower ? "exclusiveMinimum" : "exclusiveMaximum");
        exclusive = flag != s.end() && flag->is_boolean() && flag->get<bool>();
      }
      const char* other = lower ? (exclusive ? "maximum" : "exclusiveMaximum") : (exclusive ? "minimum" : "exclusiveMinimum");
      any.push_back(Json{{"type", "number"}, {other, v}});
    } else if (k == "multipleOf" && v.is_number() && v.get<double>() == 1.0) {
      // A multiple of 1 is an integer (1.0 too): the other side is the numbers with a fraction.
      any.push_back(Json{{"type", "$fraction"}});
    } else if ((k == "multipleOf" && v.is_number()) || (k == "$multiples" && v.is_array())) {
      // A number that is no multiple of the step (the compiler's remainder automaton, taken out).
      for (const Json& m : k == "multipleOf" ? Json::array({v}) : v) any.push_back(Json{{"type", "number"}, {"$not_multiples", Json::array({m})}});
    } else if (k == "$not_multiples" && v.is_array()) {
      for (const Json& m : v) any.push_back(Json{{"type", "number"}, {"multipleOf", m}});
    } else if ((k == "exclusiveMinimum" || k == "exclusiveMaximum") && v.is_boolean()) {
      continue;  // draft 4's flag: read with its minimum/maximum above
    } else if ((k == "enum" && v.is_array()) || k == "const") {
      const Json values = k == "const" ? Json::array({v}) : v;
      if (std::any_of(values.begin(), values.end(), [](const Json& x) { return x.is_object(); })) {
        // An object member has many spellings (member order): read as the schema of the objects equal to
        // it, the enum is an anyOf whose negation is exact where theirs are.
        Json alternatives = Json::array(), others = Json::array();
        for (const Json& x : values) {
          if (!x.is_object()) {
            others.push_back(x);
            continue;
          }
          Json equal = {{"type", "object"}, {"additionalProperties", false}, {"required", Json::array()}, {"properties", Json::object()}};
          for (auto m = x.begin(); m != x.end(); ++m) {
            equal["required"].push_back(m.key());
            equal["properties"][m.key()] = Json{{"const", m.value()}};
          }
          alternatives.push_back(std::move(equal));
        }
        if (!others.empty()) alternatives.push_back(Json{{"enum", std::move(others)}});
        auto neg = Negate(Json{{"anyOf", std::move(alternatives)}}, path + "/" + k, depth + 1, within);
        if (!neg) return std::nullopt;
        any.push_back(std::move(*neg));
        continue;
      }
      Json scalars = Json::array();
      std::vector<int64_t> numbers;
      for (const Json& x : values) {
        if (x.is_array()) return std::nullopt;
        if (!x.is_number()) {
          scalars.push_back(x);
          continue;
        }
        // A number has many spellings (1, 1.0, 1e0): it is kept out by the ranges around it, exact for
        // integers that a double holds exactly (written 9 or 9.0).
        constexpr int64_t kExactInDouble = int64_t{1} << 53;
        if (x.is_number_float()) {
          const double d = x.get<double>();
          if (d != std::floor(d) || !(std::fabs(d) <= static_cast<double>(kExactInDouble))) return std::nullopt;
          numbers.push_back(static_cast<int64_t>(d));
          continue;
        }
        if ((x.is_number_unsigned() && x.get<uint64_t>() > uint64_t{kExactInDouble}) ||
            (!x.is_number_unsigned() && std::llabs(x.get<int64_t>()) > kExactInDouble))
          return std::nullopt;
        numbers.push_back(x.get<int64_t>());
      }
      if (numbers.empty()) {
        any.push_back(Json{{"$not_in", values}});
        continue;
      }
      Json other_types = Json{{"type", Json::array({"null", "boolean", "object", "array", "string"})}};
      if (!scalars.empty()) other_types["$not_in"] = scalars;
      any.push_back(std::move(other_types));
      std::sort(numbers.begin(), numbers.end());
      numbers.erase(std::unique(numbers.begin(), numbers.end()), numbers.end());
      any.push_back(Json{{"type", "number"}, {"exclusiveMaximum", numbers.front()}});
      for (size_t i = 0; i + 1 < numbers.size(); ++i)
        // Between two consecutive integers lie fractions only, which an integer schema never holds.
        if (numbers[i + 1] - numbers[i] > 1 || !s.contains("type") || (TypesOf(Json{{"type", s["type"]}}) & kNumber))
          any.push_back(Json{{"type", "number"}, {"exclusiveMinimum", numbers[i]}, {"exclusiveMaximum", numbers[i + 1]}});
      any.push_back(Json{{"type", "number"}, {"exclusiveMinimum", numbers.back()}});
    } else if ((k == "dependencies" || k == "dependentRequired" || k == "dependentSchemas") && v.is_object()) {
      // An object with the name present and a dependency failing: a listed name absent, or the schema
      // failing for the whole object.
      for (auto d = v.begin(); d != v.end(); ++d) {
        if (d.value().is_array()) {
          for (const Json& n : d.value()) {
            if (!n.is_string()) return std::nullopt;
            any.push_back(Json{{"type", "object"}, {"required", Json::array({d.key()})}, {"properties", Json{{n.get<std::string>(), false}}}});
          }
        } else {
          auto neg = Negate(d.value(), path + "/" + k + "/" + d.key(), depth + 1);
          if (!neg) return std::nullopt;
          any.push_back(Json{{"type", "object"}, {"required", Json::array({d.key()})}, {"allOf", Json::array({*neg})}});
        }
      }
    } else if (k == "contains" || k == "$contains") {
      // No element of the kind: every element fails it.
      for (const Json& c : k == "contains" ? Json::array({v}) : v) {
        const Descent element(negated_.get());
        auto neg = Negate(c, path + "/" + k, depth + 1);
        if (!neg) return std::nullopt;
        any.push_back(Json{{"type", "array"}, {"items", *neg}});
      }
    } else if (k == "items" && !v.is_array() && !s.contains("prefixItems")) {
      // An element that fails it.
      const Descent element(negated_.get());
      auto neg = Negate(v, path + "/items", depth + 1);
      if (!neg) return std::nullopt;
      any.push_back(Json{{"type", "array"}, {"$contains", Json::array({*neg})}});
    } else if (k == "additionalProperties") {
      // A member that no property lists and no pattern matches, whose value fails it.
      const Descent member(negated_.get());
      auto neg = Negate(v, path + "/additionalProperties", depth + 1);
      if (!neg) return std::nullopt;
      if (neg->is_boolean() && !neg->get<bool>()) continue;  // additionalProperties true: never fails
      Json key = Json::object();
      if (auto p = s.find("properties"); p != s.end() && p->is_object()) {
        key["$not_in"] = Json::array();
        for (auto n = p->begin(); n != p->end(); ++n) key["$not_in"].push_back(n.key());
      }
      if (auto p = s.find("patternProperties"); p != s.end() && p->is_object() && !p->empty()) {
        key["$not_patterns"] = Json::array();
        for (auto n = p->begin(); n != p->end(); ++n) key["$not_patterns"].push_back(n.key());
      }
      any.push_back(Json{{"type", "object"}, {"$some", Json::array({Json{{"key", key}, {"value", *neg}}})}});
    } else if (k == "patternProperties" && v.is_object()) {
      // A member whose key matches a pattern and whose value fails its schema.
      for (auto p = v.begin(); p != v.end(); ++p) {
        const Descent member(negated_.get());
        auto neg = Negate(p.value(), path + "/patternProperties/" + p.key(), depth + 1);
        if (!neg) return std::nullopt;
        if (neg->is_boolean() && !neg->get<bool>()) continue;
        any.push_back(Json{{"type", "object"},
                           {"$some", Json::array({Json{{"key", Json{{"$patterns", Json::array({p.key()})}}}, {"value", *neg}}})}});
      }
    } else if (k == "propertyNames") {
      // A key that fails it: for a pattern, a key it does not match (or, under not, one it matches).
      auto names = Inline(v, path + "/propertyNames", depth + 1);
      if (!names.ok()) return std::nullopt;
      Json key = Json::object();
      if (names->is_boolean()) {
        if (names->get<bool>()) continue;
        any.push_back(Json{{"type", "object"}, {"minProperties", 1}});
        continue;
      }
      for (auto n = names->begin(); n != names->end(); ++n) {
        if (AnnotationKeywords().count(n.key()) || !ConstrainingKeyword(n.key()) || (n.key() == "type" && n.value() == "string")) continue;
        if (n.key() == "pattern" && n->is_string() && !key.contains("$not_patterns")) {
          key["$not_patterns"] = Json::array({*n});
        } else if (n.key() == "not" && n->is_object() && n->size() == 1 && n->contains("pattern") && (*n)["pattern"].is_string() &&
                   !key.contains("$patterns")) {
          key["$patterns"] = Json::array({(*n)["pattern"]});
        } else if (n.key() == "not" && n->is_object() && n->size() == 1 && (n->contains("enum") || n->contains("const"))) {
          // A key that fails `not: {enum}` is one of the enum's strings (other members name no key): the
          // object has one of them. A case of its own beside the other keywords': a key failing any of them.
          const Json members = n->contains("const") ? Json::array({(*n)["const"]}) : (*n)["enum"];
          if (!members.is_array()) return std::nullopt;
          for (const Json& m : members)
            if (m.is_string()) any.push_back(Json{{"type", "object"}, {"required", Json::array({m})}});
        } else {
          return std::nullopt;
        }
      }
      if (key.empty()) continue;
      if (key.size() > 1) return std::nullopt;  // either failing: two witnesses' forms at once
      any.push_back(Json{{"type", "object"}, {"$some", Json::array({Json{{"key", key}, {"value", true}}})}});
    } else if (k == "not") {
      any.push_back(v);
    } else if (k == "oneOf" && v.is_array() && v.size() > 1) {
      // Not exactly one branch: none of them, or two at once (pairs proven disjoint never are).
      constexpr size_t kMaxMeetingPairs = 16;
      Json none = Json::array();
      for (size_t i = 0; i < v.size(); ++i) {
        auto neg = Negate(v[i], path + "/oneOf/" + std::to_string(i), depth + 1, within);
        if (!neg) return std::nullopt;
        none.push_back(std::move(*neg));
      }
      any.push_back(Json{{"allOf", std::move(none)}});
      size_t pairs = 0;
      for (size_t i = 0; i < v.size(); ++i)
        for (size_t j = i + 1; j < v.size(); ++j) {
          auto disjoint = Disjoint(v[i], v[j], depth + 1);
          if (disjoint.ok() && *disjoint) continue;
          if (++pairs > kMaxMeetingPairs) return std::nullopt;
          any.push_back(Json{{"allOf", Json::array({v[i], v[j]})}});
        }
    } else if ((k == "anyOf" && v.is_array()) || (k == "oneOf" && v.is_array() && v.size() == 1)) {  // one: as anyOf
      Json all = Json::array();
      for (size_t i = 0; i < v.size(); ++i) {
        auto neg = Negate(v[i], path + "/anyOf/" + std::to_string(i), depth + 1, within);
        if (!neg) return std::nullopt;
        all.push_back(*neg);
      }
      any.push_back(Json{{"allOf", all}});
    } else {
      return std::nullopt;
    }
  }
  if (any.empty()) return Json(false);
  if (any.size() == 1) return any[0];
  return Json{{"anyOf", any}};
}

// Negations of references. A definition that reaches itself (a tree of nodes, an expression of
// expressions) has no finite inline negation; its negation is a definition of its own instead, built
// once per reference and named by a `$ref` to "$not:" + the reference, which the compiler makes a rule
// like any other `$ref` alone, and which a nested reference back to it reuses.

std::optional<std::string> SchemaResolver::NegatedRefTarget(const std::string& ref) {
  const std::string prefix = kNegatedRefPrefix;
  if (ref.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  return ref.substr(prefix.size());
}

std::optional<Json> SchemaResolver::NegateRef(const std::string& ref_in, const std::string& path, uint32_t depth,
                                              uint8_t within) const {
  if (depth > o_.max_depth) return std::nullopt;
  // The negation of a negated definition is the definition.
  if (std::optional<std::string> positive = NegatedRefTarget(ref_in)) return Json{{"$ref", *positive}};
  const std::string ref = ref_in == "#/" ? "#" : ref_in;
  NegatedDefinitions& n = *negated_;
  if (auto e = n.by_ref.find(ref); e != n.by_ref.end()) {
    if (e->second.state == NegatedDefinitions::State::kFailed) return std::nullopt;
    // A reference back to a definition being built must lie under a member or an element of its
    // instance: one at the instance itself would define the negation by itself (no instance's).
    if (e->second.state == NegatedDefinitions::State::kBuilding && n.descents <= e->second.descents) return std::nullopt;
    return Json{{"$ref", kNegatedRefPrefix + ref}};
  }
  if (std::find(n.inlining.begin(), n.inlining.end(), ref) != n.inlining.end()) {
    n.self_reaching.insert(ref);
    return std::nullopt;
  }
  auto target = Resolve(ref, path);
  if (!target.ok()) return std::nullopt;
  // First inline, as for any schema: the negation of a target that does not reach itself is finite.
  n.inlining.push_back(ref);
  std::optional<Json> inline_negation = Negate(**target, path, depth + 1, within);
  n.inlining.pop_back();
  if (inline_negation || !n.self_reaching.count(ref)) return inline_negation;
  if (!BuildNegatedDefinition(ref, **target, path, depth + 1)) return std::nullopt;
  return Json{{"$ref", kNegatedRefPrefix + ref}};
}

bool SchemaResolver::BuildNegatedDefinition(const std::string& ref, const Json& target, const std::string& path,
                                            uint32_t depth) const {
  NegatedDefinitions& n = *negated_;
  if (n.by_ref.size() >= kMaxNegatedDefinitions) return false;
  const size_t order = n.by_ref.size();
  auto [entry, inserted] = n.by_ref.try_emplace(ref);
  if (!inserted) return entry->second.state == NegatedDefinitions::State::kDone;
  entry->second.descents = n.descents;
  entry->second.order = order;
  // The definition is the same wherever it is met: built with no inline negation around it, over
  // instances of every type.
  std::vector<std::string> outer = std::move(n.inlining);
  n.inlining.clear();
  std::optional<Json> negation = Negate(target, path, depth + 1, kAllTypes);
  n.inlining = std::move(outer);
  if (!negation) {
    for (auto& [r, e] : n.by_ref)
      if (e.order >= order) e.state = NegatedDefinitions::State::kFailed;
    return false;
  }
  entry->second.schema = std::move(*negation);
  entry->second.state = NegatedDefinitions::State::kDone;
  return true;
}

std::optional<Json> SchemaResolver::SharedCases(const Json& branches, const Json& rest) {
  auto all = rest.find("allOf");
  if (all == rest.end() || !all->is_array() || !branches.is_array()) return std::nullopt;
  auto is_list = [](const Json& m) {
    if (!m.is_object() || m.size() != 1) return false;
    auto any = m.find("anyOf");
    return any != m.end() && any->is_array() && !any->empty();
  };
  std::vector<const Json*> lists;  // the allOf members' anyOf arrays
  for (const Json& m : *all)
    if (is_list(m)) lists.push_back(&m["anyOf"]);
  if (lists.empty()) return std::nullopt;
  auto holds = [](const Json& list, const Json& c) { return std::find(list.begin(), list.end(), c) != list.end(); };
  Json shared = Json::array();
  for (const Json& c : branches)
    if (!holds(shared, c) && std::all_of(lists.begin(), lists.end(), [&](const Json* l) { return holds(*l, c); }))
      shared.push_back(c);
  if (shared.empty()) return std::nullopt;
  // c ∨ ∧ (lists without c); a list left empty is false, and so is the conjunction.
  Json conjunction = Json::array();
  bool none = false;
  auto add_rest_of = [&](const Json& list) {
    Json left = Json::array();
    for (const Json& c : list)
      if (!holds(shared, c)) left.push_back(c);
    if (left.empty()) none = true;
    else conjunction.push_back(Json{{"anyOf", std::move(left)}});
  };
  add_rest_of(branches);
  for (const Json* l : lists) add_rest_of(*l);
  Json out = Json::object();
  for (auto k = rest.begin(); k != rest.end(); ++k) {
    if (k.key() != "allOf") {
      out[k.key()] = k.value();
      continue;
    }
    Json kept = Json::array();
    for (const Json& m : *k)
      if (!is_list(m)) kept.push_back(m);
    if (!kept.empty()) out["allOf"] = std::move(kept);
  }
  if (!none) shared.push_back(Json{{"allOf", std::move(conjunction)}});
  out["anyOf"] = std::move(shared);
  return out;
}

// anyOf whose branches each only ask for a pattern (all of them with type string, or none): the schema
// {$any_patterns: [[their patterns]]} (with that type), which a string meets when it matches one of them
// and other instances meet as they meet a pattern. Merged into the rest of the schema instead of
// distributing the rest over the branches, several such anyOf (double negations of pattern lists) stay
// one string rule whose automaton intersects the alternatives, where distributing compiled every
// combination of branches as a rule of its own. nullopt: the branches are not of this form.
Result<std::optional<Json>> SchemaResolver::PatternAlternatives(const Json& branches, const std::string& path,
                                                                uint32_t depth) const {
  Json group = Json::array();
  int typed = -1;  // whether the branches say type string (they must agree)
  for (const Json& b : branches) {
    if (!b.is_object()) return std::optional<Json>();
    DI_ASSIGN_OR_RETURN(Json x, Inline(b, path, depth + 1));
    if (!x.is_object()) return std::optional<Json>();
    const Json* pattern = nullptr;
    bool string_type = false;
    for (auto k = x.begin(); k != x.end(); ++k) {
      if (AnnotationKeywords().count(k.key()) || k.key().rfind("x-", 0) == 0 || !ConstrainingKeyword(k.key())) continue;
      if (k.key() == "pattern" && k->is_string()) pattern = &k.value();
      else if (k.key() == "type" && k.value() == "string") string_type = true;
      else return std::optional<Json>();
    }
    if (!pattern || (typed >= 0 && typed != static_cast<int>(string_type))) return std::optional<Json>();
    typed = string_type ? 1 : 0;
    group.push_back(*pattern);
  }
  if (group.empty()) return std::optional<Json>();
  Json out = {{"$any_patterns", Json::array({std::move(group)})}};
  if (typed == 1) out["type"] = "string";
  return std::optional<Json>(std::move(out));
}

// oneOf whose branches only require members (`{required: [...]}`): an instance is valid when exactly one
// branch's names are all present. As anyOf: for each branch i, its names present and, for every other
// branch j, one of j's names that i does not require absent (`properties: {k: false}`), over every
// choice of those names (bounded). Non-objects meet every branch, so they fail (two branches or more).
// nullopt: the branches are not of this form.
Result<std::optional<std::vector<Json>>> SchemaResolver::ExactlyOneRequired(const Json& branches, const Json& rest,
                                                                            const std::string& path, uint32_t depth) const {
  constexpr size_t kMaxAlternatives = 64;
  std::vector<std::vector<std::string>> req;
  for (const Json& b : branches) {
    DI_ASSIGN_OR_RETURN(Json x, Inline(b, path, depth + 1));
    if (!x.is_object()) return std::optional<std::vector<Json>>();
    std::vector<std::string> names;
    for (auto it = x.begin(); it != x.end(); ++it) {
      if (AnnotationKeywords().count(it.key())) continue;
      if (it.key() != "required" || !it->is_array()) return std::optional<std::vector<Json>>();
      for (const Json& n : *it) {
        if (!n.is_string()) return std::optional<std::vector<Json>>();
        names.push_back(n.get<std::string>());
      }
    }
    req.push_back(std::move(names));
  }
  std::vector<Json> out;
  for (size_t i = 0; i < req.size(); ++i) {
    // choices[j]: the names of branch j that branch i does not require (one must be absent).
    std::vector<std::vector<std::string>> choices;
    bool possible = true;
    for (size_t j = 0; j < req.size() && possible; ++j) {
      if (j == i) continue;
      std::vector<std::string> c;
      for (const auto& n : req[j])
        if (std::find(req[i].begin(), req[i].end(), n) == req[i].end()) c.push_back(n);
      if (c.empty()) possible = false;  // j's names are all in i's: both always hold together
      choices.push_back(std::move(c));
    }
    if (!possible) continue;
    std::vector<size_t> pick(choices.size(), 0);
    while (true) {
      if (out.size() >= kMaxAlternatives) return Unsupported("oneOf (too many required-member combinations)", path);
      Json forbidden = Json::object();
      for (size_t j = 0; j < choices.size(); ++j) forbidden[choices[j][pick[j]]] = false;
      Json branch = {{"type", "object"}, {"required", req[i]}, {"properties", forbidden}};
      DI_ASSIGN_OR_RETURN(Json m, Merge(rest, branch, path + "/oneOf/" + std::to_string(i), depth + 1));
      out.push_back(std::move(m));
      size_t k = 0;
      while (k < pick.size() && ++pick[k] == choices[k].size()) pick[k++] = 0;
      if (k == pick.size()) break;
    }
  }
  return std::optional<std::vector<Json>>(std::move(out));
}

}  // namespace deepinfer::grammar::json_schema_internal
