#include "grammar/constraint.h"

#include "grammar/ebnf.h"
#include "grammar/json_text.h"
#include "grammar/regex.h"
#include "grammar/tool_calls.h"

namespace deepinfer::grammar {

Result<Grammar> BuildGrammar(const ConstraintSpec& spec) {
  switch (spec.kind) {
    case ConstraintSpec::Kind::kJsonSchema:
      return JsonSchemaToGrammar(spec.text, spec.json);
    case ConstraintSpec::Kind::kJsonObject:
      return JsonObjectGrammar(spec.json);
    case ConstraintSpec::Kind::kEbnf:
      return ParseEbnf(spec.text);
    case ConstraintSpec::Kind::kRegex: {
      Grammar g;
      uint32_t r = g.AddRule("root");
      DI_ASSIGN_OR_RETURN(ExprId e, CompileRegex(spec.text, RegexOptions{}, &g));
      g.Define(r, e);
      return g;
    }
    case ConstraintSpec::Kind::kToolCalls: {
      DI_ASSIGN_OR_RETURN(ToolCallGrammarSpec tools, ParseToolCallSpec(spec.text));
      return ToolCallGrammar(tools);
    }
    case ConstraintSpec::Kind::kChoice: {
      if (spec.choices.empty()) return Status::InvalidArgument("choice needs at least one string");
      Grammar g;
      uint32_t r = g.AddRule("root");
      std::vector<ExprId> alts;
      for (const auto& c : spec.choices) alts.push_back(g.Literal(c));
      g.Define(r, g.Alt(std::move(alts)));
      return g;
    }
  }
  return Status::InvalidArgument("unknown constraint kind");
}

namespace {

uint64_t Hash64(std::string_view s, uint64_t seed) {
  uint64_t h = seed ^ (s.size() * 0x9E3779B97F4A7C15ULL);
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ULL;
    h ^= h >> 31;
  }
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  return h;
}

}  // namespace

Result<std::shared_ptr<const BoundGrammar>> ConstraintCache::Get(const ConstraintSpec& spec,
                                                                 std::shared_ptr<const TokenIndex> vocab) {
  std::string content;
  content.append(std::to_string(static_cast<int>(spec.kind)));
  content.push_back('|');
  content.append(std::to_string(static_cast<int>(spec.json.whitespace)));
  content.push_back(spec.json.strict ? 's' : '-');
  content.push_back(spec.json.integer_fraction ? 'f' : '-');
  content.push_back(spec.json.draft7_without_schema ? '7' : '-');
  content.push_back(spec.json.one_of_as_any_of ? 'o' : '-');
  content.append(std::to_string(vocab->fingerprint()));
  content.push_back('|');
  content.append(spec.text);
  for (const auto& c : spec.choices) {
    content.push_back('|');
    content.append(std::to_string(c.size()));
    content.push_back(':');
    content.append(c);
  }
  Key key{Hash64(content, 1), Hash64(content, 0x5DEECE66DULL)};
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->second;
    }
  }
  DI_ASSIGN_OR_RETURN(Grammar g, BuildGrammar(spec));
  DI_ASSIGN_OR_RETURN(CompiledGrammar cg, Compile(g, limits_));
  auto bound = std::make_shared<const BoundGrammar>(std::make_shared<const CompiledGrammar>(std::move(cg)),
                                                    std::move(vocab), matcher_);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = map_.find(key); it != map_.end()) return it->second->second;
  lru_.emplace_front(key, bound);
  map_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    map_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return std::shared_ptr<const BoundGrammar>(bound);
}

size_t ConstraintCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

size_t ConstraintCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

}  // namespace deepinfer::grammar
