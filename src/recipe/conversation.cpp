#include "recipe/conversation.h"

namespace deepinfer::recipe {

namespace {
constexpr std::pair<MessageTask, std::string_view> kTaskNames[] = {
    {MessageTask::kAction, "action"}, {MessageTask::kQuery, "query"},   {MessageTask::kAuthority, "authority"},
    {MessageTask::kDomain, "domain"}, {MessageTask::kTitle, "title"}, {MessageTask::kReadUrl, "read_url"},
};
}  // namespace

std::string_view MessageTaskName(MessageTask task) {
  for (const auto& [value, name] : kTaskNames) {
    if (value == task) return name;
  }
  return "?";
}

std::optional<MessageTask> ParseMessageTask(std::string_view name) {
  for (const auto& [value, spelling] : kTaskNames) {
    if (spelling == name) return value;
  }
  return std::nullopt;
}

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kSystem: return "system";
    case Role::kUser: return "user";
    case Role::kAssistant: return "assistant";
    case Role::kTool: return "tool";
    case Role::kLatestReminder: return "latest_reminder";
  }
  return "?";
}

std::string_view ReasoningEffortName(ReasoningEffort effort) {
  switch (effort) {
    case ReasoningEffort::kLow: return "low";
    case ReasoningEffort::kHigh: return "high";
    case ReasoningEffort::kXHigh: return "xhigh";
    case ReasoningEffort::kMax: return "max";
  }
  return "?";
}

std::string_view ToolChoiceName(ToolChoice choice) {
  switch (choice) {
    case ToolChoice::kAuto: return "auto";
    case ToolChoice::kNone: return "none";
    case ToolChoice::kRequired: return "required";
  }
  return "?";
}

std::string_view ResponseFormatName(ResponseFormat format) {
  switch (format) {
    case ResponseFormat::kText: return "text";
    case ResponseFormat::kJsonObject: return "json_object";
    case ResponseFormat::kJsonSchema: return "json_schema";
    case ResponseFormat::kRegex: return "regex";
  }
  return "?";
}

}  // namespace deepinfer::recipe
