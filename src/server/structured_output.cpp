#include "server/structured_output.h"

#include "engine/engine.h"
#include "grammar/constraint.h"
#include "recipe/structured_output.h"
#include "sampling/grammar_mask.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

StructuredOutputs::StructuredOutputs(const tokenizer::Tokenizer* tokenizer)
    : tokenizer_(tokenizer), cache_(std::make_unique<grammar::ConstraintCache>()) {}

StructuredOutputs::~StructuredOutputs() = default;

Result<std::shared_ptr<const grammar::TokenIndex>> StructuredOutputs::Vocab() {
  std::call_once(once_, [this] {
    // Stop ids: the tokenizer's end-of-sentence token, the engine's default end of an output.
    auto vocab = grammar::TokenIndex::FromTokenizer(*tokenizer_, {});
    if (vocab.ok()) {
      vocab_ = *vocab;
    } else {
      vocab_status_ = vocab.status();
    }
  });
  if (!vocab_) return vocab_status_;
  return vocab_;
}

std::optional<recipe::RequestError> StructuredOutputs::Apply(std::string_view body, const recipe::ParsedRequest& request,
                                                             engine::RequestParams* params) {
  recipe::StructuredOutput so;
  if (auto error = recipe::ReadStructuredOutput(body, request, &so)) return error;
  using Kind = recipe::StructuredOutput::Kind;
  using SpecKind = grammar::ConstraintSpec::Kind;
  if (so.kind == Kind::kNone) return std::nullopt;
  grammar::ConstraintSpec spec;
  switch (so.kind) {
    case Kind::kJsonObject: spec.kind = SpecKind::kJsonObject; break;
    case Kind::kJsonSchema: spec.kind = SpecKind::kJsonSchema; break;
    case Kind::kRegex: spec.kind = SpecKind::kRegex; break;
    case Kind::kGrammar: spec.kind = SpecKind::kEbnf; break;
    case Kind::kChoice: spec.kind = SpecKind::kChoice; break;
    case Kind::kNone: break;
  }
  spec.text = so.text;
  spec.choices = so.choices;
  spec.json.strict = so.strict;
  auto vocab = Vocab();
  if (!vocab.ok()) {
    return recipe::RequestError{500, "api_error", "", "structured output is unavailable: " + vocab.status().message()};
  }
  auto bound = cache_->Get(spec, *vocab);
  // Every compile failure is the request's: invalid, unsupported, over a size limit or too slow to compile.
  if (!bound.ok()) return recipe::RequestError{400, "invalid_request_error", so.param, so.param + ": " + bound.status().message()};
  if (params->logits_mask) return std::nullopt;
  int32_t start_after = -1;
  if (request.conversation.thinking_mode) {
    if (auto id = tokenizer_->TokenToId("</think>")) start_after = *id;
  }
  params->logits_mask = sampling::GrammarMaskFactory(*bound, start_after);
  return std::nullopt;
}

}  // namespace deepinfer::server
