// oneOf branches that may overlap, made exclusive: branch i becomes rest ∧ B_i ∧ ¬B_j for each j it may
// meet, each ¬B_j exact (Negate), with the cases that cannot meet B_i dropped and the cases every ¬B_j
// shares factored out, so the alternatives stay few (at most kMaxAlternatives, else an error).
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "grammar/json_schema_internal.h"

namespace deepinfer::grammar::json_schema_internal {

// A case of ¬B_j, "member p present and failing B_j's schema for it", within branch i (`bi`): where
// B_i's and B_j's schemas for p never meet, any value of p that B_i allows fails B_j, so the case is
// "p present". Cases of several ¬B_j then read the same, and the oneOf factors them out.
// The form without `required` ("p absent, or present and failing", from a required member of B_j) holds
// for all of B_i then: the result is true.
Result<std::optional<Json>> SchemaResolver::PresentIsEnough(const Json& c, const Json& bi, const Json& bj, uint32_t depth) const {
  const std::optional<Json> unchanged;
  if (!c.is_object() || (c.size() != 3 && c.size() != 2) || c.value("type", Json()) != "object") return unchanged;
  auto req = c.find("required"), props = c.find("properties");
  const bool absent_too = c.size() == 2;
  if (props == c.end() || !props->is_object() || props->size() != 1) return unchanged;
  if (!absent_too && (req == c.end() || !req->is_array() || req->size() != 1 || (*req)[0] != props->begin().key())) return unchanged;
  const std::string& p = props->begin().key();
  auto si = bi.is_object() ? bi.find("properties") : bi.end();
  auto sj = bj.is_object() ? bj.find("properties") : bj.end();
  if (si == bi.end() || sj == bj.end() || !si->is_object() || !sj->is_object() || !si->contains(p) || !sj->contains(p)) return unchanged;
  DI_ASSIGN_OR_RETURN(bool d, Disjoint((*si)[p], (*sj)[p], depth + 1));
  if (!d) return unchanged;
  if (absent_too) return std::optional<Json>(Json(true));
  return std::optional<Json>(Json{{"type", "object"}, {"required", *req}});
}

Result<std::vector<uint8_t>> SchemaResolver::MakeExclusive(const Json& branches, const std::vector<std::vector<size_t>>& overlaps,
                                                           const std::string& kw, const std::string& path, uint32_t depth,
                                                           std::vector<Json>* merged_out) const {
  constexpr double kMaxAlternatives = 256;
  std::vector<Json>& merged = *merged_out;
  std::vector<uint8_t> contained(merged.size(), 0);
  // Each ¬B_j is an anyOf of cases; those that cannot meet branch i (Disjoint) are dropped. Where
  // every case is dropped, branch i lies inside B_j (sub), so it adds nothing; and branch i needs no
  // ¬B_j where it also excludes a B_k that holds B_j (¬B_k implies ¬B_j; of two equal ones the
  // first stays).
  std::vector<std::optional<Json>> negated(merged.size());
  // kept[i][j]: the cases of ¬B_j that meet B_i, pointing into negated[j] (which stays as it is from here).
  std::vector<std::map<size_t, std::vector<const Json*>>> kept(merged.size());
  // ¬B_j meets only the branches that may overlap B_j: instances of their types.
  std::vector<uint8_t> within(merged.size(), 0);
  for (size_t i = 0; i < merged.size(); ++i)
    for (size_t j : overlaps[i]) within[j] |= TypesOf(merged[i]);
  for (size_t i = 0; i < merged.size(); ++i)
    for (size_t j : overlaps[i]) {
      if (!negated[j]) negated[j] = Negate(branches[j], path + "/" + kw + "/" + std::to_string(j), depth + 1, within[j]);
      if (!negated[j])
        return Unsupported("oneOf (with branches that may overlap; branch " + std::to_string(j) + " has no exact negation)", path);
      // A negated definition is read as its cases, so that those that cannot meet branch i drop out.
      if (auto ref = negated[j]->is_object() && negated[j]->size() == 1 ? negated[j]->find("$ref") : negated[j]->end();
          ref != negated[j]->end() && ref->is_string() && NegatedRefTarget(ref->get<std::string>())) {
        DI_ASSIGN_OR_RETURN(const Json* definition, Resolve(ref->get<std::string>(), path));
        negated[j] = *definition;
      }
      auto any = negated[j]->is_object() ? negated[j]->find("anyOf") : negated[j]->end();
      const bool cases = any != negated[j]->end() && negated[j]->size() == 1 && any->is_array();
      std::vector<const Json*> k;
      auto keep_if_meets = [&](const Json& c) -> Status {
        DI_ASSIGN_OR_RETURN(bool d, Disjoint(merged[i], c, depth + 1));
        if (!d) k.push_back(&c);
        return Status::Ok();
      };
      if (cases) {
        for (const Json& c : *any) DI_RETURN_IF_ERROR(keep_if_meets(c));
      } else {
        DI_RETURN_IF_ERROR(keep_if_meets(*negated[j]));
      }
      kept[i][j] = std::move(k);
    }
  auto sub = [&](size_t a, size_t b) {
    auto found = kept[a].find(b);
    return found != kept[a].end() && found->second.empty();
  };
  double alternatives = 0;
  // The exclusions of each branch, merged in once all are known: the cases read the branches as they were.
  const std::vector<Json>& base = merged;
  std::vector<std::vector<Json>> exclusions_of(merged.size());
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
      for (const Json* kept_case : kept[i][j]) {
        DI_ASSIGN_OR_RETURN(std::optional<Json> simpler, PresentIsEnough(*kept_case, base[i], base[j], depth));
        const Json& c = simpler ? *simpler : *kept_case;
        always = always || (c.is_boolean() && c.get<bool>());
        if (std::find(cases.begin(), cases.end(), c) == cases.end()) cases.push_back(simpler ? std::move(*simpler) : c);
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
    if (alternatives > kMaxAlternatives)
      return Unsupported("oneOf (with branches that may overlap; their exclusion needs more than 256 alternatives)", path);
    std::vector<Json> exclusions;
    for (const Json& l : lists) exclusions.push_back(l.size() == 1 ? l[0] : Json{{"anyOf", l}});
    if (!common.empty()) {
      Json any = common;
      if (!rest_empty && !exclusions.empty()) any.push_back(Json{{"allOf", exclusions}});
      exclusions = {any.size() == 1 ? any[0] : Json{{"anyOf", any}}};
    }
    exclusions_of[i] = std::move(exclusions);
  }
  for (size_t i = 0; i < merged.size(); ++i)
    for (Json& e : exclusions_of[i]) {
      DI_ASSIGN_OR_RETURN(merged[i], Merge(std::move(merged[i]), std::move(e), path + "/" + kw + "/" + std::to_string(i), depth + 1));
    }
  return contained;
}

}  // namespace deepinfer::grammar::json_schema_internal
