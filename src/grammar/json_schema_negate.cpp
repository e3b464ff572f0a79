// The exact negation of a schema (`not`) as a schema the compiler takes, and the negated definitions that
// stand for negated references into recursive definitions.
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

// Negated definitions one schema may build: each is about as large as the definition it negates.
constexpr size_t kMaxNegatedDefinitions = 64;

}  // namespace

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

}  // namespace deepinfer::grammar::json_schema_internal
