// A cheap proof that two schemas meet: one simple instance (null, false, a number at its bounds, a string
// of its minimum length, an array or object of what its minimums and `required` ask for) built from the
// keywords of both, then checked against both with the instance validator (json_schema_validate.cpp).
// The builder only guesses; the validator decides, so a guess that fails (or a keyword the validator does
// not evaluate) proves nothing, and the caller takes its exact path instead.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "grammar/json_schema_internal.h"

namespace deepinfer::grammar::json_schema_internal {

namespace {

class WitnessBuilder {
 public:
  explicit WitnessBuilder(const SchemaResolver& resolver) : r_(resolver) {}

  // An instance that may meet all of `schemas`, or nullopt where the guess gives up.
  std::optional<Json> Build(const std::vector<const Json*>& schemas, uint32_t depth) {
    constexpr uint32_t kMaxDepth = 16;
    if (depth > kMaxDepth) return std::nullopt;
    std::vector<const Json*> flat;
    if (!Flatten(schemas, &flat)) return std::nullopt;
    uint8_t types = kAllTypes;
    for (const Json* s : flat) {
      types &= SchemaResolver::TypesOf(*s);
      if (auto c = s->find("const"); c != s->end()) return *c;
    }
    for (const Json* s : flat)
      if (auto e = s->find("enum"); e != s->end() && e->is_array() && !e->empty()) return (*e)[0];
    if (types & kObject) return Object(flat, depth);
    if (types & kNull) return Json(nullptr);
    if (types & kBool) return Json(false);
    if (types & kInteger) return Integer(flat);
    if (types & kString) return String(flat);
    if (types & kArray) return Array(flat, depth);
    return std::nullopt;
  }

 private:
  // The schemas with $ref targets and allOf members alongside (the first anyOf/oneOf member too: a
  // guess), true-schemas dropped; false where one is false or the expansion grows too large.
  bool Flatten(const std::vector<const Json*>& schemas, std::vector<const Json*>* flat) {
    constexpr size_t kMaxSchemas = 64;
    std::vector<const Json*> work(schemas.rbegin(), schemas.rend());
    while (!work.empty()) {
      const Json* s = work.back();
      work.pop_back();
      if (s->is_boolean()) {
        if (!s->get<bool>()) return false;
        continue;
      }
      if (!s->is_object()) return false;
      if (flat->size() + work.size() > kMaxSchemas) return false;
      if (auto ref = s->find("$ref"); ref != s->end()) {
        if (!ref->is_string()) return false;
        auto target = r_.Resolve(ref->get<std::string>(), "#");
        if (!target.ok()) return false;
        work.push_back(*target);
        if (r_.RefOverridesSiblings()) continue;
      }
      flat->push_back(s);
      for (const char* k : {"allOf", "anyOf", "oneOf"}) {
        auto it = s->find(k);
        if (it == s->end() || !it->is_array() || it->empty()) continue;
        if (k[1] == 'l') {
          for (auto m = it->rbegin(); m != it->rend(); ++m) work.push_back(&*m);
        } else {
          work.push_back(&(*it)[0]);
        }
      }
    }
    return true;
  }

  static std::optional<double> Number(const Json& s, const char* k) {
    auto it = s.find(k);
    if (it == s.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  }

  // The smallest integer at or above every lower bound (0 without one), or the largest under the upper
  // bounds where only those are given.
  static std::optional<Json> Integer(const std::vector<const Json*>& flat) {
    constexpr double kMaxMagnitude = 1e15;
    std::optional<double> lo, hi;
    auto raise = [&](double x) { lo = lo ? std::max(*lo, x) : x; };
    auto lower = [&](double x) { hi = hi ? std::min(*hi, x) : x; };
    for (const Json* s : flat) {
      if (auto m = Number(*s, "minimum")) raise(std::ceil(*m));
      if (auto m = Number(*s, "exclusiveMinimum")) raise(std::floor(*m) + 1);
      if (auto m = Number(*s, "maximum")) lower(std::floor(*m));
      if (auto m = Number(*s, "exclusiveMaximum")) lower(std::ceil(*m) - 1);
    }
    double v = lo ? *lo : (hi && *hi < 0 ? *hi : 0);
    if (!(std::fabs(v) <= kMaxMagnitude)) return std::nullopt;
    return Json(static_cast<int64_t>(v));
  }

  static std::optional<Json> String(const std::vector<const Json*>& flat) {
    constexpr double kMaxLength = 64;
    double n = 0;
    for (const Json* s : flat)
      if (auto m = Number(*s, "minLength")) n = std::max(n, std::ceil(*m));
    if (n > kMaxLength) return std::nullopt;
    return Json(std::string(static_cast<size_t>(n), 'a'));
  }

  std::optional<Json> Array(const std::vector<const Json*>& flat, uint32_t depth) {
    constexpr double kMaxItems = 4;
    double n = 0;
    std::vector<const Json*> items;
    for (const Json* s : flat) {
      if (auto m = Number(*s, "minItems")) n = std::max(n, std::ceil(*m));
      if (auto it = s->find("items"); it != s->end() && (it->is_object() || it->is_boolean())) items.push_back(&*it);
    }
    if (n > kMaxItems) return std::nullopt;
    Json out = Json::array();
    if (n == 0) return out;
    std::optional<Json> item = Build(items, depth + 1);
    if (!item) return std::nullopt;
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) out.push_back(*item);
    return out;
  }

  // The members every schema requires, each from the schemas that say what it holds (its `properties`
  // entry, else `additionalProperties`).
  std::optional<Json> Object(const std::vector<const Json*>& flat, uint32_t depth) {
    Json out = Json::object();
    for (const Json* s : flat) {
      auto req = s->find("required");
      if (req == s->end() || !req->is_array()) continue;
      for (const Json& n : *req) {
        if (!n.is_string()) return std::nullopt;
        const std::string& name = n.get_ref<const std::string&>();
        if (out.contains(name)) continue;
        std::vector<const Json*> member;
        for (const Json* t : flat) {
          auto props = t->find("properties");
          if (props != t->end() && props->is_object())
            if (auto p = props->find(name); p != props->end()) {
              member.push_back(&*p);
              continue;
            }
          if (auto add = t->find("additionalProperties"); add != t->end()) member.push_back(&*add);
        }
        std::optional<Json> v = Build(member, depth + 1);
        if (!v) return std::nullopt;
        out[name] = std::move(*v);
      }
    }
    return out;
  }

  const SchemaResolver& r_;
};

}  // namespace

bool ProvablyMeet(const SchemaResolver& resolver, uint32_t max_depth, const Json& a, const Json& b) {
  WitnessBuilder builder(resolver);
  std::optional<Json> w = builder.Build({&a, &b}, 0);
  if (!w) return false;
  auto ok = ValidatesAll(resolver, max_depth, {&a, &b}, *w, "#");
  return ok.ok() && *ok;
}

}  // namespace deepinfer::grammar::json_schema_internal
