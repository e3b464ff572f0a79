// Schema-level operations of the JSON Schema front end: local $ref resolution (JSON Pointer with ~ and %
// escapes), allOf merging at the JSON level, and the type/disjointness facts oneOf needs.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "grammar/json_schema_internal.h"

namespace deepinfer::grammar::json_schema_internal {

namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Room for `extra` more members of an object before adding them. nlohmann's ordered_map is a vector of
// pair<const string, Json>, whose move may throw (the const key is copied), so when the vector grows by
// itself it copies every member's subtree instead of moving it; merging large `properties` paid that
// again and again. Here it grows (geometrically, as the vector would) by moving the values over.
void ReserveMergeMembers(Json* object, size_t extra) {
  if (!object->is_object()) return;
  Json::object_t& members = object->get_ref<Json::object_t&>();
  if (members.capacity() >= members.size() + extra) return;
  Json::object_t grown;
  grown.reserve(std::max(members.size() + extra, 2 * members.capacity()));
  for (auto& [key, value] : members) grown.Container::emplace_back(key, std::move(value));
  members = std::move(grown);
}

// The patternProperties patterns of a schema, in its order.
std::vector<std::string> PatternKeys(const Json& s) {
  std::vector<std::string> keys;
  if (auto it = s.find("patternProperties"); it != s.end() && it->is_object())
    for (auto p = it->begin(); p != it->end(); ++p) keys.push_back(p.key());
  return keys;
}

}  // namespace

SchemaResolver::SchemaResolver(const Json& root, const JsonSchemaOptions& o) : root_(root), o_(o) {
  ref_overrides_ = o.draft7_without_schema;
  if (auto it = root.is_object() ? root.find("$schema") : root.end(); root.is_object() && it != root.end() && it->is_string()) {
    const std::string& uri = it->get_ref<const std::string&>();
    ref_overrides_ = false;
    for (const char* d : {"draft-03", "draft-04", "draft-05", "draft-06", "draft-07"})
      if (uri.find(d) != std::string::npos) ref_overrides_ = true;
    for (const char* d : {"draft-03", "draft-04", "draft-05", "draft-06"})
      if (uri.find(d) != std::string::npos) conditionals_ = false;
  }
}

void SchemaResolver::DropUnknownConditionals(Json* s) const {
  if (conditionals_ || !s->is_object()) return;
  for (const char* k : {"if", "then", "else"}) s->erase(k);
}

Result<const Json*> SchemaResolver::Resolve(const std::string& ref, const std::string& path) const {
  if (std::optional<std::string> negated = NegatedRefTarget(ref)) {
    // Only the negations NegateRef built: any other such name is a reference this front end cannot follow.
    auto e = negated_->by_ref.find(*negated);
    if (e != negated_->by_ref.end() && e->second.state == NegatedDefinitions::State::kDone) return &e->second.schema;
    return Unsupported("$ref to '" + ref + "' (only local references)", path);
  }
  if (ref.empty() || ref[0] != '#') return Unsupported("$ref to '" + ref + "' (only local references)", path);
  const Json* cur = &root_;
  size_t pos = 1;
  if (pos < ref.size() && ref[pos] != '/') return Unsupported("$ref to an anchor '" + ref + "'", path);
  while (pos < ref.size()) {
    size_t next = ref.find('/', pos + 1);
    std::string token = ref.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
    pos = next == std::string::npos ? ref.size() : next;
    std::string key;
    for (size_t i = 0; i < token.size(); ++i) {
      if (token[i] == '~' && i + 1 < token.size()) {
        key.push_back(token[i + 1] == '1' ? '/' : '~');
        ++i;
      } else if (token[i] == '%') {
        // URI percent-encoding: exactly two hex digits (untrusted text: no stoi, which throws).
        const int hi = i + 2 < token.size() ? HexDigit(token[i + 1]) : -1;
        const int lo = hi >= 0 ? HexDigit(token[i + 2]) : -1;
        if (lo < 0) return Invalid("$ref '" + ref + "' has an invalid percent-encoding", path);
        key.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
      } else {
        key.push_back(token[i]);
      }
    }
    if (cur->is_object()) {
      auto it = cur->find(key);
      if (it == cur->end()) return Invalid("$ref '" + ref + "' does not resolve", path);
      cur = &*it;
    } else if (cur->is_array()) {
      size_t idx = 0;
      bool digits = !key.empty() && key.size() <= 9;
      for (char c : key) {
        if (c < '0' || c > '9') digits = false;
        else idx = idx * 10 + static_cast<size_t>(c - '0');
      }
      if (!digits || idx >= cur->size()) return Invalid("$ref '" + ref + "' does not resolve", path);
      cur = &(*cur)[idx];
    } else {
      return Invalid("$ref '" + ref + "' does not resolve", path);
    }
  }
  return cur;
}

