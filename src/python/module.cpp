// The nanobind module `deepinfer._deepinfer`: the session (session.h) with the interpreter lock released
// while the engine works, the tokenizer, and the codec's render and parse. The package's Python side
// (python/deepinfer) gives them vLLM's shapes. Errors become Python exceptions carrying the CLI's messages:
// a refused request or a bad argument ValueError, an engine or I/O failure RuntimeError; Ctrl-C aborts the
// requests in flight and raises KeyboardInterrupt.
#include <Python.h>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/default_model.h"
#include "python/session.h"
#include "recipe/prompt_tokens.h"
#include "recipe/protocol.h"
#include "recipe/render.h"
#include "recipe/request.h"
#include "recipe/stream_events.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace nb = nanobind;

namespace deepinfer::python {
namespace {

[[noreturn]] void Raise(const Status& status) {
  if (status.code() == StatusCode::kInvalidArgument || status.code() == StatusCode::kNotFound) {
    throw nb::value_error(status.message().c_str());
  }
  throw std::runtime_error(status.message());
}

template <typename T>
T Unwrap(Result<T> result) {
  if (!result.ok()) Raise(result.status());
  return std::move(result).value();
}

pipeline::Api ParseApi(const std::string& name) {
  if (name == "chat") return pipeline::Api::kChatCompletions;
  if (name == "responses") return pipeline::Api::kResponses;
  if (name == "messages") return pipeline::Api::kMessages;
  if (name == "completions") return pipeline::Api::kCompletions;
  throw nb::value_error(("unknown API '" + name + "' (chat, responses, messages, completions)").c_str());
}

recipe::Protocol ParseProtocolName(const std::string& name) {
  std::optional<recipe::Protocol> protocol = recipe::ParseProtocol(name);
  if (!protocol) throw nb::value_error(("unknown protocol '" + name + "' (chat, responses, messages)").c_str());
  return *protocol;
}

recipe::ModelVersion ParseVersionName(const std::string& name) { return Unwrap(recipe::ParseModelVersion(name)); }

std::string_view BuiltinTokenizer(recipe::ModelVersion version) {
  switch (version) {
    case recipe::ModelVersion::kV32: return "deepseek-v3";
    case recipe::ModelVersion::kV4: return "deepseek-v4";
    case recipe::ModelVersion::kV41: return "deepseek-v4.1";
  }
  return "deepseek-v4";
}

// A refused request: ValueError for the client's mistakes (4xx), RuntimeError for the rest.
[[noreturn]] void RaiseRefusal(const Refusal& refusal) {
  if (refusal.status < 500) throw nb::value_error(refusal.message.c_str());
  throw std::runtime_error(refusal.message);
}

nb::list TokensToPython(const std::vector<engine::GeneratedToken>& tokens, bool logprobs) {
  nb::list out;
  for (const engine::GeneratedToken& t : tokens) {
    if (!logprobs) {
      out.append(t.id);
      continue;
    }
    nb::list top;
    for (const engine::TokenAlternative& a : t.top_logprobs)
      top.append(nb::make_tuple(a.id, a.logprob, nb::bytes(a.bytes.data(), a.bytes.size())));
    out.append(nb::make_tuple(t.id, t.logprob, nb::bytes(t.bytes.data(), t.bytes.size()), top));
  }
  return out;
}

nb::list EventsToPython(const std::vector<recipe::StreamEvent>& events) {
  nb::list out;
  for (const recipe::StreamEvent& e : events) out.append(nb::make_tuple(e.name, e.json));
  return out;
}

// Waits for the jobs without the interpreter lock, looking for Ctrl-C between waits: on a signal the
// jobs are aborted (the engine frees their blocks) and its Python exception is raised.
void WaitInterruptibly(Session& session, const std::vector<std::shared_ptr<Job>>& jobs) {
  for (;;) {
    bool done = false;
    {
      nb::gil_scoped_release unlocked;
      done = session.WaitAll(jobs, 50);
    }
    if (done) return;
    if (PyErr_CheckSignals() != 0) {
      session.Abort(jobs);
      {
        nb::gil_scoped_release unlocked;
        while (!session.WaitAll(jobs, 50)) {
        }
      }
      throw nb::python_error();
    }
  }
}

nb::dict JobResult(const Job& job) {
  nb::dict r;
  nb::list prompt;
  for (int32_t id : job.prompt) prompt.append(id);
  r["prompt_token_ids"] = prompt;
  r["prompt_tokens"] = job.prompt_tokens;
  r["cached_tokens"] = job.cached_tokens;
  r["seed"] = job.seed;
  r["body"] = job.body;
  r["error"] = job.failure;
  nb::list outputs;
  for (size_t i = 0; i < job.outputs.size(); ++i) {
    nb::dict o;
    o["tokens"] = TokensToPython(job.outputs[i], job.logprobs);
    o["finish_reason"] = job.finish_reasons[i];
    outputs.append(o);
  }
  r["outputs"] = outputs;
  return r;
}

// A streamed request: next() gives each update's chunk, None after the last.
class Stream {
 public:
  Stream(std::shared_ptr<Session> session, std::shared_ptr<Job> job) : session_(std::move(session)), job_(std::move(job)) {}
  ~Stream() {
    if (!done_) session_->Abort({job_});
  }

