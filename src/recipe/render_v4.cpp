// DeepSeek V4 and V4.1 prompt rendering, matching deepseek-recipe 0.2.0 (DeepseekV4Encoding,
// DeepseekV41Encoding). The two differ in the DSML tag names, the reasoning-effort text, the <｜System｜>
// token and where system messages go; everything else is shared.
#include <algorithm>
#include <string>
#include <vector>

#include "recipe/render_internal.h"

namespace deepinfer::recipe {
namespace {

constexpr std::string_view kToolsPrompt =
    "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke tools "
    "by writing a \"<{D}{calls}>\" block like the following:\n\n"
    "<{D}{calls}>\n"
    "<{D}{invoke} name=\"$TOOL_NAME\">\n"
    "<{D}{parameter} name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</{D}{parameter}>\n"
    "...\n"
    "</{D}{invoke}>\n"
    "<{D}{invoke} name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</{D}{invoke}>\n"
    "</{D}{calls}>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, "
    "booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by {TS}), you MUST output your complete reasoning inside "
    "{TS}...{TE} BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after {TE} with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";
constexpr std::string_view kToolsPromptEnd =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

// deepseek-recipe-encoding 0.2.0 src/v4/dsv4.rs: REASONING_EFFORT_HIGH / REASONING_EFFORT_MAX.
constexpr std::string_view kEffortHighV4 =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root "
    "cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial "
    "scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";
constexpr std::string_view kEffortMaxV4 =
    "Reasoning Effort: Beyond maximum \xE2\x80\x94 exhaustive, relentless, and uncompromising.\n"
    "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: exhaustively "
    "decompose the problem into its most fundamental components, trace every causal chain to its root, and "
    "resolve the underlying cause rather than any surface symptom.\n"
    "Do not stop reasoning until you have independently verified the solution from multiple angles and are "
    "certain that no assumption remains unchecked and no error remains undiscovered.\n\n";

std::string_view EffortTextV4(const Conversation& c) {
  if (!c.thinking_mode || !c.reasoning_effort) return {};
  switch (*c.reasoning_effort) {
    case ReasoningEffort::kLow: return {};
    case ReasoningEffort::kHigh:
    case ReasoningEffort::kXHigh: return kEffortHighV4;
    case ReasoningEffort::kMax: return kEffortMaxV4;
  }
  return {};
}

std::string EffortTextV41(const Conversation& c) {
  int budget = 75;
  if (c.reasoning_effort) {
    switch (*c.reasoning_effort) {
      case ReasoningEffort::kLow: budget = 50; break;
      case ReasoningEffort::kHigh:
      case ReasoningEffort::kXHigh: budget = 75; break;
      case ReasoningEffort::kMax: budget = 100; break;
    }
  }
  return "Reasoning Effort: " + std::to_string(budget) +
         " (range 1-100, the higher the value, the more thorough the reasoning)\n\n";
}

// A user turn after merging: parts joined by "\n\n", each with its own image placeholders (where they
// start in `text`).
struct Part {
  std::string text;
  std::vector<size_t> images;
};

Part MessagePart(const Message& m, size_t shift = 0, std::string text = {}) {
  Part part{text.empty() ? m.content : std::move(text), {}};
  for (const ImageSource& image : m.images) part.images.push_back(image.offset + shift);
  return part;
}

struct Turn {
  Role role = Role::kUser;
  std::vector<Part> parts;  // system / user / latest_reminder
  const Message* assistant = nullptr;
  bool is_tool_merge = false;  // a user turn that holds tool results
  std::vector<ImageSource> images;
  bool has_text_block = false;  // (tool-result turns) the user text that follows them is in
  std::optional<MessageTask> task;  // of the turn's last message
};

// deepseek-recipe renders a message's tool calls, and the results answering them, in the byte order of
// their ids (not the order the request lists them in).
// V4.1 keeps the request's order.
std::vector<const ToolCall*> CallsInPromptOrder(const Message& m, bool v41) {
  std::vector<const ToolCall*> calls;
  for (const ToolCall& call : m.tool_calls) calls.push_back(&call);
  if (!v41) std::stable_sort(calls.begin(), calls.end(), [](const ToolCall* a, const ToolCall* b) { return a->id < b->id; });
  return calls;
}

Part ToolResultPart(const Message& m) {
  static constexpr std::string_view kOpen = "<tool_result>";
  return MessagePart(m, kOpen.size(), std::string(kOpen) + m.content + "</tool_result>");
}

// System hoisting (V4), tool-result merging and ordering, and merging of adjacent user messages.
Result<std::vector<Turn>> BuildTurns(const Conversation& c, bool v41) {
  std::vector<Turn> turns;
  Turn hoisted_system{Role::kSystem, {}, nullptr, false, {}};
  bool has_system = false;
  for (size_t i = 0; i < c.messages.size(); ++i) {
    const Message& m = c.messages[i];
    switch (m.role) {
      case Role::kSystem:
        if (!v41) {
          if (!m.content.empty() || !m.images.empty()) hoisted_system.parts.push_back(MessagePart(m));
          hoisted_system.images.insert(hoisted_system.images.end(), m.images.begin(), m.images.end());
          has_system = true;
        } else {
          turns.push_back({Role::kSystem, {MessagePart(m)}, nullptr, false, m.images});
          turns.back().task = m.task;
        }
        break;
      case Role::kAssistant:
        turns.push_back({Role::kAssistant, {}, &m, false, {}});
        break;
      case Role::kLatestReminder:
        turns.push_back({Role::kLatestReminder, {{m.content, {}}}, nullptr, false, {}});
        break;
      case Role::kUser:
        if (!turns.empty() && turns.back().role == Role::kUser) {
          Turn& prev = turns.back();
          prev.task = m.task;
          const Part part = MessagePart(m);
          if (v41) {
            prev.parts.push_back(part);
          } else if (prev.is_tool_merge && !prev.has_text_block) {
            // V4: the user text after tool results is one more block of that turn, even when empty.
            prev.parts.push_back(part);
            prev.has_text_block = true;
          } else {
            // V4 merges adjacent user texts, leaving out empty ones.
            Part& last = prev.parts.back();
            const size_t shift = last.text.empty() ? 0 : last.text.size() + 2;
            if (last.text.empty()) {
              last.text = part.text;
            } else if (!part.text.empty()) {
              last.text += "\n\n" + part.text;
            }
            for (size_t at : part.images) last.images.push_back(at + shift);
          }
          prev.images.insert(prev.images.end(), m.images.begin(), m.images.end());
        } else {
          turns.push_back({Role::kUser, {MessagePart(m)}, nullptr, false, m.images});
          turns.back().task = m.task;
        }
        break;
      case Role::kTool: {
        // Collect the run of tool messages and order it by the preceding assistant's tool-call ids.
        size_t j = i;
        while (j < c.messages.size() && c.messages[j].role == Role::kTool) ++j;
        const Message* assistant = nullptr;
        for (size_t k = i; k-- > 0;) {
          if (c.messages[k].role == Role::kAssistant) {
            assistant = &c.messages[k];
            break;
          }
        }
        std::vector<const Message*> results;
        for (size_t k = i; k < j; ++k) results.push_back(&c.messages[k]);
        if (assistant) {
          const std::vector<const ToolCall*> calls = CallsInPromptOrder(*assistant, v41);
          auto rank = [&](const Message* result) {
            for (size_t t = 0; t < calls.size(); ++t) {
              if (result->tool_call_id && calls[t]->id == *result->tool_call_id) return t;
            }
            return calls.size();
          };
          std::stable_sort(results.begin(), results.end(),
                           [&](const Message* a, const Message* b) { return rank(a) < rank(b); });
        }
        Turn turn{Role::kUser, {}, nullptr, true, {}};
        for (const Message* r : results) {
          turn.parts.push_back(ToolResultPart(*r));
          turn.images.insert(turn.images.end(), r->images.begin(), r->images.end());
        }
        if (!turns.empty() && turns.back().role == Role::kUser) {
          Turn& prev = turns.back();
          prev.is_tool_merge = true;
          prev.parts.insert(prev.parts.end(), turn.parts.begin(), turn.parts.end());
          prev.images.insert(prev.images.end(), turn.images.begin(), turn.images.end());
        } else {
          turns.push_back(std::move(turn));
        }
        i = j - 1;
        break;
      }
    }
  }
  const bool needs_system = !c.tools.empty() || c.response_format != ResponseFormat::kText;
  if (!v41) {
    if (has_system || needs_system) turns.insert(turns.begin(), std::move(hoisted_system));
  } else if (needs_system && (turns.empty() || turns.front().role != Role::kSystem)) {
    turns.insert(turns.begin(), Turn{Role::kSystem, {Part{}}, nullptr, false, {}});
  }
  return turns;
}

void AppendParts(PromptBuilder& b, const Turn& turn) {
  for (size_t i = 0; i < turn.parts.size(); ++i) {
    if (i) b.Text("\n\n");
    b.TextWithImages(turn.parts[i].text, turn.parts[i].images);
  }
}

Status AppendToolCalls(PromptBuilder& b, const Message& m, const DsmlTagNames& tags, bool v41) {
  if (m.tool_calls.empty()) return Status::Ok();
  AppendTemplate(b, "\n\n<{D}{calls}>\n", tags);
  const std::vector<const ToolCall*> calls = CallsInPromptOrder(m, v41);
  for (size_t t = 0; t < calls.size(); ++t) {
    const ToolCall& call = *calls[t];
    if (t) b.Text("\n");
    AppendTemplate(b, "<{D}{invoke} name=\"", tags);
    b.Text(call.name);
    b.Text("\">\n");
    DI_ASSIGN_OR_RETURN(nlohmann::ordered_json args, ParseToolArguments(call.arguments, /*serde_numbers=*/true));
    size_t index = 0;
    for (auto it = args.begin(); it != args.end(); ++it, ++index) {
      if (v41 && index) b.Text("\n");
      AppendTemplate(b, "<{D}{parameter} name=\"", tags);
      b.Text(it.key());
      const bool is_string = it->is_string();
      b.Text(is_string ? "\" string=\"true\">" : "\" string=\"false\">");
      if (is_string) b.Text(it->get_ref<const std::string&>());
      else b.Text(RecipeJsonDumps(*it, v41));
      AppendTemplate(b, "</{D}{parameter}>", tags);
      if (!v41) b.Text("\n");
    }
    AppendTemplate(b, v41 ? "\n</{D}{invoke}>" : "</{D}{invoke}>", tags);
  }
  AppendTemplate(b, "\n</{D}{calls}>", tags);
  return Status::Ok();
}

}  // namespace

Result<RenderedPrompt> RenderPromptV4(const Conversation& c, bool v41) {
  const DsmlTagNames tags = v41 ? DsmlTagNames{" calls", " invoke", " parameter"}
                                : DsmlTagNames{"tool_calls", "invoke", "parameter"};
  DI_ASSIGN_OR_RETURN(std::vector<Turn> turns, BuildTurns(c, v41));
  const bool keep_all_reasoning = !c.tools.empty();

  PromptBuilder b;
  b.Special(SpecialToken::kBos);
  bool system_token_open = false;
  if (v41) {
    if (c.thinking_mode) {
      b.Special(SpecialToken::kSystem);
      b.Text(EffortTextV41(c));
      system_token_open = true;
    }
  } else {
    b.Text(EffortTextV4(c));
  }

  auto header = [&](bool think) {
    b.Special(SpecialToken::kAssistant);
    b.Special(think ? SpecialToken::kThinkingStart : SpecialToken::kThinkingEnd);
  };
  // encoding_dsv4.py: after a message with a task, the answer opens with the task token instead of the
  // generation header (`action`: the header, then <｜action｜>), and carries no reasoning.
  auto task_of_turn_before = [&](size_t i) -> std::optional<MessageTask> {
    return i > 0 && turns[i - 1].role != Role::kAssistant ? turns[i - 1].task : std::nullopt;
  };
  auto task_header = [&](MessageTask task) {
    if (task == MessageTask::kAction) {
      header(c.thinking_mode);
      b.Special(SpecialToken::kAction);
      return;
    }
    b.Special(static_cast<SpecialToken>(static_cast<int>(SpecialToken::kAction) + static_cast<int>(task)));
  };

  bool ends_with_prefix = false;
  for (size_t i = 0; i < turns.size(); ++i) {
    const Turn& turn = turns[i];
    for (const ImageSource& image : turn.images) b.prompt().images.push_back(image);
    switch (turn.role) {
      case Role::kSystem:
        if (v41 && !(i == 0 && system_token_open)) b.Special(SpecialToken::kSystem);
        AppendParts(b, turn);
        if (i == 0) {
          if (!c.tools.empty()) {
            b.Text("\n\n");
            AppendTemplate(b, kToolsPrompt, tags);
            for (size_t t = 0; t < c.tools.size(); ++t) {
              if (t) b.Text("\n");
              b.Text(ToolSchemaLine(c.tools[t], v41));
            }
            b.Text(kToolsPromptEnd);
          }
          b.Text(ResponseFormatText(c, v41));
        }
        break;
      case Role::kUser:
        b.Special(SpecialToken::kUser);
        AppendParts(b, turn);
        break;
      case Role::kLatestReminder:
        b.Special(SpecialToken::kLatestReminder);
        AppendParts(b, turn);
        break;
      case Role::kAssistant: {
        const Message& m = *turn.assistant;
        const std::optional<MessageTask> task = task_of_turn_before(i);
        const bool with_reasoning = !task && c.thinking_mode && (keep_all_reasoning || m.prefix);
        if (task) task_header(*task);
        else header(with_reasoning);
        if (with_reasoning) {
          b.TextWithGroundingTokens(m.reasoning_content.value_or(""));
          // A prefix with no answer text yet continues its reasoning, so the reasoning stays open.
          const bool continues_reasoning = m.prefix && m.content.empty() && m.tool_calls.empty();
          if (!continues_reasoning) b.Special(SpecialToken::kThinkingEnd);
        }
        b.TextWithGroundingTokens(m.content);
        DI_RETURN_IF_ERROR(AppendToolCalls(b, m, tags, v41));
        if (m.prefix) ends_with_prefix = i + 1 == turns.size();
        else b.Special(SpecialToken::kEos);
        break;
      }
      case Role::kTool:
        return Status::Internal("tool turn survived merging");
    }
  }
  if (!ends_with_prefix) {
    if (const std::optional<MessageTask> task = task_of_turn_before(turns.size())) {
      task_header(*task);
      return b.Finish();
    }
    header(c.thinking_mode);
    if (c.tool_choice == ToolChoice::kRequired && !c.tools.empty()) AppendTemplate(b, "\n\n<{D}{calls}>\n", tags);
  }
  return b.Finish();
}

}  // namespace deepinfer::recipe