Result<Json> SchemaResolver::Merge(Json a, Json b, const std::string& path, uint32_t depth) const {
  if (depth > o_.max_depth) return Status::ResourceExhausted("schemas nest deeper than " + std::to_string(o_.max_depth));
  if (a.is_boolean()) return a.get<bool>() ? std::move(b) : std::move(a);
  if (b.is_boolean()) return b.get<bool>() ? std::move(a) : std::move(b);
  DI_ASSIGN_OR_RETURN(Json x, Inline(std::move(a), path, depth + 1));
  DI_ASSIGN_OR_RETURN(Json y, Inline(std::move(b), path, depth + 1));
  if (x.is_boolean() || y.is_boolean()) return Merge(std::move(x), std::move(y), path, depth + 1);
  if (!x.is_object() || !y.is_object()) return Invalid("a schema must be an object or a boolean", path);
  // if/then/else belong together: two groups (or a stray then/else) cannot be merged key by key.
  auto conditional = [](const Json& j) { return j.contains("if") || j.contains("then") || j.contains("else"); };
  if (conditional(x) && conditional(y)) return Unsupported("allOf with two 'if'", path);
  // items (and additionalItems) count from the prefix of their own schema: one side's prefix cannot
  // shift the other side's items.
  auto tuple = [](const Json& j) {  // additionalItems means nothing without tuple items
    return j.contains("prefixItems") || (j.contains("items") && j["items"].is_array());
  };
  if ((tuple(x) && (y.contains("items") || tuple(y))) || (tuple(y) && x.contains("items")))
    return Unsupported("allOf with items beside another member's prefixItems", path);
  // What the closing additionalProperties pass needs of x, taken before x becomes the result.
  const auto x_add = x.find("additionalProperties");
  const bool x_has_additional = x_add != x.end();
  const Json x_additional = x_has_additional ? *x_add : Json();
  const std::vector<std::string> x_patterns = PatternKeys(x);
  const Json x_guards = x.value("$pattern_guards", Json::array());
  const auto x_props = x.find("properties");
  const bool x_lists_properties = x_props != x.end() && x_props->is_object();
  const auto y_props = y.find("properties");
  const bool y_lists_properties = y_props != y.end() && y_props->is_object();
  std::vector<std::string> only_in_x, only_in_y;  // names one side lists and the other does not
  if (x_lists_properties)
    for (auto p = x_props->begin(); p != x_props->end(); ++p)
      if (!y_lists_properties || !y_props->contains(p.key())) only_in_x.push_back(p.key());
  if (y_lists_properties)
    for (auto p = y_props->begin(); p != y_props->end(); ++p)
      if (!x_lists_properties || !x_props->contains(p.key())) only_in_y.push_back(p.key());
  // Patterns one side has and the other lacks: the other side's additionalProperties still holds for the
  // names they match (where its own properties and patterns do not), which a merged patternProperties
  // would no longer say.
  auto patterns_beyond = [](const Json& one, const Json& other) {
    const auto mine = one.find("patternProperties"), theirs = other.find("patternProperties");
    if (mine == one.end() || !mine->is_object()) return false;
    for (auto p = mine->begin(); p != mine->end(); ++p)
      if (theirs == other.end() || !theirs->is_object() || !theirs->contains(p.key())) return true;
    return false;
  };
  const bool y_patterns_beyond_x = patterns_beyond(y, x), x_patterns_beyond_y = patterns_beyond(x, y);
  Json out = std::move(x);
  const auto y_add = y.find("additionalProperties");
  const bool y_has_additional = y_add != y.end();
  const Json y_additional = y_has_additional ? *y_add : Json();
  const std::vector<std::string> y_patterns = PatternKeys(y);
  const Json y_guards = y.value("$pattern_guards", Json::array());
  // y's values move into the result: y is this call's own copy.
  ReserveMergeMembers(&out, y.size() + 3);  // + $patterns, $contains, $multiples
  for (auto it = y.begin(); it != y.end(); ++it) {
    const std::string& k = it.key();
    Json& v = it.value();
    if (!out.contains(k) || AnnotationKeywords().count(k)) {
      if (!out.contains(k)) out[k] = std::move(v);
      continue;
    }
    Json& cur = out[k];
    if (cur == v) continue;
    if (k == "type") {
      auto set = [](const Json& t) {
        std::set<std::string> s;
        if (t.is_string()) s.insert(t.get<std::string>());
        else for (const auto& e : t) if (e.is_string()) s.insert(e.get<std::string>());
        return s;
      };
      auto s1 = set(cur), s2 = set(v);
      Json both = Json::array();
      for (const auto& t : s1) {
        if (s2.count(t)) both.push_back(t);
        else if (t == "number" && s2.count("integer")) both.push_back("integer");
        else if (t == "integer" && s2.count("number")) both.push_back("integer");
        else if (t == "number" && s2.count("$fraction")) both.push_back("$fraction");
        else if (t == "$fraction" && s2.count("number")) both.push_back("$fraction");
      }
      cur = both;
    } else if (k == "properties" || k == "patternProperties" || k == "$defs" || k == "definitions") {
      ReserveMergeMembers(&cur, v.size());
      for (auto p = v.begin(); p != v.end(); ++p) {
        if (!cur.contains(p.key())) {
          cur[p.key()] = std::move(p.value());
        } else if (Json& mine = cur[p.key()]; mine != p.value()) {
          Json both = Json{{"allOf", Json::array({std::move(mine), std::move(p.value())})}};
          mine = std::move(both);
        }
      }
    } else if (k == "required") {
      for (const auto& r : v)
        if (std::find(cur.begin(), cur.end(), r) == cur.end()) cur.push_back(r);
    } else if (k == "minimum" || k == "minLength" || k == "minItems" || k == "minProperties") {
      if (v.is_number() && cur.is_number() && v.get<double>() > cur.get<double>()) cur = v;
    } else if (k == "maximum" || k == "maxLength" || k == "maxItems" || k == "maxProperties") {
      if (v.is_number() && cur.is_number() && v.get<double>() < cur.get<double>()) cur = v;
    } else if (k == "exclusiveMinimum" && v.is_number() && cur.is_number()) {
      if (v.get<double>() > cur.get<double>()) cur = v;
    } else if (k == "exclusiveMaximum" && v.is_number() && cur.is_number()) {
      if (v.get<double>() < cur.get<double>()) cur = v;
    } else if (k == "enum") {
      Json both = Json::array();
      for (const auto& e : cur)
        if (std::find(v.begin(), v.end(), e) != v.end()) both.push_back(e);
      cur = both;
    } else if (k == "const") {
      out["enum"] = Json::array();
    } else if (k == "pattern") {
      if (!out.contains("$patterns")) out["$patterns"] = Json::array();
      out["$patterns"].push_back(v);
    } else if (k == "items" && (cur.is_array() || v.is_array())) {
      return Unsupported("allOf with two different tuple 'items'", path);  // their additionalItems differ too
    } else if (k == "additionalProperties" || k == "items" || k == "additionalItems" || k == "propertyNames") {
      Json both = Json{{"allOf", Json::array({std::move(cur), std::move(v)})}};
      cur = std::move(both);
    } else if (k == "allOf") {
      for (auto& e : v) cur.push_back(std::move(e));
    } else if (k == "not") {
      cur = Json{{"anyOf", Json::array({cur, v})}};  // not A and not B = not (A or B)
    } else if (k == "contains") {  // both must hold: each needs an element of its own kind
      if (!out.contains("$contains")) out["$contains"] = Json::array();
      out["$contains"].push_back(v);
    } else if (k == "multipleOf") {  // both: the second as one more step the number must be a multiple of
      if (!out.contains("$multiples")) out["$multiples"] = Json::array();
      out["$multiples"].push_back(std::move(v));
    } else if (k == "$not_patterns" || k == "$not_in" || k == "$contains" || k == "$some" || k == "$any_patterns" ||
               k == "$multiples" || k == "$not_multiples" || k == "$pattern_guards") {
      for (auto& e : v) cur.push_back(std::move(e));
    } else if (k == "anyOf" || k == "oneOf") {
      // Both must hold: keep one here, the other as an allOf member.
      if (!out.contains("allOf")) out["allOf"] = Json::array();
      out["allOf"].push_back(Json{{k, std::move(v)}});
    } else if (UnsupportedKeywords().count(k) == 0 && k.rfind("x-", 0) != 0) {
      if (k == "format" || k == "uniqueItems" || k == "prefixItems" || k == "dependencies" ||
          k == "dependentRequired" || k == "dependentSchemas")
        return Unsupported("allOf with two different '" + k + "'", path);
    }
  }
  // One side's additionalProperties also holds the other side's properties that it does not list and its
  // patterns do not match: in allOf [{properties: {p}, additionalProperties: false}, {properties: {q}}] no q
  // may appear. (The merged additionalProperties covers the names neither side lists nor matches.) The names
  // the other side's own patterns match, where this side's do not, get it through a guard ($pattern_guards:
  // the schema holds for a key no listed name spells whose patterns are none of the guard's), and so do a
  // side's earlier guards, for the names the other side adds.
  struct Side {
    const Json* additional;                        // null: none
    const std::vector<std::string>* patterns;      // this side's patternProperties
    const Json* guards;                            // this side's $pattern_guards
    const std::vector<std::string>* theirs_only;   // the other side's names this side does not list
    bool their_patterns_beyond;                    // the other side has patterns this side lacks
  };
  auto matches_none = [&](const std::string& name, const Json& patterns) -> Result<bool> {
    if (!patterns.is_array()) return Invalid("$pattern_guards' patterns must be an array", path);
    for (const Json& p : patterns) {
      DI_ASSIGN_OR_RETURN(Json hit, ValidMembers(*this, o_.max_depth, Json{{"pattern", p}}, Json::array({name}),
                                                 path + "/patternProperties"));
      if (!hit.empty()) return false;
    }
    return true;
  };
  auto add_to_property = [&](const std::string& name, const Json& schema) {
    Json& merged = out["properties"][name];
    merged = Json{{"allOf", Json::array({std::move(merged), schema})}};
  };
  for (const Side& side : {Side{x_has_additional ? &x_additional : nullptr, &x_patterns, &x_guards, &only_in_y, y_patterns_beyond_x},
                           Side{y_has_additional ? &y_additional : nullptr, &y_patterns, &y_guards, &only_in_x, x_patterns_beyond_y}}) {
    for (const Json& guard : *side.guards) {
      if (!guard.is_object() || !guard.contains("patterns") || !guard.contains("schema"))
        return Invalid("$pattern_guards must hold {patterns, schema} objects", path);
      for (const std::string& name : *side.theirs_only) {
        DI_ASSIGN_OR_RETURN(bool none, matches_none(name, guard["patterns"]));
        if (none) add_to_property(name, guard["schema"]);
      }
    }
    if (!side.additional || (side.additional->is_boolean() && side.additional->get<bool>())) continue;
    const Json own_patterns(*side.patterns);
    for (const std::string& name : *side.theirs_only) {
      DI_ASSIGN_OR_RETURN(bool none, matches_none(name, own_patterns));
      if (none) add_to_property(name, *side.additional);
    }
    if (side.their_patterns_beyond) {
      if (!out.contains("$pattern_guards")) out["$pattern_guards"] = Json::array();
      out["$pattern_guards"].push_back(Json{{"patterns", own_patterns}, {"schema", *side.additional}});
    }
  }
  return out;
}