  std::optional<nb::dict> Next() {
    while (pending_.empty()) {
      if (done_) return std::nullopt;
      {
        nb::gil_scoped_release unlocked;
        std::vector<JobChunk> chunks = session_->TakeChunks(*job_, 50);
        for (JobChunk& c : chunks) pending_.push_back(std::move(c));
      }
      if (pending_.empty() && PyErr_CheckSignals() != 0) {
        Abort();
        throw nb::python_error();
      }
    }
    JobChunk chunk = std::move(pending_.front());
    pending_.pop_front();
    if (chunk.finished) done_ = true;
    nb::dict d;
    d["events"] = EventsToPython(chunk.events);
    nb::list deltas;
    for (const engine::SequenceDelta& delta : chunk.deltas) {
      nb::dict one;
      one["index"] = delta.index;
      one["tokens"] = TokensToPython(delta.tokens, job_->logprobs);
      one["finish_reason"] = delta.finish ? nb::object(nb::str(std::string(engine::FinishReasonName(*delta.finish)).c_str()))
                                          : nb::none();
      deltas.append(one);
    }
    d["deltas"] = deltas;
    d["finished"] = chunk.finished;
    if (chunk.finished) {
      d["prompt_token_ids"] = JobResult(*job_)["prompt_token_ids"];
      d["cached_tokens"] = job_->cached_tokens;
      d["error"] = job_->failure;
    }
    return d;
  }

  // Aborts the request and drains it (its final update arrives).
  void Abort() {
    if (done_) return;
    session_->Abort({job_});
    nb::gil_scoped_release unlocked;
    while (!session_->WaitAll({job_}, 50)) {
    }
    done_ = true;
  }

