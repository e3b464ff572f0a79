// Keywords the JSON Schema front end lowers to others before compiling: `not` through an exact negation of
// its schema (json_schema_negate.cpp), if/then/else, dependencies, trivial propertyNames, and oneOf of
// required-only branches.
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

namespace {

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
