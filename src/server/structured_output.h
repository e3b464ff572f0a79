// Structured output for the chat endpoints and `deepinfer generate`: a request's constraint
// (recipe/structured_output.h) compiled into a grammar (src/grammar) and applied as the engine's logits
// mask (sampling::GrammarMaskFactory). Compilation runs on the caller's thread (the connection's strand,
// never the engine's step thread) through one cache of compiled grammars shared by all requests; the
// vocabulary index is built on the first constrained request. In thinking mode the reasoning block is
// free and the constraint starts after `</think>`.
//
// Strict function tools (any tool with `strict: true`; the codec lets no request mix strict and other
// tools) constrain the DSML tool-call block (grammar/tool_calls.h): only the request's tools, each call's
// parameters by its schema. With tool_choice "required" or a named tool the prompt has opened the block,
// so the output must be calls; otherwise free text comes first and the block is optional.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

#include "core/status.h"
#include "recipe/request.h"

namespace deepinfer::tokenizer {
class Tokenizer;
}
namespace deepinfer::engine {
struct RequestParams;
}
namespace deepinfer::grammar {
class TokenIndex;
class ConstraintCache;
}  // namespace deepinfer::grammar

namespace deepinfer::server {

class StructuredOutputs {
 public:
  explicit StructuredOutputs(const tokenizer::Tokenizer* tokenizer,
                             recipe::ModelVersion model_version = recipe::ModelVersion::kV4);
  ~StructuredOutputs();

  // Sets params->logits_mask from the constraint of `request` (parsed from `body`), unless the request has
  // none or a mask is set already (a test hook's script). Errors: 400 naming the field and the cause (an
  // invalid or unsupported schema, regex or grammar, or one over the compile limits; a strict tool's
  // schema the tool-call grammar cannot take, naming the tool and the path; structured_outputs / guided_*
  // together with strict tools); 500 when the
  // tokenizer's vocabulary cannot be indexed.
  std::optional<recipe::RequestError> Apply(std::string_view body, const recipe::ParsedRequest& request,
                                            engine::RequestParams* params);

 private:
  Result<std::shared_ptr<const grammar::TokenIndex>> Vocab();

  const tokenizer::Tokenizer* tokenizer_;
  recipe::ModelVersion model_version_;  // which DSML dialect strict tools are written in
  std::once_flag once_;
  std::shared_ptr<const grammar::TokenIndex> vocab_;
  Status vocab_status_;
  std::unique_ptr<grammar::ConstraintCache> cache_;
};

}  // namespace deepinfer::server
