#include "recipe/response_responses.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/py_json.h"
#include "core/utf8.h"
#include "recipe/response_chat.h"

namespace deepinfer::recipe {
namespace {

std::string Quoted(std::string_view text) { return PyJsonString(text, false); }

std::string Prefix(std::string_view type) { return "{\"type\":\"" + std::string(type) + "\""; }

}  // namespace

ResponsesStream::ResponsesStream(ResponseOptions options) : options_(std::move(options)) {
  if (!options_.tool_call_id) options_.tool_call_id = RandomToolCallId;
}

std::string ResponsesStream::Sequence() { return ",\"sequence_number\":" + std::to_string(sequence_++); }

void ResponsesStream::Push(std::string_view name, std::string json, std::vector<ResponsesEvent>* events) {
  events->push_back({std::string(name), std::move(json)});
}

std::string ResponsesStream::ResponseObject(std::string_view status, int64_t completed_at,
                                            std::string_view incomplete_details, const std::string& usage) const {
  const ResponsesEcho& echo = options_.responses_echo;
  std::string out = "{\"id\":" + Quoted(options_.id) + ",\"object\":\"response\",\"created_at\":" +
                    std::to_string(options_.created) + ",\"status\":\"" + std::string(status) +
                    "\",\"background\":false,\"completed_at\":" +
                    (completed_at < 0 ? std::string("null") : std::to_string(completed_at)) +
                    ",\"content_filters\":null,\"error\":null,\"frequency_penalty\":0.0,\"incomplete_details\":" +
                    std::string(incomplete_details) + ",\"instructions\":" + echo.instructions +
                    ",\"max_output_tokens\":" + echo.max_output_tokens + ",\"max_tool_calls\":" + echo.max_tool_calls +
                    ",\"model\":" + Quoted(options_.model) + ",\"moderation\":null,\"output\":[";
  if (completed_at >= 0) {  // the in-progress objects list no output
    for (size_t i = 0; i < items_.size(); ++i) {
      if (i > 0) out += ',';
      out += ItemJson(items_[i]);
    }
  }
  out += "],\"parallel_tool_calls\":" + echo.parallel_tool_calls +
         ",\"presence_penalty\":0.0,\"previous_response_id\":" + echo.previous_response_id + ",\"prompt_cache_key\":null,"
         "\"prompt_cache_retention\":null,\"reasoning\":" + echo.reasoning +
         ",\"safety_identifier\":null,\"service_tier\":\"default\",\"store\":false,\"temperature\":" +
         echo.temperature + ",\"text\":" + echo.text + ",\"tool_choice\":" + echo.tool_choice +
         ",\"tools\":" + echo.tools + ",\"top_logprobs\":" + echo.top_logprobs + ",\"top_p\":" + echo.top_p +
         ",\"truncation\":\"disabled\",\"usage\":" + usage + ",\"user\":" + echo.user +
         ",\"metadata\":" + echo.metadata + "}";
  return out;
}

std::string ResponsesStream::PartJson(const Item& item, bool with_text) const {
  const std::string text = with_text ? Quoted(item.text) : std::string("\"\"");
  if (item.type == ItemType::kReasoning) return "{\"type\":\"reasoning_text\",\"text\":" + text + "}";
  return "{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[" + (with_text ? item.logprobs : "") +
         "],\"text\":" + text + "}";
}

std::string ResponsesStream::ItemJson(const Item& item) const {
  const bool done = item.status != "in_progress";
  switch (item.type) {
    case ItemType::kReasoning:
      return "{\"type\":\"reasoning\",\"id\":" + Quoted(item.id) + ",\"status\":\"" + item.status +
             "\",\"content\":[" + (done ? PartJson(item, true) : "") + "],\"summary\":[],\"encrypted_content\":" +
             Quoted(options_.id + "-" + item.id.substr(item.id.rfind('_') + 1)) + "}";
    case ItemType::kMessage:
      return "{\"type\":\"message\",\"id\":" + Quoted(item.id) + ",\"status\":\"" + item.status +
             "\",\"role\":\"assistant\",\"phase\":\"" + item.phase + "\",\"content\":[" +
             (done ? PartJson(item, true) : "") + "]}";
    case ItemType::kCustomToolCall:
      return "{\"type\":\"custom_tool_call\",\"id\":" + Quoted(item.id) + ",\"status\":\"" + item.status +
             "\",\"call_id\":" + Quoted(item.call_id) + ",\"name\":" + Quoted(item.name) +
             ",\"input\":" + Quoted(done ? item.text : "") + "}";
    case ItemType::kFunctionCall: {
      // A namespace member's call names its namespace apart, as the request declared it.
      std::string name = ",\"name\":" + Quoted(item.name);
      for (const NamespacedTool& tool : options_.namespace_tools) {
        if (tool.name == item.name) {
          name = ",\"name\":" + Quoted(tool.local_name) + ",\"namespace\":" + Quoted(tool.ns);
          break;
        }
      }
      return "{\"type\":\"function_call\",\"id\":" + Quoted(item.id) + ",\"status\":\"" + item.status +
             "\",\"call_id\":" + Quoted(item.call_id) + name + ",\"arguments\":" + Quoted(done ? item.text : "") + "}";
    }
  }
  return "{}";
}

void ResponsesStream::Start(std::vector<ResponsesEvent>* events) {
  const std::string object = ResponseObject("in_progress", -1, "null", "null");
  Push("response.created", Prefix("response.created") + ",\"response\":" + object + Sequence() + "}", events);
  Push("response.in_progress", Prefix("response.in_progress") + ",\"response\":" + object + Sequence() + "}",
       events);
}

void ResponsesStream::OpenItem(ItemType type, std::vector<ResponsesEvent>* events, std::string call_id,
                               std::string name) {
  const size_t index = items_.size();
  const char* prefix = type == ItemType::kReasoning        ? "rs_"
                       : type == ItemType::kMessage        ? "msg_"
                       : type == ItemType::kCustomToolCall ? "ctc_"
                                                           : "fc_";
  Item item{type, prefix + options_.id + "_" + std::to_string(index), "", std::move(call_id), std::move(name)};
  const std::string output_index = ",\"output_index\":" + std::to_string(index);
  Push("response.output_item.added",
       Prefix("response.output_item.added") + ",\"item\":" + ItemJson(item) + output_index + Sequence() + "}", events);
  if (type == ItemType::kReasoning || type == ItemType::kMessage) {
    Push("response.content_part.added",
         Prefix("response.content_part.added") + ",\"content_index\":0,\"item_id\":" + Quoted(item.id) +
             output_index + ",\"part\":" + PartJson(item, false) + Sequence() + "}",
         events);
  }
  items_.push_back(std::move(item));
  item_open_ = true;
}

void ResponsesStream::CloseItem(std::string_view status, std::vector<ResponsesEvent>* events) {
  if (!item_open_) return;
  Item& item = items_.back();
  const std::string output_index = ",\"output_index\":" + std::to_string(items_.size() - 1);
  const std::string item_id = ",\"item_id\":" + Quoted(item.id);
  switch (item.type) {
    case ItemType::kReasoning:
      Push("response.reasoning_text.done",
           Prefix("response.reasoning_text.done") + ",\"content_index\":0" + item_id + output_index + Sequence() +
               ",\"text\":" + Quoted(item.text) + "}",
           events);
      break;
    case ItemType::kMessage:
      Push("response.output_text.done",
           Prefix("response.output_text.done") + ",\"content_index\":0" + item_id + ",\"logprobs\":[" +
               item.logprobs + "]" +
               output_index + Sequence() + ",\"text\":" + Quoted(item.text) + "}",
           events);
      break;
    case ItemType::kFunctionCall:
      Push("response.function_call_arguments.done",
           Prefix("response.function_call_arguments.done") + ",\"arguments\":" + Quoted(item.text) + item_id +
               output_index + Sequence() + "}",
           events);
      break;
    case ItemType::kCustomToolCall:
      if (item.custom_input == CustomInput::kHolding && !item.held.empty()) PushCustomDelta(item.held, events);
      Push("response.custom_tool_call_input.done",
           Prefix("response.custom_tool_call_input.done") + ",\"input\":" + Quoted(item.text) + item_id +
               output_index + Sequence() + "}",
           events);
      break;
  }
  if (item.type == ItemType::kReasoning || item.type == ItemType::kMessage) {
    Push("response.content_part.done",
         Prefix("response.content_part.done") + ",\"content_index\":0" + item_id + output_index +
             ",\"part\":" + PartJson(item, true) + Sequence() + "}",
         events);
  }
  item.status = std::string(status);
  Push("response.output_item.done",
       Prefix("response.output_item.done") + ",\"item\":" + ItemJson(item) + output_index + Sequence() + "}", events);
  item_open_ = false;
}

void ResponsesStream::AppendEvents(const std::vector<OutputDelta>& deltas, std::vector<ResponsesEvent>* events,
                                   const std::vector<std::string>* logprobs) {
  for (size_t d = 0; d < deltas.size(); ++d) {
    const OutputDelta& delta = deltas[d];
    const std::string no_entries;
    const std::string& entries = logprobs && d < logprobs->size() ? (*logprobs)[d] : no_entries;
    const bool open_of = [&](ItemType t) {
      return item_open_ && (items_.back().type == t || (t == ItemType::kFunctionCall &&
                                                        items_.back().type == ItemType::kCustomToolCall));
    }(delta.kind == OutputDelta::Kind::kReasoning ? ItemType::kReasoning
      : delta.kind == OutputDelta::Kind::kContent ? ItemType::kMessage
                                                  : ItemType::kFunctionCall);
    switch (delta.kind) {
      case OutputDelta::Kind::kReasoning:
      case OutputDelta::Kind::kContent: {
        const bool reasoning = delta.kind == OutputDelta::Kind::kReasoning;
        if (!open_of) {
          CloseItem("completed", events);
          OpenItem(reasoning ? ItemType::kReasoning : ItemType::kMessage, events);
        }
        Item& item = items_.back();
        item.text += delta.text;
        if (!reasoning && !entries.empty()) {
          if (!item.logprobs.empty()) item.logprobs += ',';
          item.logprobs += entries;
        }
        const std::string type = reasoning ? "response.reasoning_text.delta" : "response.output_text.delta";
        Push(type,
             Prefix(type) + ",\"content_index\":0,\"delta\":" + Quoted(delta.text) + ",\"item_id\":" +
                 Quoted(item.id) + (reasoning ? "" : ",\"logprobs\":[" + entries + "]") + ",\"output_index\":" +
                 std::to_string(items_.size() - 1) + Sequence() + "}",
             events);
        break;
      }
      case OutputDelta::Kind::kToolCallBegin:
        // A message followed by tool calls was commentary, not the final answer.
        if (item_open_ && items_.back().type == ItemType::kMessage) items_.back().phase = "commentary";
        CloseItem("completed", events);
        OpenItem(std::find(options_.custom_tools.begin(), options_.custom_tools.end(), delta.text) !=
                         options_.custom_tools.end()
                     ? ItemType::kCustomToolCall
                     : ItemType::kFunctionCall,
                 events, options_.tool_call_id(delta.tool_index), delta.text);
        break;
      case OutputDelta::Kind::kToolArguments: {
        if (!open_of) break;  // cannot happen: a call begins before its arguments
        Item& item = items_.back();
        if (item.type == ItemType::kCustomToolCall) {
          AppendCustomInput(delta.text, events);
          break;
        }
        item.text += delta.text;
        Push("response.function_call_arguments.delta",
             Prefix("response.function_call_arguments.delta") + ",\"delta\":" + Quoted(delta.text) +
                 ",\"item_id\":" + Quoted(item.id) + ",\"output_index\":" + std::to_string(items_.size() - 1) +
                 Sequence() + "}",
             events);
        break;
      }
    }
  }
}

void ResponsesStream::PushCustomDelta(const std::string& text, std::vector<ResponsesEvent>* events) {
  Item& item = items_.back();
  item.text += text;
  Push("response.custom_tool_call_input.delta",
       Prefix("response.custom_tool_call_input.delta") + ",\"delta\":" + Quoted(text) + ",\"item_id\":" +
           Quoted(item.id) + ",\"output_index\":" + std::to_string(items_.size() - 1) + Sequence() + "}",
       events);
}

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// \uXXXX at text[i] (i at the backslash): its code unit, or -1 when malformed.
int CodeUnitAt(std::string_view text, size_t i) {
  if (i + 6 > text.size() || text[i] != '\\' || text[i + 1] != 'u') return -1;
  int unit = 0;
  for (size_t k = i + 2; k < i + 6; ++k) {
    const int h = HexValue(text[k]);
    if (h < 0) return -1;
    unit = unit * 16 + h;
  }
  return unit;
}

// Decodes the body of a JSON string from `text` into `out` up to its closing quote (returns true once
// seen) or up to what cannot be decoded yet (an escape or a character cut off at the end: left in `rest`).
bool DecodeStringBody(std::string_view text, std::string* out, std::string* rest) {
  const size_t limit = text.size() - utf8::IncompleteTailLength(text);
  size_t i = 0;
  while (i < limit) {
    const char c = text[i];
    if (c == '"') return true;
    if (c != '\\') {
      *out += c;
      ++i;
      continue;
    }
    if (i + 1 >= text.size()) break;
    const char e = text[i + 1];
    if (e == 'u') {
      if (i + 6 > text.size()) break;
      int unit = CodeUnitAt(text, i);
      size_t used = 6;
      if (unit < 0) {  // malformed: the text as it is
        out->append(text.substr(i, 2));
        i += 2;
        continue;
      }
      if (unit >= 0xD800 && unit <= 0xDBFF) {
        if (i + 12 > text.size()) break;  // the low half may still come
        const int low = CodeUnitAt(text, i + 6);
        if (low >= 0xDC00 && low <= 0xDFFF) {
          unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
          used = 12;
        } else {
          unit = 0xFFFD;
        }
      } else if (unit >= 0xDC00 && unit <= 0xDFFF) {
        unit = 0xFFFD;
      }
      utf8::Append(*out, static_cast<char32_t>(unit));
      i += used;
      continue;
    }
    switch (e) {
      case 'n': *out += '\n'; break;
      case 't': *out += '\t'; break;
      case 'r': *out += '\r'; break;
      case 'b': *out += '\b'; break;
      case 'f': *out += '\f'; break;
      case '/': *out += '/'; break;
      case '\\': *out += '\\'; break;
      case '"': *out += '"'; break;
      default: out->append(text.substr(i, 2)); break;
    }
    i += 2;
  }
  rest->assign(text.substr(i));
  return false;
}

}  // namespace

