#include "router/chat_stream_tracker.h"

#include "server/stream_resume.h"

namespace deepinfer::router {

namespace {

using Json = nlohmann::json;

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

Json ParseComment(std::string_view event, std::string_view prefix) {
  return Json::parse(event.substr(prefix.size()), nullptr, /*allow_exceptions=*/false);
}

}  // namespace

std::optional<ChatStreamProtocol> ResumableChatPath(std::string_view path) {
  if (path == "/v1/chat/completions") return ChatStreamProtocol::kChatCompletions;
  if (path == "/v1/responses") return ChatStreamProtocol::kResponses;
  if (path == "/v1/messages") return ChatStreamProtocol::kMessages;
  return std::nullopt;
}

bool ChatStreamTracker::Take(std::string_view event, std::string* out) {
  if (StartsWith(event, server::kResumeComment)) {
    const Json j = ParseComment(event, server::kResumeComment);
    if (!j.is_object() || !j.contains("id") || !j["id"].is_string() || !j.contains("created") ||
        !j["created"].is_number_integer() || !j.contains("seed") || !j["seed"].is_number_unsigned())
      return false;
    // A continuation announces itself too, with the values it was given.
    if (!announced_) {
      id_ = j["id"].get<std::string>();
      created_ = j["created"].get<int64_t>();
      seed_ = j["seed"].get<uint64_t>();
      announced_ = true;
    }
    return true;
  }
  if (StartsWith(event, server::kTokenIdsComment)) {
    const Json j = ParseComment(event, server::kTokenIdsComment);
    if (!announced_ || !j.is_object() || !j.contains("ids") || !j["ids"].is_array() || !j.contains("finished") ||
        !j["finished"].is_boolean())
      return false;
    for (const Json& id : j["ids"]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) return false;
      ids_.push_back(id.get<int32_t>());
    }
    update_sizes_.push_back(j["ids"].size());
    finished_ = j["finished"].get<bool>();
    out->append(held_);
    held_.clear();
    return true;
  }
  if (StartsWith(event, ":")) return true;  // another comment: nothing for the client
  if (announced_) {
    Forward(event, &held_);
  } else {
    Forward(event, out);
  }
  return true;
}

void ChatStreamTracker::Flush(std::string* out) {
  out->append(held_);
  held_.clear();
}

void ChatStreamTracker::Interrupted() { held_.clear(); }

void ChatStreamTracker::Forward(std::string_view event, std::string* out) {
  const size_t size_before = out->size();
  out->append(event);
  if (protocol_ == ChatStreamProtocol::kResponses) {
    // The unit writes the number last in each event's object: `"sequence_number":N}`.
    static constexpr std::string_view kKey = "\"sequence_number\":";
    const size_t at = out->rfind(kKey);
    if (at != std::string::npos && at >= size_before) {
      const size_t from = at + kKey.size();
      size_t to = from;
      while (to < out->size() && (*out)[to] >= '0' && (*out)[to] <= '9') ++to;
      if (to > from) out->replace(from, to - from, std::to_string(next_sequence_number_++));
    }
  }
  out->append("\n\n");
}

std::string ChatStreamTracker::ResumeBody(const Json& original) const {
  Json body = original;
  body[std::string(server::kResumeField)] = {
      {"token_ids", ids_}, {"update_sizes", update_sizes_}, {"seed", seed_}, {"id", id_}, {"created", created_}};
  return body.dump();
}

std::string ChatStreamTracker::EndOfFinishedStream() const {
  return protocol_ == ChatStreamProtocol::kChatCompletions ? "data: [DONE]\n\n" : "";
}

std::string ChatStreamTracker::ErrorEvent(std::string_view message) {
  switch (protocol_) {
    case ChatStreamProtocol::kChatCompletions:
      return "data: " + Json{{"error", {{"message", message}, {"type", "api_error"}, {"code", "unit_failed"}}}}.dump() +
             "\n\n";
    case ChatStreamProtocol::kMessages:
      return "event: error\ndata: " +
             Json{{"type", "error"}, {"error", {{"type", "api_error"}, {"message", message}}}}.dump() + "\n\n";
    case ChatStreamProtocol::kResponses:
      return "event: error\ndata: " +
             Json{{"type", "error"},
                  {"code", "unit_failed"},
                  {"message", message},
                  {"param", nullptr},
                  {"sequence_number", next_sequence_number_++}}
                 .dump() +
             "\n\n";
  }
  return {};
}

}  // namespace deepinfer::router
