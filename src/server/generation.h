// A generation request in flight between the engine and one HTTP exchange (internal to src/server).
// Start() runs on the exchange's strand; the engine's output thread calls Deliver(), which runs OnUpdate()
// there (under mu_, so never beside Start's set-up). The request's translator (pipeline/update_translator.h)
// turns updates into protocol events; they go out framed as server-sent events, or as one body at the end.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/engine.h"
#include "pipeline/update_translator.h"
#include "server/api_errors.h"
#include "server/service_internal.h"

namespace deepinfer::server {

class Generation : public std::enable_shared_from_this<Generation> {
 public:
  Generation(std::shared_ptr<ServiceExchange> exchange, engine::Engine* engine,
             std::unique_ptr<pipeline::UpdateTranslator> translator);
  ~Generation();

  // On the strand: queues one engine request per prompt (or answers the refusal) and ties a client's
  // disconnect to Abort. With several prompts (a legacy Completions batch) the outputs of prompt p reach
  // the translator as outputs p * n + i, and the response completes when every request has finished.
  void Start(std::vector<std::vector<int32_t>> prompts, engine::RequestParams params, bool draining);
  // Called with the response body once it completed without failure (streamed or not); before Start.
  void OnCompleted(std::function<void(const std::string& body)> completed) { completed_ = std::move(completed); }
  // Before Start: the stream carries what a router needs to resume it elsewhere (stream_resume.h).
  // Before Start: the answer waits for `flush` (the KV store's blocks made durable; a prefill-only request).
  void FlushBeforeAnswer(std::function<void()> flush) { flush_before_answer_ = std::move(flush); }
  // Before Start: a prefill-only answer names the output's first token (stream_resume.h's kFirstTokenHeader)
  // when it left the output open.
  void AnswerFirstToken() { answer_first_token_ = true; }
  // Before Start: the update that reports a handed-over first token (stream_resume.h's TakeFirstToken). A
  // finished one is the whole answer (Start queues nothing); otherwise it is handled right before the
  // engine's first update, and the engine's updates count the token out of their prompt.
  void ReportFirstToken(engine::RequestUpdate update) {
    first_token_taken_ = !update.finished;
    first_token_update_ = std::move(update);
  }
  void AnnounceResumeInfo(std::string id, int64_t created) {
    resume_info_ = true;
    response_id_ = std::move(id);
    created_ = created;
  }

 private:
  void OnUpdate(const engine::RequestUpdate& update, bool last);
  void Complete();
  void AbortEngine();
  // Stream bytes made from the updates being handled (their tokens' emission is the write's origin).
  void Write(std::string data) {
    if (!handoff_recorded_ && exchange_->stream_handoff && origin_nanos_ > 0) {
      exchange_->stream_handoff->Record(static_cast<double>(handling_nanos_ - origin_nanos_) * 1e-9);
      handoff_recorded_ = true;
    }
    exchange_->channel->Write(std::move(data), origin_nanos_);
  }

  std::shared_ptr<ServiceExchange> exchange_;
  engine::Engine* engine_;
  std::unique_ptr<pipeline::UpdateTranslator> translator_;
  std::function<void(const std::string& body)> completed_;
  std::function<void()> flush_before_answer_;

  void Deliver(engine::RequestUpdate update, int prompt);

  std::vector<engine::RequestId> ids_;  // one per prompt
  int outputs_per_prompt_ = 1;
  int unfinished_ = 0;  // requests whose final update has not come (under mu_)
  bool started_ = false;
  std::atomic<bool> aborted_{false};
  std::mutex mu_;  // Start's set-up and each update's handling
  bool done_ = false;
  std::shared_ptr<Generation> keep_alive_;
  int64_t origin_nanos_ = 0;       // when the step thread handed the update being handled over
  int64_t handling_nanos_ = 0;     // when its handling began on the output thread
  bool handoff_recorded_ = false;  // its hand-off time is in exchange_->stream_handoff
  bool resume_info_ = false;
  bool resume_announced_ = false;
  bool resume_finished_ = false;
  std::string response_id_;
  int64_t created_ = 0;
  bool answer_first_token_ = false;
  int32_t first_token_ = -1;       // the first token of output 0, once generated
  bool first_token_open_ = false;  // it did not end the output
  std::optional<engine::RequestUpdate> first_token_update_;
  bool first_token_taken_ = false;
};

}  // namespace deepinfer::server
