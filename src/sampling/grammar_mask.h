// The adapter from the grammar matcher (src/grammar) to the engine's per-step logits-mask hook.
//
// GrammarLogitsMask allows every token until the constraint becomes active, then exactly what the
// grammar allows: with `start_after_token` set (the id of `</think>` in thinking mode), the reasoning
// block is free and the constraint starts with the token after it, so structured output never
// suppresses thinking. The stop tokens of the BoundGrammar's vocabulary are allowed where the grammar may
// end; accepting one terminates the mask (the sequence finishes with reason "stop").
#pragma once

#include <memory>

#include "grammar/matcher.h"
#include "sampling/logits_mask.h"

namespace deepinfer::sampling {

class GrammarLogitsMask final : public LogitsMask {
 public:
  explicit GrammarLogitsMask(std::shared_ptr<const grammar::BoundGrammar> grammar, int32_t start_after_token = -1);

  Status FillAllowed(TokenBitmask* allowed, bool* all_allowed) override;
  Status Accept(int32_t token) override;
  bool Terminated() const override { return matcher_.IsTerminated(); }
  // Rolls back within the constrained part; tokens before it (reasoning) only move the start back.
  Status Rollback(int n) override;

 private:
  grammar::GrammarMatcher matcher_;
  int32_t start_after_;
  bool active_;
  // Tokens accepted since activation, and tokens seen before it (for Rollback across the start).
  std::vector<uint8_t> kinds_;  // 0: before the start, 1: the start token, 2: constrained
};

}  // namespace deepinfer::sampling
