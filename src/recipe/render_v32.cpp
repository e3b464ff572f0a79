// DeepSeek V3.2 prompt rendering (encoding/encoding_dsv32.py of deepseek-ai/DeepSeek-V3.2; spec §3).
// V3.2 keeps a tool role (results in <function_results>, in request order), closes every user turn with
// the generation header, and has no "tools keep reasoning" exception. deepinfer's convention for what the
// reference takes per message: the tools and the response format ride on the first system message (an
// empty one is inserted when the conversation does not start with one).
#include <vector>

#include "recipe/render_internal.h"

namespace deepinfer::recipe {
namespace {

constexpr std::string_view kToolsPromptV32 =
    "## Tools\n\nYou have access to a set of tools you can use to answer the user's question.\n"
    "You can invoke functions by writing a \"<{D}function_calls>\" block like the following as part of your "
    "reply to the user:\n"
    "<{D}function_calls>\n"
    "<{D}invoke name=\"$FUNCTION_NAME\">\n"
    "<{D}parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</{D}parameter>\n"
    "...\n"
    "</{D}invoke>\n"
    "<{D}invoke name=\"$FUNCTION_NAME2\">\n"
    "...\n"
    "</{D}invoke>\n"
    "</{D}function_calls>\n\n"
    "String and scalar parameters should be specified as is without any escaping or quotes, while lists and "
    "objects should use JSON format. The \"string\" attribute should be set to \"true\" for string type "
    "parameters and \"false\" for other types (numbers, booleans, arrays, objects).\n\n"
    "If the thinking_mode is enabled, then after function results you should strongly consider outputting a "
    "thinking block. Here is an example:\n\n"
    "<{D}function_calls>\n"
    "...\n"
    "</{D}function_calls>\n\n"
    "<function_results>\n"
    "...\n"
    "</function_results>\n\n"
    "{TS}...thinking about results{TE}\n\n"
    "Here are the functions available in JSONSchema format:\n"
    "<functions>\n";
constexpr std::string_view kToolsPromptEndV32 = "\n</functions>\n";

constexpr DsmlTagNames kTags{"function_calls", "invoke", "parameter"};

void AppendResponseFormat(PromptBuilder& b, const Conversation& c) {
  nlohmann::ordered_json schema;
  if (c.response_format == ResponseFormat::kJsonSchema) schema = c.response_schema;
  else if (c.response_format == ResponseFormat::kJsonObject) schema = {{"type", "json_object"}};
  else return;
  b.Text("\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n");
  b.Text(RecipeJsonDumps(schema, /*python_floats=*/true));
}

Status AppendToolCallsV32(PromptBuilder& b, const Message& m) {
  if (m.tool_calls.empty()) return Status::Ok();
  AppendTemplate(b, "\n\n<{D}{calls}>\n", kTags);
  for (size_t t = 0; t < m.tool_calls.size(); ++t) {
    const ToolCall& call = m.tool_calls[t];
    if (t) b.Text("\n");
    AppendTemplate(b, "<{D}invoke name=\"", kTags);
    b.Text(call.name);
    b.Text("\">\n");
    DI_ASSIGN_OR_RETURN(nlohmann::ordered_json args, ParseToolArguments(call.arguments, /*serde_numbers=*/false));
    size_t index = 0;
    for (auto it = args.begin(); it != args.end(); ++it, ++index) {
      if (index) b.Text("\n");
      AppendTemplate(b, "<{D}parameter name=\"", kTags);
      b.Text(it.key());
      if (it->is_string()) {
        b.Text("\" string=\"true\">");
        b.Text(it->get_ref<const std::string&>());
      } else {
        b.Text("\" string=\"false\">");
        b.Text(RecipeJsonDumps(*it, /*python_floats=*/true));
      }
      AppendTemplate(b, "</{D}parameter>", kTags);
    }
    AppendTemplate(b, "\n</{D}invoke>", kTags);
  }
  AppendTemplate(b, "\n</{D}{calls}>", kTags);
  return Status::Ok();
}

}  // namespace

Result<RenderedPrompt> RenderPromptV32(const Conversation& c) {
  std::vector<Message> messages;
  for (const Message& m : c.messages) {
    if (m.role == Role::kLatestReminder) return Status::InvalidArgument("V3.2 has no latest_reminder role");
    if (m.prefix) return Status::InvalidArgument("V3.2 has no assistant prefix continuation");
    messages.push_back(m);
  }
  const bool needs_system = !c.tools.empty() || c.response_format == ResponseFormat::kJsonObject ||
                            c.response_format == ResponseFormat::kJsonSchema;
  if (needs_system && (messages.empty() || messages.front().role != Role::kSystem)) {
    Message system;
    system.role = Role::kSystem;
    messages.insert(messages.begin(), std::move(system));
  }
  const bool thinking = c.thinking_mode;
  ptrdiff_t last_user = -1;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role == Role::kUser) last_user = static_cast<ptrdiff_t>(i);
  }
  if (thinking) {  // drop_thinking: reasoning before the last user message is not shown to the model
    for (size_t i = 0; i < messages.size(); ++i) {
      if (messages[i].role == Role::kAssistant && static_cast<ptrdiff_t>(i) < last_user) {
        messages[i].reasoning_content.reset();
      }
    }
  }

  PromptBuilder b;
  b.Special(SpecialToken::kBos);
  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    const auto index = static_cast<ptrdiff_t>(i);
    switch (m.role) {
      case Role::kSystem:
        b.Text(m.content);
        if (i == 0 && needs_system) {
          if (!c.tools.empty()) {
            b.Text("\n\n");
            AppendTemplate(b, kToolsPromptV32, kTags);
            for (size_t t = 0; t < c.tools.size(); ++t) {
              if (t) b.Text("\n");
              b.Text(ToolSchemaLine(c.tools[t], /*python_floats=*/true));
            }
            b.Text(kToolsPromptEndV32);
          }
          AppendResponseFormat(b, c);
        }
        break;
      case Role::kUser:
        b.Special(SpecialToken::kUser);
        b.Text(m.content);
        b.Special(SpecialToken::kAssistant);
        b.Special(index == last_user && thinking ? SpecialToken::kThinkingStart : SpecialToken::kThinkingEnd);
        break;
      case Role::kTool: {
        ptrdiff_t prev = index - 1;
        while (prev >= 0 && messages[prev].role == Role::kTool) --prev;
        if (prev < 0 || messages[prev].role != Role::kAssistant) {
          return Status::InvalidArgument("V3.2: a tool message must follow an assistant message with tool calls");
        }
        const auto order = static_cast<size_t>(index - prev);
        const size_t calls = messages[prev].tool_calls.size();
        if (calls < order) return Status::InvalidArgument("V3.2: more tool results than tool calls");
        if (order == 1) b.Text("\n\n<function_results>");
        b.Text("\n<result>");
        b.Text(m.content);
        b.Text("</result>");
        if (order == calls) {
          b.Text("\n</function_results>\n\n");
          b.Special(index >= last_user && thinking ? SpecialToken::kThinkingStart : SpecialToken::kThinkingEnd);
        }
        break;
      }
      case Role::kAssistant: {
        if (thinking && index > last_user) {
          const bool has_reasoning = m.reasoning_content && !m.reasoning_content->empty();
          if (!has_reasoning && m.tool_calls.empty()) {
            return Status::InvalidArgument(
                "V3.2 thinking mode: an assistant message after the last user message needs reasoning_content or "
                "tool_calls");
          }
          b.Text(m.reasoning_content.value_or(""));
          b.Special(SpecialToken::kThinkingEnd);
        }
        b.Text(m.content);
        DI_RETURN_IF_ERROR(AppendToolCallsV32(b, m));
        b.Special(SpecialToken::kEos);
        break;
      }
      case Role::kLatestReminder:
        return Status::InvalidArgument("V3.2 has no latest_reminder role");
    }
  }
  return b.Finish();
}

}  // namespace deepinfer::recipe
