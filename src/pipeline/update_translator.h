// Engine updates to protocol events, per request: what `deepinfer serve` streams or answers, what
// `deepinfer generate` prints, and what a language binding hands its caller. Chat protocols (Chat
// Completions, Responses, Messages) go through the codec's CompletionStream, one per output; the legacy
// Completions API is written here (the codec has no such protocol).
//
// Feed every update of the request, in order, to Translate() (one at a time: the engine's output thread
// does). After the final update, StreamEnd() gives the events that close a stream and Body() the
// non-streaming response.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "pipeline/api.h"
#include "recipe/request.h"
#include "recipe/stream_events.h"

namespace deepinfer::pipeline {

// What the response says about itself, beyond what the request says.
struct ResponseContext {
  std::string id;     // the response id (NewResponseId)
  std::string model;  // the model name responses carry; empty: the request's
  int64_t created = 0;  // Unix seconds
  recipe::ModelVersion model_version = recipe::ModelVersion::kV4;  // how the model's output is parsed
  // Special added tokens write no text (engine::RequestParams::skip_special_tokens); they still count.
  bool skip_special_tokens = true;
  // Responses: the stored response this one continues (echoed in `previous_response_id`); empty: none.
  std::string previous_response_id;
};

// A response id in the protocol's style: `prefix` and 24 random letters and digits.
std::string NewResponseId(std::string_view prefix);
// The id prefix of each API's responses: "chatcmpl-", "resp_", "msg_", "cmpl-".
std::string_view ResponseIdPrefix(Api api);
int64_t UnixSeconds();

// What one update produced.
struct TranslatedUpdate {
  std::vector<recipe::StreamEvent> events;  // to stream, in order (also taken into the final body)
  // Every output is complete although the engine did not finish it (a stop sequence ended it in the
  // codec): abort the request in the engine.
  bool stop_engine = false;
};

class UpdateTranslator {
 public:
  virtual ~UpdateTranslator() = default;
  virtual TranslatedUpdate Translate(const engine::RequestUpdate& update) = 0;
  // An update an interrupted run of this request already streamed (server/stream_resume.h), replayed so
  // that the translator's state is that run's; its events went out then and are not written again.
  virtual void Replay(const engine::RequestUpdate& update) { Translate(update); }
  // After the final update: the events that close the stream (`[DONE]` where the protocol has it).
  virtual std::vector<recipe::StreamEvent> StreamEnd() = 0;
  // After the final update: the non-streaming response body.
  virtual std::string Body() = 0;
  // Whether the request asked for an event stream.
  bool stream() const { return stream_; }
  // Not ok when an output finished with an engine error: why.
  const Status& failure() const { return failure_; }

 protected:
  void NoteFailure(const engine::RequestUpdate& update, const engine::SequenceDelta& delta);
  bool stream_ = false;
  Status failure_;
};

// A chat-protocol request's updates through the codec. `request` is the parsed request (its n outputs,
// logprobs, stream, and what shapes the output parser).
std::unique_ptr<UpdateTranslator> NewChatTranslator(recipe::Protocol protocol, recipe::ParsedRequest request,
                                                    ResponseContext context);

// What shapes a legacy Completions response.
struct CompletionsShape {
  // One per prompt (a list of prompts is a batch): echoed before the first text of each of its choices when
  // `echo`. Choice `prompt * n + i` is the prompt's output i: the translator is fed the updates of every
  // prompt's request with their outputs' indices so numbered.
  std::vector<std::string> prompt_texts = {""};
  bool echo = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int logprobs = -1;           // -1: none; else the alternatives per token
  int n = 1;
  // vLLM's `return_token_ids`: each streamed choice carries the ids of its tokens whose text it is the first
  // to carry (`token_ids`), and its first one the prompt's ids (`prompt_token_ids`), so that a proxy can
  // continue an interrupted stream from exactly what its client received.
  bool return_token_ids = false;
  std::vector<std::vector<int32_t>> prompt_ids;  // per prompt, when return_token_ids
};
std::unique_ptr<UpdateTranslator> NewCompletionsTranslator(CompletionsShape shape, ResponseContext context);

}  // namespace deepinfer::pipeline
