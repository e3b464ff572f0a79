// One entry point for every kind of constraint a request can carry, and the cache of compiled grammars.
//
// ConstraintCache keys compiled grammars by a 128-bit hash of their content (kind, text, options) and
// the vocabulary's fingerprint, so equal schemas from different requests share one BoundGrammar (and
// its per-state mask cache). Compile off the engine's step thread: Get() compiles on the calling thread
// and is safe to call from several threads at once.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "grammar/compiler.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace deepinfer::grammar {

struct ConstraintSpec {
  // kToolCalls: a DSML tool-call block of strict tools (tool_calls.h); `text` is SerializeToolCallSpec's.
  enum class Kind { kJsonSchema, kJsonObject, kRegex, kEbnf, kChoice, kToolCalls };
  Kind kind = Kind::kJsonSchema;
  std::string text;                  // the schema JSON, regex, EBNF or serialized tool-call spec
  std::vector<std::string> choices;  // kChoice: the allowed strings
  JsonSchemaOptions json;
};

Result<Grammar> BuildGrammar(const ConstraintSpec& spec);

class ConstraintCache {
 public:
  explicit ConstraintCache(size_t capacity = 256, CompileLimits limits = {}, MatcherLimits matcher = {})
      : capacity_(capacity), limits_(limits), matcher_(matcher) {}

  Result<std::shared_ptr<const BoundGrammar>> Get(const ConstraintSpec& spec, std::shared_ptr<const TokenIndex> vocab);
  size_t size() const;
  size_t hits() const;

 private:
  struct Key {
    uint64_t a, b;
    bool operator==(const Key& o) const { return a == o.a && b == o.b; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return static_cast<size_t>(k.a ^ (k.b * 0x9E3779B97F4A7C15ULL)); }
  };
  size_t capacity_;
  CompileLimits limits_;
  MatcherLimits matcher_;
  mutable std::mutex mu_;
  std::list<std::pair<Key, std::shared_ptr<const BoundGrammar>>> lru_;
  std::unordered_map<Key, decltype(lru_)::iterator, KeyHash> map_;
  size_t hits_ = 0;
};

}  // namespace deepinfer::grammar
