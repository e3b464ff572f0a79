#include "recipe/response_chat.h"

#include <random>
#include <utility>

#include "core/py_json.h"

namespace deepinfer::recipe {
namespace {

void AppendString(std::string& out, std::string_view text) { PyJsonAppendString(out, text, false); }

}  // namespace

std::string_view ChatFinishReason(BackendFinish finish, bool stopped_by_sequence, int tool_call_count) {
  if (stopped_by_sequence) return "stop";
  switch (finish) {
    case BackendFinish::kLength: return "length";
    case BackendFinish::kContentFilter: return "content_filter";
    case BackendFinish::kStop: break;
  }
  return tool_call_count > 0 ? "tool_calls" : "stop";
}

std::string RandomToolCallId(int index) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = "call_";
  id += static_cast<char>('0' + (index / 10) % 10);
  id += static_cast<char>('0' + index % 10);
  id += '_';
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng() % kAlphabet.size()];
  return id;
}

std::string RandomResponseId(Protocol protocol) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = protocol == Protocol::kMessages ? "msg_" : protocol == Protocol::kResponses ? "resp_" : "chatcmpl-";
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng() % kAlphabet.size()];
  return id;
}

std::string ChatUsageJson(const UsageCounts& usage) {
  const int64_t miss = usage.prompt_tokens - usage.prompt_cache_hit_tokens;
  return "{\"prompt_tokens\":" + std::to_string(usage.prompt_tokens) +
         ",\"completion_tokens\":" + std::to_string(usage.completion_tokens) +
         ",\"total_tokens\":" + std::to_string(usage.prompt_tokens + usage.completion_tokens) +
         ",\"prompt_tokens_details\":{\"cached_tokens\":" + std::to_string(usage.prompt_cache_hit_tokens) +
         "}" +
         (usage.reasoning_tokens
              ? ",\"completion_tokens_details\":{\"reasoning_tokens\":" + std::to_string(*usage.reasoning_tokens) + "}"
              : std::string()) +
         ",\"prompt_cache_hit_tokens\":" + std::to_string(usage.prompt_cache_hit_tokens) +
         ",\"prompt_cache_miss_tokens\":" + std::to_string(miss) + "}";
}

ChatCompletionStream::ChatCompletionStream(ResponseOptions options) : options_(std::move(options)) {
  if (!options_.tool_call_id) options_.tool_call_id = RandomToolCallId;
  envelope_ = "{\"id\":";
  AppendString(envelope_, options_.id);
  envelope_ += ",\"object\":\"chat.completion.chunk\",\"created\":" + std::to_string(options_.created) + ",\"model\":";
  AppendString(envelope_, options_.model);
  envelope_ += ",\"system_fingerprint\":null,\"choices\":[{\"index\":" + std::to_string(options_.choice_index) +
               ",\"delta\":";
  // `,"usage":null` on every chunk but the last when the request asked for usage chunks.
  usage_tail_ = options_.include_usage.value_or(false) ? ",\"usage\":null}" : "}";
}

std::string ChatCompletionStream::RoleChunk() const {
  std::string out = Envelope();
  out += options_.thinking ? "{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"\"}"
                           : "{\"role\":\"assistant\",\"content\":\"\"}";
  out += ",\"logprobs\":null,\"finish_reason\":null}]" + UsageTail();
  return out;
}

