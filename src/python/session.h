// What the Python package drives: one model on one engine, with requests going through the shared request
// pipeline (src/pipeline) exactly as `deepinfer serve` and `deepinfer generate` send them. The Python side
// writes each request as the protocol body the server would receive (Chat Completions for chat(), the
// legacy Completions API for generate()); this runs it and keeps, per request, the protocol's events and
// final body beside the engine's raw tokens (ids and logprobs, which no protocol body carries whole).
// Nothing here knows Python: the binding (module.cpp) only converts and releases the interpreter lock
// while it waits.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "pipeline/api.h"
#include "pipeline/prepare.h"
#include "pipeline/update_translator.h"
#include "recipe/stream_events.h"

namespace deepinfer::kvstore {
class KvStoreTier;
}
namespace deepinfer::tokenizer {
class Tokenizer;
}

namespace deepinfer::python {

struct SessionOptions {
  std::string model_dir;  // empty: the embedded default (pipeline/default_model.h)
  std::string precision = "exact";  // "exact" or "bf16"
  int64_t kv_cache_bytes = int64_t{1} << 30;
  int64_t max_num_seqs = 0;  // 0: derived from the KV budget, as the server does
  int64_t max_num_batched_tokens = 2048;
  std::string speculative_config;  // vLLM's JSON; empty: none
  std::string kv_store;            // a KV store directory under the prefix cache; empty: none
  std::string model_version;       // "v3.2", "v4", "v4.1"; empty: from config.json
  bool enable_prefix_caching = true;
};

// What one update brought to a streamed request.
struct JobChunk {
  std::vector<recipe::StreamEvent> events;
  std::vector<engine::SequenceDelta> deltas;  // raw engine deltas (token ids, logprobs)
  bool finished = false;
};

// One request in flight, or done. Guarded by the session's mutex once submitted.
struct Job {
  std::vector<int32_t> prompt;
  engine::RequestParams params;  // until submitted
  bool submitted = false;
  bool logprobs = false;  // the request asked for logprobs
  bool keep_chunks = false;  // streamed: every update is queued for the caller
  std::deque<JobChunk> chunks;
  std::vector<std::vector<engine::GeneratedToken>> outputs;  // every token of each output, by index
  std::vector<std::string> finish_reasons;                   // engine finish reasons, by index
  std::unique_ptr<pipeline::UpdateTranslator> translator;
  engine::RequestId id = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  uint64_t seed = 0;
  bool finished = false;
  std::string body;     // the protocol's non-streaming body (batch) once finished
  std::string failure;  // an engine error that finished an output
};

// A request the pipeline refused: its HTTP status and the one-line message the CLI prints.
struct Refusal {
  int status = 400;
  std::string message;
  std::string body;
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> Create(const SessionOptions& options);
  ~Session();

  // Parses, renders and tokenizes one request body of `api` (pipeline::Prepare) and, when
  // `stop_token_ids` are given, adds them to its stop tokens. A refusal is returned, nothing is queued.
  std::variant<std::shared_ptr<Job>, Refusal> Prepare(pipeline::Api api, const std::string& body,
                                                       const std::vector<int32_t>& stop_token_ids, bool stream);
  // Queues prepared jobs on the engine; a failure to queue aborts those already queued.
  Status Submit(const std::vector<std::shared_ptr<Job>>& jobs);
  // Waits up to `timeout_ms` for any update; true when every job given is finished.
  bool WaitAll(const std::vector<std::shared_ptr<Job>>& jobs, int timeout_ms);
  // Takes a streamed job's queued chunks, waiting up to `timeout_ms` for one.
  std::vector<JobChunk> TakeChunks(Job& job, int timeout_ms);
  void Abort(const std::vector<std::shared_ptr<Job>>& jobs);

  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  const std::string& model_dir() const { return model_dir_; }
  recipe::ModelVersion model_version() const { return prepare_.model_version; }
  const engine::EngineInfo& info() const { return engine_->info(); }
  engine::EngineStats stats() const { return engine_->Stats(); }
  // The name requests carry (the model directory's).
  const std::string& served_name() const { return prepare_.served_model_names.front(); }

 private:
  Session() = default;
  void OnUpdate(Job& job, const engine::RequestUpdate& update);

  std::string model_dir_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<kvstore::KvStoreTier> kv_tier_;  // outlives the engine, which calls it
  std::unique_ptr<engine::Engine> engine_;
  pipeline::PrepareOptions prepare_;
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace deepinfer::python
