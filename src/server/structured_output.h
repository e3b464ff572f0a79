// Structured output for the chat endpoints and `deepinfer generate`: a request's constraint
// (recipe/structured_output.h) as the grammar spec the engine constrains its outputs with
// (RequestParams::constraint). The spec is compiled here first, on the caller's thread (the connection's
// strand, never the engine's step thread), so that an invalid one is a 400 before the request is queued;
// the compiler (sampling/constraint_masks.h: the vocabulary index, built on the first constrained request,
// and one cache of compiled grammars) is meant to be shared with the engine, whose compile of the same
// spec is then a cache hit. In thinking mode the reasoning block is free and the constraint starts after
// `</think>`.
//
// Strict function tools (any tool with `strict: true`; the codec lets no request mix strict and other
// tools) constrain the DSML tool-call block (grammar/tool_calls.h): only the request's tools, each call's
// parameters by its schema. With tool_choice "required" or a named tool the prompt has opened the block,
// so the output must be calls; otherwise free text comes first and the block is optional.
#pragma once

#include <memory>
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
namespace deepinfer::sampling {
class ConstraintCompiler;
}

namespace deepinfer::server {

class StructuredOutputs {
 public:
  // `compiler`: the one to compile through (share the engine's); null: one of its own over `tokenizer`.
  explicit StructuredOutputs(const tokenizer::Tokenizer* tokenizer,
                             recipe::ModelVersion model_version = recipe::ModelVersion::kV4,
                             std::shared_ptr<sampling::ConstraintCompiler> compiler = nullptr);
  ~StructuredOutputs();

  // Sets params->constraint's grammar from the constraint of `request` (parsed from `body`) once it has
  // compiled, unless the request has none or scripted tokens are set already (a test hook's script; the
  // grammar is still checked). Errors: 400 naming the field and the cause (an
  // invalid or unsupported schema, regex or grammar, or one over the compile limits; a strict tool's
  // schema the tool-call grammar cannot take, naming the tool and the path; structured_outputs / guided_*
  // together with strict tools); 500 when the
  // tokenizer's vocabulary cannot be indexed.
  std::optional<recipe::RequestError> Apply(std::string_view body, const recipe::ParsedRequest& request,
                                            engine::RequestParams* params);

  // What it compiles through: give it to the engine (EngineOptions::constraint_compiler).
  const std::shared_ptr<sampling::ConstraintCompiler>& compiler() const { return compiler_; }

 private:
  const tokenizer::Tokenizer* tokenizer_;
  recipe::ModelVersion model_version_;  // which DSML dialect strict tools are written in
  std::shared_ptr<sampling::ConstraintCompiler> compiler_;
};

}  // namespace deepinfer::server
