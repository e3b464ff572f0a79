// What a request asks of each output's tokens, as plain data that can be copied, compared and sent to
// another process: a grammar (structured output, strict tools) or a script of forced tokens. The engine
// turns it into one LogitsMask per output (constraint_masks.h); nothing here runs code of the caller's.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "grammar/constraint.h"

namespace deepinfer::sampling {

struct OutputConstraint {
  // The grammar each output must follow; its stop tokens are allowed where it may end, and accepting one
  // finishes the output (reason "stop").
  std::optional<grammar::ConstraintSpec> grammar;
  // >= 0: tokens are free up to and including this one, and the grammar applies from the next token on
  // (the id of `</think>` in thinking mode, so that structured output never constrains the reasoning).
  int32_t grammar_start_after_token = -1;
  // The output is exactly these tokens, then finishes with reason "stop", whatever the logits say (tests
  // force tool calls and reasoning through the whole serving path with it). Not with a grammar.
  std::optional<std::vector<int32_t>> scripted_tokens;

  bool empty() const { return !grammar && !scripted_tokens; }
};

}  // namespace deepinfer::sampling
