// Pieces shared by the V3.2 and V4/V4.1 prompt renderers (not part of the public interface).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "recipe/conversation.h"
#include "recipe/render.h"

namespace deepinfer::recipe {

Result<RenderedPrompt> RenderPromptV32(const Conversation& conversation);
Result<RenderedPrompt> RenderPromptV4(const Conversation& conversation, bool v41);

// JSON as deepseek-recipe writes it into prompts: Python json.dumps spacing and escapes
// (ensure_ascii=False); floats in Python repr for V4.1 (python_floats) and in the Rust layout of
// RecipeFloatRepr for V4, as the oracle does.
std::string RecipeJsonDumps(const nlohmann::ordered_json& value, bool python_floats);
std::string RecipeFloatRepr(double value);

// json.dumps({"name", "description", "parameters"}, ensure_ascii=False) of one tool: the line the tools
// prompt lists it as.
std::string ToolSchemaLine(const ToolDefinition& tool, bool python_floats);

// The arguments of a historical tool call as an ordered JSON object (Python json.loads semantics:
// duplicate keys keep their first position and their last value). `serde_numbers`: read `-0` as -0.0, as
// deepseek-recipe's serde_json does (V4, V4.1); Python's json.loads (V3.2's reference) reads the integer 0.
Result<nlohmann::ordered_json> ParseToolArguments(std::string_view arguments, bool serde_numbers);

// The response-format paragraph appended to the system prompt, or empty for plain text.
std::string ResponseFormatText(const Conversation& conversation, bool v41);

// Writes `text` with placeholders: {D} → ｜DSML｜ (control token), {TS}/{TE} → <think>/</think> (control
// tokens), {calls}/{invoke}/{parameter} → the version's tag names (plain text).
struct DsmlTagNames {
  std::string_view calls;
  std::string_view invoke;
  std::string_view parameter;
};
void AppendTemplate(PromptBuilder& builder, std::string_view text, const DsmlTagNames& tags);

}  // namespace deepinfer::recipe