 private:
  std::shared_ptr<Session> session_;
  std::shared_ptr<Job> job_;
  std::deque<JobChunk> pending_;
  bool done_ = false;
};

// `stop_token_ids`: one list per body.
std::vector<std::shared_ptr<Job>> PrepareAll(Session& session, pipeline::Api api, const std::vector<std::string>& bodies,
                                             const std::vector<std::vector<int32_t>>& stop_token_ids, bool stream) {
  if (stop_token_ids.size() != bodies.size()) throw nb::value_error("one stop_token_ids list per request");
  std::vector<std::shared_ptr<Job>> jobs;
  jobs.reserve(bodies.size());
  for (size_t i = 0; i < bodies.size(); ++i) {
    auto prepared = session.Prepare(api, bodies[i], stop_token_ids[i], stream);
    if (auto* refusal = std::get_if<Refusal>(&prepared)) RaiseRefusal(*refusal);
    jobs.push_back(std::get<std::shared_ptr<Job>>(std::move(prepared)));
  }
  return jobs;
}

nb::list Run(Session& session, const std::string& api_name, const std::vector<std::string>& bodies,
             const std::vector<std::vector<int32_t>>& stop_token_ids) {
  const pipeline::Api api = ParseApi(api_name);
  std::vector<std::shared_ptr<Job>> jobs = PrepareAll(session, api, bodies, stop_token_ids, false);
  if (Status s = session.Submit(jobs); !s.ok()) Raise(s);
  WaitInterruptibly(session, jobs);
  nb::list out;
  for (const auto& job : jobs) out.append(JobResult(*job));
  return out;
}

std::unique_ptr<Stream> StartStream(std::shared_ptr<Session> session, const std::string& api_name,
                                    const std::string& body, const std::vector<int32_t>& stop_token_ids) {
  const pipeline::Api api = ParseApi(api_name);
  std::vector<std::shared_ptr<Job>> jobs = PrepareAll(*session, api, {body}, {stop_token_ids}, true);
  if (Status s = session->Submit(jobs); !s.ok()) Raise(s);
  return std::make_unique<Stream>(std::move(session), jobs[0]);
}

std::shared_ptr<Session> CreateSession(std::optional<std::string> model_dir, const std::string& precision,
                                       int64_t kv_cache_bytes, int64_t max_num_seqs, int64_t max_num_batched_tokens,
                                       std::optional<std::string> speculative_config, std::optional<std::string> kv_store,
                                       std::optional<std::string> model_version, bool enable_prefix_caching) {
  SessionOptions o;
  o.model_dir = model_dir.value_or("");
  o.precision = precision;
  o.kv_cache_bytes = kv_cache_bytes;
  o.max_num_seqs = max_num_seqs;
  o.max_num_batched_tokens = max_num_batched_tokens;
  o.speculative_config = speculative_config.value_or("");
  o.kv_store = kv_store.value_or("");
  o.model_version = model_version.value_or("");
  o.enable_prefix_caching = enable_prefix_caching;
  if (kv_cache_bytes <= 0) throw nb::value_error("kv_cache_bytes must be positive");
  if (max_num_seqs < 0) throw nb::value_error("max_num_seqs must be non-negative (0: derived)");
  if (max_num_batched_tokens <= 0) throw nb::value_error("max_num_batched_tokens must be positive");
  Result<std::unique_ptr<Session>> session = [&] {
    nb::gil_scoped_release unlocked;
    return Session::Create(o);
  }();
  return std::shared_ptr<Session>(Unwrap(std::move(session)).release());
}

// The tokenizer alone: a builtin name (deepseek-v3, deepseek-v4, deepseek-v4.1), a tokenizer.json or a
// model directory.
class PyTokenizer {
 public:
  explicit PyTokenizer(const std::string& source) : tokenizer_(Unwrap(tokenizer::LoadTokenizer(source))) {}
  // Special-token spellings in `text` are plain text unless `allow_special`: untrusted text cannot forge
  // a control token.
  std::vector<int32_t> Encode(const std::string& text, bool allow_special) const {
    return allow_special ? tokenizer_.EncodeWithAddedTokens(text) : tokenizer_.EncodeText(text);
  }
  std::string Decode(const std::vector<int64_t>& ids, bool skip_special) const {
    std::vector<int32_t> checked;
    checked.reserve(ids.size());
    for (int64_t id : ids) {
      if (id < 0 || id >= static_cast<int64_t>(tokenizer_.vocab_size()))
        throw nb::value_error(("token id " + std::to_string(id) + " is outside the vocabulary (" +
                               std::to_string(tokenizer_.vocab_size()) + ")")
                                  .c_str());
      checked.push_back(static_cast<int32_t>(id));
    }
    return tokenizer_.Decode(checked, skip_special);
  }
  const tokenizer::Tokenizer& get() const { return tokenizer_; }

