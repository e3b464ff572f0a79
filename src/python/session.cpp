#include "python/session.h"

#include <chrono>
#include <filesystem>
#include <utility>

#include "core/hf_config.h"
#include "kvstore/kv_store_tier.h"
#include "kvstore/store.h"
#include "model/causal_lm.h"
#include "pipeline/default_model.h"
#include "recipe/prompt_tokens.h"
#include "sampling/constraint_masks.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::python {

namespace {

Result<model::ComputePrecision> ParsePrecision(const std::string& name) {
  if (name == "exact") return model::ComputePrecision::kExact;
  if (name == "bf16") return model::ComputePrecision::kBf16Activations;
  return Status::InvalidArgument("precision must be 'exact' or 'bf16' (got '" + name + "')");
}

// The KV store under the prefix cache, as `deepinfer serve --kv-store` opens it with its defaults.
Result<std::unique_ptr<kvstore::KvStoreTier>> OpenKvStore(const std::string& dir, const model::CausalLM& model,
                                                          model::ComputePrecision precision) {
  const kvstore::StoreModel store_model{model.info().architecture, model.info().weights_fingerprint,
                                        model::ComputePrecisionName(precision),
                                        model::KvPrecisionName(model::KvPrecision::kF32)};
  DI_ASSIGN_OR_RETURN(kvstore::StoreLayout layout, kvstore::StoreLayoutFor(model.cache_spec(), store_model));
  kvstore::StoreOptions o;
  o.dir = dir;
  o.layout = std::move(layout);
  DI_ASSIGN_OR_RETURN(std::unique_ptr<kvstore::Store> store, kvstore::Store::Open(std::move(o)));
  return std::make_unique<kvstore::KvStoreTier>(std::move(store), kvstore::TtlClass::kChat);
}

}  // namespace

Result<std::unique_ptr<Session>> Session::Create(const SessionOptions& options) {
  std::unique_ptr<Session> s(new Session());
  s->model_dir_ = options.model_dir;
  std::string served_name = std::filesystem::path(options.model_dir).filename().string();
  if (s->model_dir_.empty()) {
    DI_ASSIGN_OR_RETURN(s->model_dir_, pipeline::DefaultModelDir());
    served_name = "deepinfer-small";
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(s->model_dir_, ec))
    return Status::InvalidArgument("model directory " + s->model_dir_ + " does not exist");
  if (served_name.empty()) served_name = std::filesystem::weakly_canonical(s->model_dir_, ec).filename().string();
  DI_ASSIGN_OR_RETURN(model::ComputePrecision precision, ParsePrecision(options.precision));
  DI_ASSIGN_OR_RETURN(HfConfig config, HfConfig::Load(s->model_dir_));
  std::optional<recipe::ModelVersion> version = pipeline::ModelVersionFromConfig(config);
  if (!options.model_version.empty()) {
    DI_ASSIGN_OR_RETURN(version, recipe::ParseModelVersion(options.model_version));
  }
  if (!version)
    return Status::InvalidArgument("cannot tell the prompt encoding from model_type '" + config.model_type() +
                                   "' (pass model_version)");
  engine::SpeculativeConfig speculative;
  if (!options.speculative_config.empty()) {
    DI_ASSIGN_OR_RETURN(speculative, engine::ParseSpeculativeConfig(options.speculative_config));
  }

  DI_ASSIGN_OR_RETURN(tokenizer::Tokenizer tokenizer, tokenizer::LoadTokenizer(s->model_dir_));
  s->tokenizer_ = std::make_unique<tokenizer::Tokenizer>(std::move(tokenizer));
  model::LoadOptions load;
  load.precision = precision;
  DI_ASSIGN_OR_RETURN(std::unique_ptr<model::CausalLM> model, model::LoadCausalLM(s->model_dir_, load));
  if (model->info().vocab_size < static_cast<int64_t>(s->tokenizer_->vocab_size()))
    return Status::InvalidArgument("the model's vocabulary (" + std::to_string(model->info().vocab_size) +
                                   ") is smaller than the tokenizer's (" +
                                   std::to_string(s->tokenizer_->vocab_size()) + ")");
  if (!options.kv_store.empty()) {
    DI_ASSIGN_OR_RETURN(s->kv_tier_, OpenKvStore(options.kv_store, *model, precision));
  }
  auto compiler = std::make_shared<sampling::ConstraintCompiler>(s->tokenizer_.get());
  engine::EngineOptions eo;
  eo.kv_cache_bytes = options.kv_cache_bytes;
  eo.max_num_seqs = options.max_num_seqs;
  eo.max_num_batched_tokens = options.max_num_batched_tokens;
  eo.enable_prefix_caching = options.enable_prefix_caching;
  eo.swa_replay = engine::DefaultSwaReplay(model->info().architecture);
  eo.speculative = speculative;
  eo.tokenizer = s->tokenizer_.get();
  eo.constraint_compiler = compiler;
  eo.compute_precision = precision;
  eo.max_waiting = INT32_MAX;
  eo.lower_tier = s->kv_tier_.get();
  DI_ASSIGN_OR_RETURN(s->engine_, engine::Engine::Create(std::move(model), eo));

  pipeline::PrepareOptions& p = s->prepare_;
  p.tokenizer = s->tokenizer_.get();
  p.control_ids = recipe::ControlTokenIds::FromTokenizer(*s->tokenizer_);
  p.model_version = *version;
  p.constraint_compiler = compiler;
  p.served_model_names = {served_name};
  p.max_model_len = s->engine_->info().max_model_len;
  return s;
}