void ChatCompletionStream::AppendChunks(const std::vector<OutputDelta>& deltas, std::vector<std::string>* chunks,
                                        const std::vector<std::string>* logprobs) {
  for (size_t d = 0; d < deltas.size(); ++d) {
    const OutputDelta& delta = deltas[d];
    const std::string* entries = logprobs && d < logprobs->size() && !(*logprobs)[d].empty() ? &(*logprobs)[d] : nullptr;
    std::string out = Envelope();
    switch (delta.kind) {
      case OutputDelta::Kind::kReasoning:
        reasoning_ += delta.text;
        out += "{\"content\":null,\"reasoning_content\":";
        AppendString(out, delta.text);
        out += "}";
        break;
      case OutputDelta::Kind::kContent:
        content_ += delta.text;
        out += "{\"content\":";
        AppendString(out, delta.text);
        out += options_.thinking ? ",\"reasoning_content\":null}" : "}";
        break;
      case OutputDelta::Kind::kToolCallBegin: {
        ToolCall call{options_.tool_call_id(delta.tool_index), delta.text, ""};
        out += "{\"tool_calls\":[{\"index\":" + std::to_string(delta.tool_index) + ",\"id\":";
        AppendString(out, call.id);
        out += ",\"type\":\"function\",\"function\":{\"name\":";
        AppendString(out, call.name);
        out += ",\"arguments\":\"\"}}]}";
        tool_calls_.push_back(std::move(call));
        break;
      }
      case OutputDelta::Kind::kToolArguments:
        if (delta.tool_index >= 0 && delta.tool_index < static_cast<int>(tool_calls_.size())) {
          tool_calls_[delta.tool_index].arguments += delta.text;
        }
        out += "{\"tool_calls\":[{\"index\":" + std::to_string(delta.tool_index) +
               ",\"function\":{\"arguments\":";
        AppendString(out, delta.text);
        out += "}}]}";
        break;
    }
    const bool reasoning = delta.kind == OutputDelta::Kind::kReasoning;
    if (entries && (reasoning || delta.kind == OutputDelta::Kind::kContent)) {
      std::string& all = reasoning ? reasoning_logprobs_ : content_logprobs_;
      if (!all.empty()) all += ',';
      all += *entries;
      out += reasoning ? ",\"logprobs\":{\"reasoning_content\":[" : ",\"logprobs\":{\"content\":[";
      out += *entries;
      out += "]},\"finish_reason\":null}]";
    } else {
      out += ",\"logprobs\":null,\"finish_reason\":null}]";
    }
    out += UsageTail();
    chunks->push_back(std::move(out));
  }
}

std::string ChatCompletionStream::FinalChunk(std::string_view finish_reason, const UsageCounts& usage) const {
  std::string out = Envelope();
  out += options_.thinking ? "{\"content\":\"\",\"reasoning_content\":null}" : "{\"content\":\"\"}";
  out += ",\"logprobs\":null,\"finish_reason\":";
  AppendString(out, finish_reason);
  out += "}],\"usage\":" + ChatUsageJson(usage) + "}";
  return out;
}

std::string ChatCompletionStream::Response(std::string_view finish_reason, const UsageCounts& usage) const {
  std::string out = "{\"id\":";
  AppendString(out, options_.id);
  out += ",\"object\":\"chat.completion\",\"created\":" + std::to_string(options_.created) + ",\"model\":";
  AppendString(out, options_.model);
  out += ",\"choices\":[{\"index\":" + std::to_string(options_.choice_index) +
         ",\"message\":{\"role\":\"assistant\",\"content\":";
  AppendString(out, content_);
  if (options_.thinking) {
    out += ",\"reasoning_content\":";
    AppendString(out, reasoning_);
  }
  if (!tool_calls_.empty()) {
    out += ",\"tool_calls\":[";
    for (size_t i = 0; i < tool_calls_.size(); ++i) {
      if (i > 0) out += ",";
      out += "{\"index\":" + std::to_string(i) + ",\"id\":";
      AppendString(out, tool_calls_[i].id);
      out += ",\"type\":\"function\",\"function\":{\"name\":";
      AppendString(out, tool_calls_[i].name);
      out += ",\"arguments\":";
      AppendString(out, tool_calls_[i].arguments);
      out += "}}";
    }
    out += "]";
  }
  out += "},\"logprobs\":";
  if (content_logprobs_.empty() && reasoning_logprobs_.empty()) {
    out += "null";
  } else {
    out += '{';
    if (!content_logprobs_.empty()) out += "\"content\":[" + content_logprobs_ + "]";
    if (!reasoning_logprobs_.empty()) {
      if (!content_logprobs_.empty()) out += ',';
      out += "\"reasoning_content\":[" + reasoning_logprobs_ + "]";
    }
    out += '}';
  }
  out += ",\"finish_reason\":";
  AppendString(out, finish_reason);
  out += "}],\"usage\":" + ChatUsageJson(usage) + ",\"system_fingerprint\":null}";
  return out;
}

}  // namespace deepinfer::recipe
