// Arrays and objects of the JSON Schema compiler (json_schema_compiler.h): items, prefixItems and contains;
// properties in schema order, required, patternProperties (by the sets of patterns a key can match),
// additionalProperties, propertyNames, min/maxProperties, and the witness members negations need.
#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/json_text.h"
#include "grammar/regex.h"

namespace deepinfer::grammar::json_schema_internal {

// Whether two patterns (unanchored, on raw text) can match the same string: false only where the
// automaton of both at once is proven empty; an error or a spent budget counts as meeting.
bool SchemaCompiler::PatternsMeet(const std::string& a, const std::string& b) {
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

Result<ExprId> SchemaCompiler::Array(const Json& s, const std::string& path, uint32_t depth) {
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
  // uniqueItems: exact in the grammar for items from a finite set of scalars; otherwise enforced by the
  // matcher at run time (UniqueRole: the array and item rules keep their stack frames, and the matcher
  // drops a parse whose finished item equals an earlier one of the same array).
  uint32_t unique_array_rule = 0;
  bool unique_at_run_time = false;
  if (auto u = s.find("uniqueItems"); u != s.end() && u->is_boolean() && u->get<bool>() && max > 1 && (rest_allowed || !prefix.empty())) {
    if (!prefix.empty()) return Unsupported("uniqueItems (beside tuple items)", path);
    if (s.contains("contains") || s.contains("$contains")) return Unsupported("uniqueItems (beside contains)", path);
    DI_ASSIGN_OR_RETURN(std::optional<std::vector<Json>> classes, DistinctItemValues(*rest_schema, path + "/items", depth));
    if (classes) {
      // Too many sets of distinct items to spell out: checked at run time like any other items.
      Result<ExprId> listed = UniqueArray(*classes, min, max, path);
      if (listed.ok() || listed.status().code() != StatusCode::kUnimplemented) return listed;
    }
    // The item's own rule sits below the item rule so that a counted string item keeps its counter in a
    // frame of its own (the item rule's frame holds where the item started).
    const std::string base = "unique_items" + path + "#" + std::to_string(unique_arrays_++) + "/";
    const uint32_t value_rule = g_.AddRule(base + "value");
    g_.Define(value_rule, item);
    const uint32_t item_rule = g_.AddRule(base + "item");
    g_.Define(item_rule, g_.Ref(value_rule));
    g_.SetUniqueRole(item_rule, UniqueRole::kItem);
    item = g_.Ref(item_rule);
    unique_array_rule = g_.AddRule(base + "array");
    unique_at_run_time = true;
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
    if (m > 0) return Unsupported("contains beside tuple items", path);
    if (!rest_allowed || max == 0) return g_.Nothing();
    if (needs.size() > 1) {
      DI_ASSIGN_OR_RETURN(ExprId several, ContainsSeveral(needs, *rest_schema, item, min, max, path, depth));
      return g_.Seq({Tok("["), several, Lit("]")});
    }
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
  if (unique_at_run_time) {
    g_.Define(unique_array_rule, g_.Seq({Tok("["), body, Lit("]")}));
    g_.SetUniqueRole(unique_array_rule, UniqueRole::kArray);
    return g_.Ref(unique_array_rule);
  }
  return g_.Seq({Tok("["), body, Lit("]")});
}

// Several kinds of element the array must contain (contains, and $contains from negated items): each kind
// is met by some element, one element may meet several. An array holds them iff its elements, read in
// order, include witnesses for an ordered partition of the kinds: a first element meeting the kinds of the
// first block, a later one those of the second, and so on. The union over every ordered partition (3 for
// two kinds, 13 for three) is thus exact; the elements between witnesses take the items schema, and their
// counts split so that witnesses plus the others stay within min..max.
Result<ExprId> SchemaCompiler::ContainsSeveral(const std::vector<Json>& needs, const Json& rest_schema, ExprId item,
                                               uint32_t min, uint32_t max, const std::string& path, uint32_t depth) {
  constexpr size_t kMaxKinds = 3;
  constexpr size_t kMaxAlternatives = 1024;
  if (needs.size() > kMaxKinds)
    return Unsupported("contains (more than " + std::to_string(kMaxKinds) + " kinds of element)", path);
  const uint32_t kinds = static_cast<uint32_t>(needs.size());
  // The witness of each non-empty set of kinds: an element meeting the items schema and all of them.
  std::map<uint32_t, ExprId> witness_of;
  auto witness = [&](uint32_t set) -> Result<ExprId> {
    if (auto it = witness_of.find(set); it != witness_of.end()) return it->second;
    Json all = Json::array({rest_schema});
    for (uint32_t k = 0; k < kinds; ++k)
      if (set >> k & 1) all.push_back(needs[k]);
    DI_ASSIGN_OR_RETURN(ExprId e, Compile(Json{{"allOf", all}}, path + "/contains", depth + 1));
    witness_of[set] = e;
    return e;
  };
  std::vector<std::vector<uint32_t>> partitions;  // ordered partitions of the kinds, as bit sets
  std::vector<uint32_t> blocks;
  std::function<void(uint32_t)> split = [&](uint32_t left) {
    if (left == 0) {
      partitions.push_back(blocks);
      return;
    }
    for (uint32_t set = left; set != 0; set = (set - 1) & left) {
      blocks.push_back(set);
      split(left & ~set);
      blocks.pop_back();
    }
  };
  split((1u << kinds) - 1);

  const ExprId sep = Tok(",");
  auto el = [&](ExprId e) { return g_.Seq({e, Ws()}); };
  const ExprId before = g_.Seq({el(item), sep}), after = g_.Seq({sep, el(item)});
  size_t alternatives = 0;
  std::vector<ExprId> alts;
  for (const std::vector<uint32_t>& p : partitions) {
    const uint32_t w = static_cast<uint32_t>(p.size());
    if (max != kUnbounded && max < w) continue;
    std::vector<ExprId> wit;
    for (uint32_t set : p) {
      DI_ASSIGN_OR_RETURN(ExprId e, witness(set));
      wit.push_back(e);
    }
    // The elements from witness i on, with lo..hi other elements still to place (hi kUnbounded: no bound).
    std::map<std::tuple<uint32_t, uint32_t, uint32_t>, ExprId> memo;
    std::function<Result<ExprId>(uint32_t, uint32_t, uint32_t)> from = [&](uint32_t i, uint32_t lo, uint32_t hi) -> Result<ExprId> {
      if (i == w) return g_.Repeat(after, lo, hi);
      if (auto it = memo.find({i, lo, hi}); it != memo.end()) return it->second;
      const ExprId gap = i == 0 ? before : after;
      const ExprId here = i == 0 ? el(wit[i]) : g_.Seq({sep, el(wit[i])});
      std::vector<ExprId> cases;
      auto add = [&](uint32_t a, uint32_t a_hi, uint32_t next_lo, uint32_t next_hi) -> Status {
        if (++alternatives > kMaxAlternatives)
          return Unsupported("contains (more than " + std::to_string(kMaxAlternatives) + " ways to place its kinds)", path);
        DI_ASSIGN_OR_RETURN(ExprId rest, from(i + 1, next_lo, next_hi));
        cases.push_back(g_.Seq({g_.Repeat(gap, a, a_hi), here, rest}));
        return Status::Ok();
      };
      // Fewer than lo elements here: the rest must place the difference.
      for (uint32_t a = 0; a < lo; ++a) DI_RETURN_IF_ERROR(add(a, a, lo - a, hi == kUnbounded ? kUnbounded : hi - a));
      if (hi == kUnbounded) {
        DI_RETURN_IF_ERROR(add(lo, kUnbounded, 0, kUnbounded));
      } else {
        for (uint32_t a = lo; a <= hi; ++a) DI_RETURN_IF_ERROR(add(a, a, 0, hi - a));
      }
      const ExprId e = g_.Alt(std::move(cases));
      memo[{i, lo, hi}] = e;
      return e;
    };
    const uint32_t lo = min > w ? min - w : 0;
    const uint32_t hi = max == kUnbounded ? kUnbounded : max - w;
    DI_ASSIGN_OR_RETURN(ExprId e, from(0, lo, hi));
    alts.push_back(e);
  }
  return g_.Alt(std::move(alts));
}

Result<std::optional<std::vector<Json>>> SchemaCompiler::DistinctItemValues(const Json& items, const std::string& path,
                                                                            uint32_t depth) {
  using Out = std::optional<std::vector<Json>>;
  constexpr size_t kMaxCandidates = 64;
  Json storage;
  DI_ASSIGN_OR_RETURN(const Json* view, r_.InlineView(items, path, depth + 1, &storage));
  if (!view->is_object()) return Out();
  std::optional<Json> candidates = FiniteValues(*view, path);
  if (!candidates) {
    const uint8_t types = SchemaResolver::TypesOf(*view);
    if ((types & ~(kNull | kBool)) == 0) {
      candidates = Json::array();
      if (types & kNull) candidates->push_back(nullptr);
      if (types & kBool) candidates->push_back(true), candidates->push_back(false);
    } else if (types == kInteger) {
      auto lo = view->find("minimum"), hi = view->find("maximum");
      if (lo == view->end() || hi == view->end() || !lo->is_number() || !hi->is_number()) return Out();
      const double a = std::ceil(lo->get<double>()), b = std::floor(hi->get<double>());
      if (!(b - a < static_cast<double>(kMaxCandidates))) return Out();
      candidates = Json::array();
      for (double v = a; v <= b; ++v) candidates->push_back(static_cast<int64_t>(v));
    } else {
      return Out();
    }
  }
  if (!candidates->is_array() || candidates->size() > kMaxCandidates) return Out();
  auto members = ValidMembers(r_, o_.max_depth, *view, *candidates, path);
  if (!members.ok()) return Out();
  // Classes of equal values: nlohmann compares numbers by value across integer and float kinds.
  std::vector<Json> classes;
  for (const Json& v : *members) {
    if (v.is_object() || v.is_array()) return Out();
    auto same = std::find_if(classes.begin(), classes.end(), [&](const Json& c) { return c[0] == v; });
    if (same == classes.end()) classes.push_back(Json::array({v}));
    else same->push_back(v);
  }
  return Out(std::move(classes));
}

Result<ExprId> SchemaCompiler::UniqueArray(const std::vector<Json>& classes, uint32_t min, uint32_t max,
                                           const std::string& path) {
  constexpr double kMaxSets = 4096;
  const size_t n = classes.size();
  const uint32_t top = static_cast<uint32_t>(std::min<size_t>(max, n));
  if (min > top) return g_.Nothing();
  double sets = 0, choose = 1;  // the number of sets of at most `top` classes
  for (uint32_t k = 0; k <= top; ++k) {
    sets += choose;
    choose = choose * static_cast<double>(n - k) / static_cast<double>(k + 1);
  }
  if (sets > kMaxSets) return Unsupported("uniqueItems (over more than 4096 sets of distinct items)", path);
  std::vector<ExprId> values;
  for (const Json& c : classes) {
    DI_ASSIGN_OR_RETURN(ExprId spellings, Values(c, Json(), kAllTypes));
    values.push_back(g_.Seq({spellings, Ws()}));
  }
  // After(used): what may follow once the classes in `used` are in the array: the end, where enough
  // are, or `,` and an unused class.
  std::map<uint64_t, uint32_t> rules;
  const std::string base = "unique_items" + path + "#" + std::to_string(unique_arrays_++) + "/";
  std::function<ExprId(uint64_t, uint32_t)> after = [&](uint64_t used, uint32_t count) -> ExprId {
    if (auto it = rules.find(used); it != rules.end()) return Ref(it->second);
    const uint32_t rule = g_.AddRule(base + std::to_string(used));
    rules[used] = rule;
    std::vector<ExprId> alts;
    if (count >= min) alts.push_back(g_.Empty());
    if (count < top)
      for (size_t i = 0; i < n; ++i)
        if (!(used >> i & 1)) alts.push_back(g_.Seq({Tok(","), values[i], after(used | uint64_t{1} << i, count + 1)}));
    g_.Define(rule, g_.Alt(std::move(alts)));
    return Ref(rule);
  };
  std::vector<ExprId> first;
  if (min == 0) first.push_back(g_.Empty());
  if (top > 0)
    for (size_t i = 0; i < n; ++i) first.push_back(g_.Seq({values[i], after(uint64_t{1} << i, 1)}));
  return g_.Seq({Tok("["), g_.Alt(std::move(first)), Lit("]")});
}

// An object (`s`, its keywords merged). `$some` (from negations: a member whose key meets a key schema
// and whose value meets a value schema must exist) is taken here: the witness is a listed name (that
// name required, its schema and the value schema both), or one of the other members (ObjectBody).
// Two witnesses: the first is a listed member (and the second is found in that object as for one), or
// one of the other members while the second is a listed member, the same other member, or a different
// one (ObjectBody with both). Under maxProperties 1 the one member is every witness.
Result<ExprId> SchemaCompiler::Object(const Json& s, const std::string& path, uint32_t depth) {
  auto some = s.find("$some");
  if (some == s.end()) return ObjectBody(s, nullptr, path, depth);
  if (!some->is_array() || some->empty()) return Invalid("$some must be a non-empty array", path);
  // One member meeting every witness of `ws`: their key and value schemas hold together.
  auto combine = [](const std::vector<const Json*>& ws) {
    Json combined = Json{{"key", Json::object()}, {"value", Json{{"allOf", Json::array()}}}};
    for (const Json* x : ws) {
      for (const char* k : {"$patterns", "$not_patterns", "$not_in"})
        if (auto it = x->at("key").find(k); it != x->at("key").end())
          for (const Json& e : *it) combined["key"][k].push_back(e);
      combined["value"]["allOf"].push_back(x->at("value"));
    }
    return combined;
  };
  Json rest = s;
  rest.erase("$some");
  Json names = Json::array();
  const Json props = s.value("properties", Json::object());
  if (props.is_object())
    for (auto p = props.begin(); p != props.end(); ++p) names.push_back(p.key());
  if (auto req = s.find("required"); req != s.end() && req->is_array())
    for (const Json& n : *req)
      if (n.is_string() && std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  // `base` with the listed name `n` required and meeting witness `w`'s value schema as well as its own.
  auto with_member = [&](const Json& base, const Json& n, const Json& w) -> Result<Json> {
    const std::string name = n.get<std::string>();
    Json t = base;
    DI_ASSIGN_OR_RETURN(bool patterned, MatchesAPattern(s, name, path));
    Json own = props.is_object() && props.contains(name) ? props[name]
               : patterned                             ? Json(true)  // the pattern schemas apply (ObjectBody)
               : s.contains("additionalProperties")   ? s["additionalProperties"]
                                                      : Json(!o_.strict);
    t["properties"][name] = Json{{"allOf", Json::array({own, w.at("value")})}};
    if (!t.contains("required") || !t["required"].is_array()) t["required"] = Json::array();
    if (std::find(t["required"].begin(), t["required"].end(), n) == t["required"].end()) t["required"].push_back(n);
    return t;
  };
  std::vector<ExprId> alts;
  if (some->size() > 1) {
    uint32_t most = kUnbounded;
    DI_RETURN_IF_ERROR(ReadCount(s, "maxProperties", 1e4, path, &most));
    if (most > 1 && some->size() > 2) return Unsupported("not (of more than two object keywords that need a member each)", path);
    if (most > 1) {
      const Json &w1 = (*some)[0], &w2 = (*some)[1];
      DI_ASSIGN_OR_RETURN(Json good1, ValidMembers(r_, o_.max_depth, w1.at("key"), names, path));
      for (const Json& n : good1) {
        DI_ASSIGN_OR_RETURN(Json t, with_member(rest, n, w1));
        t["$some"] = Json::array({w2});
        DI_ASSIGN_OR_RETURN(ExprId e, Object(t, path, depth + 1));
        alts.push_back(e);
      }
      DI_ASSIGN_OR_RETURN(Json good2, ValidMembers(r_, o_.max_depth, w2.at("key"), names, path));
      for (const Json& n : good2) {
        DI_ASSIGN_OR_RETURN(Json t, with_member(rest, n, w2));
        DI_ASSIGN_OR_RETURN(ExprId e, ObjectBody(t, &w1, path, depth + 1));
        alts.push_back(e);
      }
      const Json both = combine({&w1, &w2});
      DI_ASSIGN_OR_RETURN(ExprId same, ObjectBody(rest, &both, path, depth + 1));
      alts.push_back(same);
      DI_ASSIGN_OR_RETURN(ExprId apart, ObjectBody(rest, &w1, path, depth + 1, &w2));
      alts.push_back(apart);
      return g_.Alt(std::move(alts));
    }
  }
  std::vector<const Json*> all;
  for (const Json& x : *some) all.push_back(&x);
  const Json combined = some->size() > 1 ? combine(all) : Json();
  const Json& w = some->size() > 1 ? combined : (*some)[0];
  DI_ASSIGN_OR_RETURN(Json good, ValidMembers(r_, o_.max_depth, w.at("key"), names, path));
  for (const Json& n : good) {
    DI_ASSIGN_OR_RETURN(Json t, with_member(rest, n, w));
    DI_ASSIGN_OR_RETURN(ExprId e, ObjectBody(t, nullptr, path, depth + 1));
    alts.push_back(e);
  }
  DI_ASSIGN_OR_RETURN(ExprId e, ObjectBody(rest, &w, path, depth + 1));
  alts.push_back(e);
  return g_.Alt(std::move(alts));
}

// The key text a key schema ({$patterns, $not_patterns, $not_in}: from negations) allows, within `any`.
Result<ExprId> SchemaCompiler::KeyBody(const Json& k, ExprId any, const std::string& path) {
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

// The object without $some; `witness` ({key, value}): one of the members no property lists must meet it;
// `second`: another of them must meet that one (supported without maxProperties, minProperties at most 2).
Result<ExprId> SchemaCompiler::ObjectBody(const Json& s, const Json* witness, const std::string& path, uint32_t depth,
                                          const Json* second) {
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
  const size_t listed_count = names.size();  // the names after these are required ones nothing lists
  std::deque<Json> owned;  // schemas[i] may point here: a deque keeps them in place as it grows (a name
                           // matching several patterns adds one per pattern)
  for (const auto& r : req_order) {
    if (std::find(names.begin(), names.end(), r) != names.end()) continue;
    names.push_back(r);
    // A required name nothing lists takes the additional schema (none where additionalProperties is
    // false, so the object cannot be; anything under strict's default), unless a pattern matches it: then
    // the pattern schemas below, and not the additional one.
    DI_ASSIGN_OR_RETURN(bool patterned, MatchesAPattern(s, r, path));
    schemas.push_back(patterned ? &any : additional ? additional : s.contains("additionalProperties") ? &additional_false : &any);
  }
  // $pattern_guards (from merging allOf members): a guard's schema holds for a key no listed name spells
  // that matches a pattern and none of the guard's patterns.
  std::vector<std::pair<std::set<std::string>, const Json*>> guards;
  if (auto it = s.find("$pattern_guards"); it != s.end()) {
    if (!it->is_array()) return Invalid("$pattern_guards must be an array", path);
    for (const Json& g : *it) {
      if (!g.is_object() || !g.contains("schema") || !g.contains("patterns") || !g["patterns"].is_array())
        return Invalid("$pattern_guards must hold {patterns, schema} objects", path);
      std::set<std::string> own;
      for (const Json& p : g["patterns"])
        if (p.is_string()) own.insert(p.get<std::string>());
      guards.push_back({std::move(own), &g["schema"]});
    }
  }
  // Required names nothing lists that a pattern matches: the guards whose patterns match none of them.
  for (size_t i = listed_count; i < names.size() && !guards.empty() && patterns; ++i) {
    DI_ASSIGN_OR_RETURN(bool patterned, MatchesAPattern(s, names[i], path));
    if (!patterned) continue;
    for (const auto& [own, schema] : guards) {
      bool hit = false;
      for (const std::string& p : own) {
        DI_ASSIGN_OR_RETURN(Json m, ValidMembers(r_, o_.max_depth, Json{{"pattern", p}}, Json::array({names[i]}), path + "/patternProperties"));
        hit = hit || !m.empty();
      }
      if (hit) continue;
      owned.push_back(Json{{"allOf", Json::array({*schemas[i], *schema})}});
      schemas[i] = &owned.back();
    }
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
  // propertyNames (a pattern, lengths, enum/const; Rewrite lets no other form through): listed names it
  // rejects cannot appear, and other keys are spelled within it.
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
      // enum/const: a key is one of their strings (members of other types name no key), spelled as the
      // canonical key text spells it.
      std::optional<std::vector<std::string>> allowed;
      for (const char* kw : {"enum", "const"}) {
        auto e = k.find(kw);
        if (e == k.end()) continue;
        const Json members = std::string(kw) == "const" ? Json::array({*e}) : *e;
        if (!members.is_array()) return Invalid(std::string("propertyNames' ") + kw + " must be an array", path);
        std::vector<std::string> strings;
        for (const Json& m : members)
          if (m.is_string() && (!allowed || std::find(allowed->begin(), allowed->end(), m.get<std::string>()) != allowed->end()))
            strings.push_back(m.get<std::string>());
        allowed = std::move(strings);
      }
      if (allowed) {
        std::vector<ExprId> spelled;
        for (const std::string& a : *allowed) {
          const std::string q = JsonQuote(a);
          spelled.push_back(Lit(q.substr(1, q.size() - 2)));
        }
        key_any = spelled.empty() ? g_.Nothing() : g_.And(key_any, g_.Alt(std::move(spelled)));
      }
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
  std::vector<ExprId> extra_alts, witness_alts, second_alts;
  const Json* const witnesses[2] = {witness, second};
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
      // The keys of this set match its patterns and no other: a guard holds where none is the guard's.
      for (const auto& [own, guard] : guards) {
        bool mine = false;
        for (size_t m : set) mine = mine || own.count(keys[m]) > 0;
        if (!mine) schema = Json{{"allOf", Json::array({std::move(schema), *guard})}};
      }
      DI_ASSIGN_OR_RETURN(ExprId v, Compile(schema, where, depth + 1));
      extra_alts.push_back(g_.Seq({Lit("\""), key_body_excluding(body, out), Lit("\""), Ws(), Tok(":"), v, Ws()}));
      for (int wi = 0; wi < 2; ++wi) {
        const Json* wt = witnesses[wi];
        if (!wt) continue;
        DI_ASSIGN_OR_RETURN(ExprId wk, KeyBody(wt->at("key"), key_body_excluding(body, out), where));
        DI_ASSIGN_OR_RETURN(ExprId wv, Compile(Json{{"allOf", Json::array({schema, wt->at("value")})}}, where, depth + 1));
        (wi == 0 ? witness_alts : second_alts).push_back(g_.Seq({Lit("\""), wk, Lit("\""), Ws(), Tok(":"), wv, Ws()}));
      }
    }
  }
  if (additional) {
    std::vector<ExprId> out = listed_bodies;
    out.insert(out.end(), pattern_bodies.begin(), pattern_bodies.end());
    DI_ASSIGN_OR_RETURN(ExprId v, Compile(*additional, path + "/additionalProperties", depth + 1));
    extra_alts.push_back(g_.Seq({Lit("\""), key_body_excluding(key_any, out), Lit("\""), Ws(), Tok(":"), v, Ws()}));
    for (int wi = 0; wi < 2; ++wi) {
      const Json* wt = witnesses[wi];
      if (!wt) continue;
      DI_ASSIGN_OR_RETURN(ExprId wk, KeyBody(wt->at("key"), key_body_excluding(key_any, out), path));
      DI_ASSIGN_OR_RETURN(ExprId wv, Compile(Json{{"allOf", Json::array({*additional, wt->at("value")})}},
                                             path + "/additionalProperties", depth + 1));
      (wi == 0 ? witness_alts : second_alts).push_back(g_.Seq({Lit("\""), wk, Lit("\""), Ws(), Tok(":"), wv, Ws()}));
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
    if (witness_alts.empty() || (second && second_alts.empty())) return g_.Nothing();
    const ExprId wm = g_.Alt(std::move(witness_alts));
    const ExprId before = g_.Seq({extra, Tok(",")});
    std::vector<std::pair<ExprId, std::pair<uint32_t, uint32_t>>> xs;  // item, its bounds
    constexpr uint32_t kMaxSplit = 64;
    if (second) {
      // Both witnesses, in either order, other members before and between them: one item of at least two
      // members, so minProperties up to 2 always holds and the count needs no bound.
      if (min > 2 || max != kUnbounded)
        return Unsupported("not (of two object keywords that need a member each, under min/maxProperties)", path);
      const ExprId wm2 = g_.Alt(std::move(second_alts));
      const ExprId others = has_extra ? g_.Star(before) : g_.Empty();
      xs.push_back({g_.Alt({g_.Seq({others, wm, Tok(","), others, wm2}), g_.Seq({others, wm2, Tok(","), others, wm})}),
                    {0, kUnbounded}});
    } else if (!has_extra) {
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

Result<bool> SchemaCompiler::MatchesAPattern(const Json& s, const std::string& name, const std::string& path) {
  auto patterns = s.find("patternProperties");
  if (patterns == s.end() || !patterns->is_object()) return false;
  for (auto p = patterns->begin(); p != patterns->end(); ++p) {
    DI_ASSIGN_OR_RETURN(Json hit, ValidMembers(r_, o_.max_depth, Json{{"pattern", p.key()}}, Json::array({name}), path + "/patternProperties"));
    if (!hit.empty()) return true;
  }
  return false;
}

}  // namespace deepinfer::grammar::json_schema_internal
