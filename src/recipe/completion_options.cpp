#include "recipe/completion_options.h"

namespace deepinfer::recipe {

OutputParserOptions OutputParserOptionsFor(const ParsedRequest& request, ModelVersion version) {
  const Conversation& conversation = request.conversation;
  OutputParserOptions options;
  options.model_version = version;
  options.parse_tool_calls = !conversation.tools.empty() && conversation.tool_choice != ToolChoice::kNone;
  options.starts_in_tool_calls = !conversation.tools.empty() && conversation.tool_choice == ToolChoice::kRequired;
  options.parse_json_output = conversation.response_format == ResponseFormat::kJsonObject;
  options.stop_sequences = request.inference.stop;
  if (conversation.thinking_mode) {
    options.thinking_stage = ThinkingStage::kReasoningStart;
    const bool continues = !conversation.messages.empty() && conversation.messages.back().prefix;
    if (continues) {
      // A prefix continuation resumes wherever the prefix stopped: inside the reasoning unless the prefix
      // already carries content after it.
      const Message& last = conversation.messages.back();
      options.thinking_stage =
          last.content.empty() ? ThinkingStage::kReasoningContinuation : ThinkingStage::kContentContinuation;
    }
  }
  return options;
}

ResponseOptions ResponseOptionsFor(const ParsedRequest& request) {
  ResponseOptions options;
  options.model = request.model.empty() ? "deepseek" : request.model;
  options.thinking = request.conversation.thinking_mode;
  if (request.inference.include_usage) options.include_usage = true;
  if (request.responses_echo) options.responses_echo = *request.responses_echo;
  for (const ToolDefinition& tool : request.conversation.tools) {
    if (tool.custom) options.custom_tools.push_back(tool.name);
    if (!tool.ns.empty()) options.namespace_tools.push_back({tool.name, tool.ns, tool.local_name});
  }
  return options;
}

}  // namespace deepinfer::recipe
