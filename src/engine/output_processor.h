// The output side of the engine: threads that turn the scheduler's per-step events into RequestUpdates —
// token bytes, the control flag, detokenized text with stop strings matched across tokens — and call the
// requests' callbacks, so neither detokenization nor a consumer's callback ever runs on the step thread.
//
// Threads. Post is called by the step thread only. Each shard's thread owns the OutputRequests whose
// events it delivers (a request always goes to the same shard, its id modulo the shard count), so a
// request's updates stay in order while different requests' updates of one step go out in parallel.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "engine/engine.h"
#include "sampling/sampler.h"
#include "sampling/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::engine {

// An output's detokenization state (its shard's thread only).
struct OutputSequence {
  std::unique_ptr<tokenizer::StreamingDetokenizer> detokenizer;
  std::unique_ptr<sampling::StopStringMatcher> stops;
  bool finished = false;
};

// A request as its shard's thread sees it. Made by AddRequest; then only that thread touches it.
struct OutputRequest {
  RequestId id = 0;
  UpdateCallback callback;
  bool text = false;  // detokenize with a tokenizer
  int64_t prompt_tokens = 0;
  int64_t hit_tokens = 0;
  uint64_t seed = 0;
  std::vector<OutputSequence> seqs;
  int finished = 0;
  bool done = false;
};

// What the step thread reports for one output of a request.
struct SeqEvent {
  int index = 0;
  std::vector<sampling::SampledToken> tokens;
  std::optional<FinishReason> finish;
  int32_t stop_token = -1;
};

struct OutputEvent {
  std::shared_ptr<OutputRequest> request;
  int64_t hit_tokens = 0;
  std::vector<SeqEvent> seqs;
  std::vector<sampling::SampledToken> prompt_logprobs;  // RequestUpdate::prompt_logprobs, once
  Status status;
  int64_t posted_nanos = 0;  // when Post() queued it
};

class OutputProcessor {
 public:
  // Called on an output thread when a stop string finished output `index` of request `id`.
  using StopCallback = std::function<void(std::vector<std::pair<RequestId, int>> stopped)>;
  // `tokenizer` (may be null) must outlive the processor.
  OutputProcessor(const tokenizer::Tokenizer* tokenizer, int threads, int64_t thread_slice_us, StopCallback on_stop);
  ~OutputProcessor();  // Stop()

  // Queues a batch of events (one lock and one wake-up per shard) and empties `events`.
  void Post(std::vector<OutputEvent>& events);
  // Delivers what is queued, then joins the threads. Idempotent.
  void Stop();

 private:
  struct Shard {
    Mutex mu;
    CondVar cv;
    std::deque<OutputEvent> queue GUARDED_BY(mu);
    bool stop GUARDED_BY(mu) = false;
    std::thread thread;
  };
  void Loop(Shard* shard);
  void Deliver(OutputEvent& event);

  const tokenizer::Tokenizer* tokenizer_;
  int64_t thread_slice_us_;
  StopCallback on_stop_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<std::vector<OutputEvent>> sorted_;  // Post's per-shard scratch (step thread)
};

}  // namespace deepinfer::engine
