// A Chat Completions, Responses or Messages stream as the router relays it, so that it can be continued on
// another unit when its unit fails (server/stream_resume.h has the unit's side). The router asks the unit
// for resume information; a unit that can resume the request announces it with a comment before its first
// event and closes each update's events with a comment of their token ids. The tracker holds each group's
// events until its closing comment arrives and then forwards them whole, so what the client has received
// is always the text of exactly the ids it knows; a group cut short by a failure is dropped, and the
// continuation writes it again. The comments never reach the client.
//
// A continuation is another request to its unit: the tracker gives its body (the original one with the
// ids, the seed, the response id and time) and renumbers Responses' `sequence_number`s, which count the
// events of one unit's stream, so the client sees one unbroken sequence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepinfer::router {

enum class ChatStreamProtocol { kChatCompletions, kResponses, kMessages };

// The protocol of a POST path whose streams can be resumed; nullopt for others.
std::optional<ChatStreamProtocol> ResumableChatPath(std::string_view path);

class ChatStreamTracker {
 public:
  explicit ChatStreamTracker(ChatStreamProtocol protocol) : protocol_(protocol) {}

  // One complete event from the unit, without its blank-line terminator. What goes to the client now is
  // appended to `out`, each event with its terminator. False: a resume comment did not parse (the unit
  // answers garbage), and the stream should be treated as failed.
  bool Take(std::string_view event, std::string* out);
  // The unit's stream ended normally: the events it wrote after its last group (`[DONE]`) go out.
  void Flush(std::string* out);
  // The unit failed: the group it was writing is dropped.
  void Interrupted();

  // The unit announced resume information (the stream can be continued).
  bool resumable() const { return announced_; }
  // The last group forwarded finished the response: nothing is left to generate.
  bool finished() const { return finished_; }
  size_t generated() const { return ids_.size(); }
  size_t held_bytes() const { return held_.size(); }

  // The continuation's body: `original` (the client's request, a JSON object) with `deepinfer_resume`.
  std::string ResumeBody(const nlohmann::json& original) const;
  // What closes the client's stream when the unit failed after the response finished (Chat Completions'
  // `[DONE]`, which the unit writes after its last group).
  std::string EndOfFinishedStream() const;
  // The protocol's error event, for a stream no unit could continue.
  std::string ErrorEvent(std::string_view message);

 private:
  void Forward(std::string_view event, std::string* out);

  ChatStreamProtocol protocol_;
  bool announced_ = false;
  bool finished_ = false;
  std::string id_;
  int64_t created_ = 0;
  uint64_t seed_ = 0;
  std::vector<int32_t> ids_;
  std::vector<size_t> update_sizes_;  // ids per group, as the unit's updates fed its codec
  std::string held_;  // the current group's events, terminated
  int64_t next_sequence_number_ = 0;
};

}  // namespace deepinfer::router