Result<const Json*> SchemaResolver::InlineView(const Json& s, const std::string& path, uint32_t depth, Json* storage) const {
  if (depth > o_.max_depth) return Status::ResourceExhausted("$ref/allOf chains deeper than " + std::to_string(o_.max_depth));
  if (!s.is_object() || (!s.contains("$ref") && !s.contains("allOf"))) return &s;
  DI_ASSIGN_OR_RETURN(*storage, Inline(s, path, depth));
  return static_cast<const Json*>(storage);
}

Result<Json> SchemaResolver::Inline(Json s, const std::string& path, uint32_t depth) const {
  if (depth > o_.max_depth) return Status::ResourceExhausted("$ref/allOf chains deeper than " + std::to_string(o_.max_depth));
  if (!s.is_object()) return s;
  Json out = std::move(s);
  DropUnknownConditionals(&out);
  if (auto it = out.find("$ref"); it != out.end()) {
    if (!it->is_string()) return Invalid("$ref must be a string", path);
    DI_ASSIGN_OR_RETURN(const Json* target, Resolve(it->get<std::string>(), path));
    if (ref_overrides_) return Inline(*target, path, depth + 1);  // draft 7: the siblings do nothing
    out.erase("$ref");
    DI_ASSIGN_OR_RETURN(out, Merge(*target, std::move(out), path, depth + 1));
  }
  if (auto it = out.find("allOf"); it != out.end() && it->is_array()) {
    Json parts = std::move(*it);
    out.erase("allOf");
    // Conditionals (if/then/else) of several members, and of the schema itself, combine as a whole
    // (Conditionals); the other keywords merge member by member.
    std::vector<Json> conditions;
    auto take_condition = [&](Json& x) {
      if (!x.is_object() || !x.contains("if")) return;
      Json c = Json::object();
      for (const char* k : {"if", "then", "else"})
        if (auto f = x.find(k); f != x.end()) c[k] = *f, x.erase(k);
      conditions.push_back(std::move(c));
    };
    for (auto& p : parts) DropUnknownConditionals(&p);
    size_t with_if = out.contains("if") ? 1 : 0;
    for (const auto& p : parts) with_if += p.is_object() && p.contains("if");
    if (with_if >= 2) {
      take_condition(out);
      for (auto& p : parts) take_condition(p);
    }
    for (auto& p : parts) {
      DI_ASSIGN_OR_RETURN(out, Merge(std::move(out), std::move(p), path, depth + 1));
    }
    if (!conditions.empty()) {
      DI_ASSIGN_OR_RETURN(Json cells, Conditionals(conditions, TypesOf(out), path, depth + 1));
      DI_ASSIGN_OR_RETURN(out, Merge(std::move(out), std::move(cells), path, depth + 1));
    }
  }
  return out;
}

