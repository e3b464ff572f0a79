// How a parsed request shapes the output side: which parser options and response settings its
// completion needs. The serving path and `deepinfer generate` both go through here so that they parse
// model output the way the request's prompt set it up.
#pragma once

#include "recipe/output_options.h"
#include "recipe/request.h"

namespace deepinfer::recipe {

// Thinking stage (a new turn, or a prefix continuation inside or after the reasoning), tool-call parsing
// (only when tools were declared; "required" opens the block in the prompt), JSON mode, stop sequences.
OutputParserOptions OutputParserOptionsFor(const ParsedRequest& request, ModelVersion version);

// Model name, thinking mode and include_usage as the request gave them; the caller sets id and times.
ResponseOptions ResponseOptionsFor(const ParsedRequest& request);

}  // namespace deepinfer::recipe