void ResponsesStream::AppendCustomInput(const std::string& fragment, std::vector<ResponsesEvent>* events) {
  static constexpr std::string_view kRawPrefix = "{\"input\": \"";
  Item& item = items_.back();
  switch (item.custom_input) {
    case CustomInput::kHolding: {
      item.held += fragment;
      if (item.held.size() >= kRawPrefix.size() && item.held.compare(0, kRawPrefix.size(), kRawPrefix) == 0) {
        item.custom_input = CustomInput::kRawValue;
        std::string value = item.held.substr(kRawPrefix.size());
        item.held.clear();
        AppendCustomInput(value, events);
      } else if (kRawPrefix.compare(0, std::min(item.held.size(), kRawPrefix.size()), item.held, 0,
                                    std::min(item.held.size(), kRawPrefix.size())) != 0) {
        item.custom_input = CustomInput::kVerbatim;
        std::string text = std::move(item.held);
        item.held.clear();
        PushCustomDelta(text, events);
      }
      return;
    }
    case CustomInput::kRawValue: {
      std::string decoded, rest;
      const bool closed = DecodeStringBody(item.held + fragment, &decoded, &rest);
      item.held = closed ? std::string() : std::move(rest);
      if (closed) item.custom_input = CustomInput::kRawDone;
      if (!decoded.empty()) PushCustomDelta(decoded, events);
      return;
    }
    case CustomInput::kRawDone:
      return;
    case CustomInput::kVerbatim:
      PushCustomDelta(fragment, events);
      return;
  }
}