bool SchemaResolver::HasConstraints(const Json& s) {
  if (!s.is_object()) return !s.is_boolean() || !s.get<bool>();
  for (auto it = s.begin(); it != s.end(); ++it)
    if (!AnnotationKeywords().count(it.key())) return true;
  return false;
}

uint8_t SchemaResolver::TypesOf(const Json& s) {
  if (!s.is_object()) return (s.is_boolean() && !s.get<bool>()) ? 0 : kAllTypes;
  uint8_t types = kAllTypes;
  if (auto it = s.find("type"); it != s.end()) {
    types = 0;
    auto add = [&](const std::string& t) {
      if (t == "null") types |= kNull;
      else if (t == "boolean") types |= kBool;
      else if (t == "object") types |= kObject;
      else if (t == "array") types |= kArray;
      else if (t == "string") types |= kString;
      else if (t == "integer") types |= kInteger;
      else if (t == "number") types |= kInteger | kNumber;
      else if (t == "$fraction") types |= kNumber;  // the compiler's own: numbers that are not integers
    };
    if (it->is_string()) add(it->get<std::string>());
    else if (it->is_array()) for (const auto& t : *it) if (t.is_string()) add(t.get<std::string>());
  }
  auto values = [&](const Json& vs) {
    uint8_t t = 0;
    for (const auto& v : vs) {
      if (v.is_null()) t |= kNull;
      else if (v.is_boolean()) t |= kBool;
      else if (v.is_object()) t |= kObject;
      else if (v.is_array()) t |= kArray;
      else if (v.is_string()) t |= kString;
      else if (v.is_number_integer() || v.is_number_unsigned()) t |= kInteger;
      else if (v.is_number()) t |= (v.get<double>() == std::floor(v.get<double>())) ? kInteger : kNumber;
    }
    return t;
  };
  if (auto it = s.find("const"); it != s.end()) types &= values(Json::array({*it}));
  if (auto it = s.find("enum"); it != s.end() && it->is_array()) types &= values(*it);
  return types;
}

