#include "recipe/conversation.h"

namespace deepinfer::recipe {

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