void ResponsesStream::Finish(std::optional<BackendFinish> finish, const UsageCounts& usage,
                             std::vector<ResponsesEvent>* events) {
  std::string incomplete = "null";
  if (finish == BackendFinish::kLength) incomplete = "{\"reason\":\"max_output_tokens\"}";
  if (finish == BackendFinish::kContentFilter) incomplete = "{\"reason\":\"content_filter\"}";
  const bool complete = incomplete == "null";
  CloseItem(complete ? "completed" : "incomplete", events);
  int64_t completed_at = options_.completed_at;
  if (completed_at < 0) {
    completed_at = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  }
  const std::string usage_json =
      "{\"input_tokens\":" + std::to_string(usage.prompt_tokens) + ",\"input_tokens_details\":{\"cached_tokens\":" +
      std::to_string(usage.prompt_cache_hit_tokens) + "},\"output_tokens\":" +
      std::to_string(usage.completion_tokens) + ",\"output_tokens_details\":{\"reasoning_tokens\":" +
      std::to_string(usage.reasoning_tokens.value_or(0)) + "},"
      "\"total_tokens\":" + std::to_string(usage.prompt_tokens + usage.completion_tokens) + "}";
  final_response_ = ResponseObject(complete ? "completed" : "incomplete", completed_at, incomplete, usage_json);
  const std::string type = complete ? "response.completed" : "response.incomplete";
  Push(type, Prefix(type) + ",\"response\":" + final_response_ + Sequence() + "}", events);
}

}  // namespace deepinfer::recipe