Session::~Session() {
  if (engine_) engine_->Shutdown();
}

std::variant<std::shared_ptr<Job>, Refusal> Session::Prepare(pipeline::Api api, const std::string& body,
                                                              const std::vector<int32_t>& stop_token_ids,
                                                              bool stream) {
  pipeline::PrepareOutcome prepared = pipeline::Prepare(api, body, prepare_);
  if (!prepared.ok()) return Refusal{prepared.refusal.status, prepared.refusal.message, prepared.refusal.body};
  pipeline::PreparedRequest& request = *prepared.request;
  // The package sends one prompt per body (a call's prompts are separate requests, each with its own output).
  if (!request.more_prompts.empty()) return Refusal{400, "one prompt per request", ""};
  auto job = std::make_shared<Job>();
  job->keep_chunks = stream;
  request.params.sampling.stop_token_ids.insert(request.params.sampling.stop_token_ids.end(), stop_token_ids.begin(),
                                                stop_token_ids.end());
  pipeline::ResponseContext context;
  context.id = pipeline::NewResponseId(pipeline::ResponseIdPrefix(api));
  context.model = served_name();
  context.created = pipeline::UnixSeconds();
  context.model_version = prepare_.model_version;
  context.skip_special_tokens = request.params.skip_special_tokens;
  job->translator = request.TakeTranslator(std::move(context));
  job->prompt = std::move(request.prompt);
  job->outputs.resize(static_cast<size_t>(std::max(request.params.sampling.n, 1)));
  job->finish_reasons.resize(job->outputs.size());
  job->logprobs = request.params.sampling.logprobs;
  job->params = std::move(request.params);
  return job;
}

Status Session::Submit(const std::vector<std::shared_ptr<Job>>& jobs) {
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::shared_ptr<Job>& job = jobs[i];
    if (job->submitted) return Status::InvalidArgument("a request was submitted twice");
    job->submitted = true;
    engine::RequestParams params = std::move(job->params);
    std::vector<int32_t> prompt = job->prompt;
    auto id = engine_->AddRequest(std::move(prompt), std::move(params),
                                  [this, job](engine::RequestUpdate u) { OnUpdate(*job, u); });
    if (!id.ok()) {
      Abort({jobs.begin(), jobs.begin() + static_cast<std::ptrdiff_t>(i)});
      return id.status();
    }
    std::lock_guard<std::mutex> lock(mu_);
    job->id = *id;
  }
  return Status::Ok();
}

void Session::OnUpdate(Job& job, const engine::RequestUpdate& u) {
  pipeline::TranslatedUpdate translated = job.translator->Translate(u);
  if (translated.stop_engine) engine_->Abort(u.id);
  std::string body;
  std::vector<recipe::StreamEvent> end_events;
  if (u.finished) {
    if (job.translator->stream()) end_events = job.translator->StreamEnd();
    else body = job.translator->Body();
  }
  bool wake = u.finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const engine::SequenceDelta& d : u.sequences) {
      if (d.index < 0 || static_cast<size_t>(d.index) >= job.outputs.size()) continue;
      std::vector<engine::GeneratedToken>& out = job.outputs[static_cast<size_t>(d.index)];
      out.insert(out.end(), d.tokens.begin(), d.tokens.end());
      if (d.finish) job.finish_reasons[static_cast<size_t>(d.index)] = std::string(engine::FinishReasonName(*d.finish));
    }
    job.prompt_tokens = u.prompt_tokens;
    job.cached_tokens = u.prompt_cache_hit_tokens;
    job.seed = u.seed;
    if (job.keep_chunks) {
      JobChunk chunk;
      chunk.events = std::move(translated.events);
      chunk.events.insert(chunk.events.end(), end_events.begin(), end_events.end());
      chunk.deltas = u.sequences;
      chunk.finished = u.finished;
      job.chunks.push_back(std::move(chunk));
      wake = true;
    }
    if (u.finished) {
      job.finished = true;
      job.body = std::move(body);
      if (!u.status.ok()) job.failure = u.status.message();
    }
  }
  // A batch's caller waits for finished requests only: a wake-up per token would take a core from the step.
  if (wake) cv_.notify_all();
}

bool Session::WaitAll(const std::vector<std::shared_ptr<Job>>& jobs, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  auto all_done = [&] {
    for (const auto& job : jobs)
      if (!job->finished) return false;
    return true;
  };
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), all_done);
  return all_done();
}

std::vector<JobChunk> Session::TakeChunks(Job& job, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !job.chunks.empty(); });
  std::vector<JobChunk> out(std::make_move_iterator(job.chunks.begin()), std::make_move_iterator(job.chunks.end()));
  job.chunks.clear();
  return out;
}

void Session::Abort(const std::vector<std::shared_ptr<Job>>& jobs) {
  std::vector<engine::RequestId> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& job : jobs)
      if (job->id && !job->finished) ids.push_back(job->id);
  }
  for (engine::RequestId id : ids) engine_->Abort(id);
}

}  // namespace deepinfer::python