 private:
  tokenizer::Tokenizer tokenizer_;
};

// A request body to its DeepSeek prompt and ids (`deepinfer render --ids`).
std::pair<std::string, std::vector<int32_t>> Render(const std::string& body, const std::string& protocol_name,
                                                    const std::string& version_name, const PyTokenizer* tokenizer) {
  const recipe::Protocol protocol = ParseProtocolName(protocol_name);
  const recipe::ModelVersion version = ParseVersionName(version_name);
  recipe::RequestOptions options;
  options.model_version = version;
  recipe::ParseOutcome parsed = recipe::ParseRequest(protocol, body, options);
  if (!parsed.ok()) throw nb::value_error(parsed.error.message.c_str());
  recipe::RenderedPrompt prompt = Unwrap(recipe::RenderPrompt(parsed.request->conversation, version));
  std::optional<PyTokenizer> own;
  if (!tokenizer) tokenizer = &own.emplace(std::string(BuiltinTokenizer(version)));
  std::vector<int32_t> ids = Unwrap(recipe::TokenizePrompt(prompt, tokenizer->get()));
  return {prompt.text, std::move(ids)};
}

// A model's output text to the protocol's response body and stream events (`deepinfer parse`).
std::pair<std::string, std::vector<std::pair<std::string, std::string>>> Parse(const std::string& text,
                                                                               const std::string& protocol_name,
                                                                               const std::string& version_name,
                                                                               bool thinking,
                                                                               const std::string& finish) {
  const recipe::Protocol protocol = ParseProtocolName(protocol_name);
  recipe::OutputParserOptions parser;
  parser.model_version = ParseVersionName(version_name);
  if (thinking) parser.thinking_stage = recipe::ThinkingStage::kReasoningStart;
  else parser.thinking_stage.reset();
  recipe::ResponseOptions response;
  response.model = std::string(BuiltinTokenizer(parser.model_version));
  response.thinking = thinking;
  response.emit_logprobs = false;
  response.id = protocol == recipe::Protocol::kMessages    ? "msg_deepinfer"
                : protocol == recipe::Protocol::kResponses ? "resp_deepinfer"
                                                           : "chatcmpl-deepinfer";
  std::optional<recipe::BackendFinish> backend_finish;
  if (finish == "stop") backend_finish = recipe::BackendFinish::kStop;
  else if (finish == "length") backend_finish = recipe::BackendFinish::kLength;
  else if (finish != "none") throw nb::value_error(("finish takes stop, length or none (got '" + finish + "')").c_str());
  recipe::CompletionChunk chunk;
  chunk.text = text;
  const recipe::StreamRunResult run = recipe::RunCompletion(protocol, parser, response, {chunk}, backend_finish, {});
  std::vector<std::pair<std::string, std::string>> events;
  for (const auto& step : run.events_per_step)
    for (const recipe::StreamEvent& e : step) events.emplace_back(e.name, e.json);
  return {run.response, std::move(events)};
}

}  // namespace
}  // namespace deepinfer::python

NB_MODULE(_deepinfer, m) {
  using namespace deepinfer::python;
  m.doc() = "deepinfer's engine, tokenizer and codec (use the deepinfer package, not this module)";

  nb::class_<Session>(m, "Session")
      .def("run", &Run, nb::arg("api"), nb::arg("bodies"), nb::arg("stop_token_ids"))
      .def_prop_ro("model_dir", &Session::model_dir)
      .def_prop_ro("served_name", &Session::served_name)
      .def_prop_ro("model_version",
                   [](const Session& s) { return std::string(deepinfer::recipe::ModelVersionName(s.model_version())); })
      .def_prop_ro("max_model_len", [](const Session& s) { return s.info().max_model_len; })
      .def_prop_ro("max_num_seqs", [](const Session& s) { return s.info().max_num_seqs; })
      .def("prefix_cache_hits", [](const Session& s) { return s.stats().prefix_cache_hits; });
  m.def("create_session", &CreateSession, nb::arg("model_dir").none(), nb::arg("precision"), nb::arg("kv_cache_bytes"),
        nb::arg("max_num_seqs"), nb::arg("max_num_batched_tokens"), nb::arg("speculative_config").none(),
        nb::arg("kv_store").none(), nb::arg("model_version").none(), nb::arg("enable_prefix_caching"));
  m.def("start_stream", &StartStream, nb::arg("session"), nb::arg("api"), nb::arg("body"), nb::arg("stop_token_ids"));

  nb::class_<Stream>(m, "Stream").def("next", &Stream::Next).def("abort", &Stream::Abort);

  nb::class_<PyTokenizer>(m, "Tokenizer")
      .def(nb::init<const std::string&>(), nb::arg("source"))
      .def("encode", &PyTokenizer::Encode, nb::arg("text"), nb::arg("allow_special") = false)
      .def("decode", &PyTokenizer::Decode, nb::arg("ids"), nb::arg("skip_special_tokens") = false)
      .def_prop_ro("vocab_size", [](const PyTokenizer& t) { return t.get().vocab_size(); })
      .def("token_to_id",
           [](const PyTokenizer& t, const std::string& token) { return t.get().TokenToId(token); })
      .def("is_special", [](const PyTokenizer& t, int32_t id) {
        if (id < 0 || static_cast<size_t>(id) >= t.get().vocab_size()) throw nb::value_error("token id outside the vocabulary");
        return t.get().IsSpecialToken(id);
      });

  m.def("render", &Render, nb::arg("body"), nb::arg("protocol"), nb::arg("version"), nb::arg("tokenizer").none());
  m.def("parse", &Parse, nb::arg("text"), nb::arg("protocol"), nb::arg("version"), nb::arg("thinking"),
        nb::arg("finish"));
  m.def("default_model_dir", [] {
    nb::gil_scoped_release unlocked;
    return Unwrap(deepinfer::pipeline::DefaultModelDir());
  });
}
