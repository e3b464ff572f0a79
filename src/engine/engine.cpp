#include "engine/engine.h"

#include "model/causal_lm.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::engine {

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kDeadline: return "deadline";
    case FinishReason::kError: return "error";
  }
  return "error";
}

Result<std::unique_ptr<Engine>> Engine::Create(std::unique_ptr<model::CausalLM> model, EngineOptions options) {
  (void)model;
  (void)options;
  return Status::Unimplemented("engine: the scheduler is not implemented yet (issue 12 in progress)");
}

std::function<int64_t(std::string_view)> TokenCounter(const tokenizer::Tokenizer& tokenizer) {
  return [&tokenizer](std::string_view text) {
    return static_cast<int64_t>(tokenizer.EncodeWithAddedTokens(text).size());
  };
}

}  // namespace deepinfer::engine