bool NeverHolds(const Json& s) {
  if (s.is_boolean()) return !s.get<bool>();
  if (!s.is_object()) return false;
  if (auto e = s.find("enum"); e != s.end() && e->is_array() && e->empty()) return true;
  if (auto all = s.find("allOf"); all != s.end() && all->is_array())
    for (const Json& m : *all)
      if (m.is_boolean() && !m.get<bool>()) return true;
  return false;
}

// Whether two schemas can never validate the same instance, from the keywords at their top (each rule
// a proof; more keywords only narrow a schema): types that do not meet; const/enum values that do not
// meet (or all excluded by the other's $not_in); for objects only, a name one requires that the other
// forbids (false, or additionalProperties false without patterns), or whose schemas on both sides are
// themselves disjoint (recursively, bounded by the depth limit).
Result<bool> SchemaResolver::Disjoint(const Json& a, const Json& b, uint32_t depth) const {
  // Each question gets a bounded number of steps: recursive definitions compared member by member branch
  // out at every level, which the depth limit alone lets grow exponentially. Out of steps is no proof.
  constexpr uint32_t kMaxSteps = 4096;
  struct Question {
    explicit Question(const SchemaResolver& r) : r_(r) {
      if (r_.disjoint_nesting_++ == 0) r_.disjoint_steps_ = kMaxSteps;
    }
    ~Question() { --r_.disjoint_nesting_; }
    Question(const Question&) = delete;
    Question& operator=(const Question&) = delete;
    const SchemaResolver& r_;
  } question(*this);
  if (disjoint_steps_ == 0) return false;
  --disjoint_steps_;
  if (depth > o_.max_depth) return false;
  if ((TypesOf(a) & TypesOf(b)) == 0) return true;
  if (!a.is_object() || !b.is_object()) return false;
  Json x_storage, y_storage;
  auto xi = InlineView(a, "#", depth + 1, &x_storage), yi = InlineView(b, "#", depth + 1, &y_storage);
  if (!xi.ok() || !yi.ok()) return false;
  const Json& x = **xi;
  const Json& y = **yi;
  if (NeverHolds(x) || NeverHolds(y)) return true;
  if (!x.is_object() || !y.is_object()) return false;
  const uint8_t shared = TypesOf(x) & TypesOf(y);
  if (shared == 0) return true;
  auto values = [](const Json& s) -> std::optional<Json> {
    if (auto c = s.find("const"); c != s.end()) return Json::array({*c});
    if (auto e = s.find("enum"); e != s.end() && e->is_array()) return *e;
    return std::nullopt;
  };
  auto vx = values(x), vy = values(y);
  auto meet = [](const Json& vals, const Json& others) {
    for (const auto& v : vals)
      if (std::find(others.begin(), others.end(), v) != others.end()) return true;
    return false;
  };
  if (vx && vy && !meet(*vx, *vy)) return true;
  for (const auto& [vals, other] : {std::pair{vx, &y}, std::pair{vy, &x}}) {
    auto out = other->find("$not_in");
    if (!vals || out == other->end() || !out->is_array()) continue;
    bool all_out = true;
    for (const auto& v : *vals) all_out = all_out && std::find(out->begin(), out->end(), v) != out->end();
    if (all_out) return true;
  }
  // Bounds that do not meet, for the one type they apply to (lengths, counts, numeric ranges).
  auto num = [](const Json& j, const char* k) -> std::optional<double> {
    auto it = j.find(k);
    if (it == j.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  for (const auto& [lo_key, hi_key, type] : {std::tuple{"minLength", "maxLength", kString}, std::tuple{"minItems", "maxItems", kArray},
                                            std::tuple{"minProperties", "maxProperties", kObject},
                                            std::tuple{"minimum", "maximum", static_cast<TypeBit>(kInteger | kNumber)}}) {
    if ((shared & ~type & kAllTypes) != 0) continue;
    for (const auto& [p, q] : {std::pair{&x, &y}, std::pair{&y, &x}}) {
      auto lo = num(*p, lo_key), hi = num(*q, hi_key);
      if (lo && hi && *lo > *hi) return true;
    }
  }
  // A side with anyOf lies inside the union of its cases: disjoint when every case is.
  for (const auto& [p, q] : {std::pair{&x, &y}, std::pair{&y, &x}}) {
    auto any = p->find("anyOf");
    if (any == p->end() || !any->is_array() || any->empty()) continue;
    bool all = true;
    for (const Json& c : *any) {
      DI_ASSIGN_OR_RETURN(bool d, Disjoint(c, *q, depth + 1));
      if (!(all = d)) break;
    }
    if (all) return true;
  }
  if (shared != kObject) return false;
  for (const auto& [p, q] : {std::pair{&x, &y}, std::pair{&y, &x}}) {
    auto req = p->find("required");
    if (req == p->end() || !req->is_array()) continue;
    const auto pp = p->find("properties"), qp = q->find("properties");
    const bool p_props = pp != p->end() && pp->is_object(), q_props = qp != q->end() && qp->is_object();
    const auto qa = q->find("additionalProperties");
    const auto qpat = q->find("patternProperties");
    const bool q_closed = qa != q->end() && NeverHolds(*qa) && (qpat == q->end() || !qpat->is_object() || qpat->empty());
    for (const Json& n : *req) {
      if (!n.is_string()) continue;
      const std::string& name = n.get_ref<const std::string&>();
      const bool q_lists = q_props && qp->contains(name);
      if (!q_lists) {
        if (q_closed) return true;
        continue;
      }
      if (NeverHolds((*qp)[name])) return true;
      if (p_props && pp->contains(name)) {
        DI_ASSIGN_OR_RETURN(bool d, Disjoint((*pp)[name], (*qp)[name], depth + 1));
        if (d) return true;
      }
    }
  }
  return false;
}

}  // namespace deepinfer::grammar::json_schema_internal

namespace deepinfer::grammar::json_schema_internal {

// Productivity over the IR: an over-approximation of "accepts some string" (kAnd and kMinus count as
// productive when their first operand is), so `true` from here is a proof. Rules by fixpoint; each pass
// walks the expressions with an explicit stack (no recursion on the schema's depth).
bool ProvablyEmpty(const Grammar& g, ExprId root) {
  const auto& rules = g.rules();
  std::vector<uint8_t> rule_ok(rules.size(), 0);
  std::vector<int8_t> memo;
  // One memo per pass: a value computed before a rule turned productive may be a stale "no", which only
  // delays the fixpoint to a later pass (productivity is monotone).
  auto eval = [&](ExprId top) {
    std::vector<std::pair<ExprId, bool>> stack = {{top, false}};
    while (!stack.empty()) {
      auto [id, expanded] = stack.back();
      stack.pop_back();
      if (memo[id] >= 0) continue;
      const Expr& e = g.expr(id);
      if (!expanded) {
        stack.push_back({id, true});
        for (ExprId k : e.kids)
          if (memo[k] < 0) stack.push_back({k, false});
        continue;
      }
      auto kid = [&](size_t i) { return memo[e.kids[i]] == 1; };
      bool ok = true;
      switch (e.kind) {
        case ExprKind::kEmpty:
        case ExprKind::kLiteral: ok = true; break;
        case ExprKind::kNothing: ok = false; break;
        case ExprKind::kMultiple: ok = true; break;  // 0 is a multiple of every step
        case ExprKind::kChars:
        case ExprKind::kBytes: ok = !e.ranges.empty(); break;
        case ExprKind::kSeq:
          for (size_t i = 0; i < e.kids.size(); ++i) ok = ok && kid(i);
          break;
        case ExprKind::kAlt:
          ok = false;
          for (size_t i = 0; i < e.kids.size(); ++i) ok = ok || kid(i);
          break;
        case ExprKind::kRepeat: ok = e.min == 0 || kid(0); break;
        case ExprKind::kRef: ok = e.rule < rule_ok.size() && rule_ok[e.rule]; break;
        case ExprKind::kSepList: {
          const size_t items = e.has_separator ? e.kids.size() - 1 : e.kids.size();
          uint64_t need = 0, can = 0;
          bool unlimited = false;
          for (size_t i = 0; i < items; ++i) {
            const bool req = i < e.required.size() && e.required[i];
            if (req && !kid(i)) ok = false;
            need += req;
            if (kid(i)) {
              ++can;
              if (e.repeat_last && i + 1 == items) unlimited = true;
            }
          }
          if (need > e.max) ok = false;
          if (!unlimited && can < e.min) ok = false;
          if (e.has_separator && !kid(e.kids.size() - 1) && std::max<uint64_t>(need, e.min) >= 2) ok = false;
          break;
        }
        case ExprKind::kAnd:
        case ExprKind::kMinus: ok = kid(0); break;
        case ExprKind::kCounted: ok = kid(0) && kid(2); break;
      }
      memo[id] = ok ? 1 : 0;
    }
    return memo[top] == 1;
  };
  for (bool changed = true; changed;) {
    changed = false;
    memo.assign(g.num_exprs(), -1);
    for (size_t r = 0; r < rules.size(); ++r) {
      if (rule_ok[r] || !rules[r].defined) continue;
      if (eval(rules[r].body)) rule_ok[r] = 1, changed = true;
    }
  }
  memo.assign(g.num_exprs(), -1);
  return !eval(root);
}

}  // namespace deepinfer::grammar::json_schema_internal
