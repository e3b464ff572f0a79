#include "parallel/unit_serving.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/clock.h"
#include "core/log.h"
#include "engine/request_codec.h"

namespace deepinfer::parallel {
namespace {

int64_t TokensIn(const engine::RequestUpdate& update) {
  int64_t n = 0;
  for (const engine::SequenceDelta& d : update.sequences) n += static_cast<int64_t>(d.tokens.size());
  return n;
}

// The last update of a request whose rank never sent one (Shutdown gave up waiting).
engine::RequestUpdate AbortedUpdate(uint64_t id) {
  engine::RequestUpdate u;
  u.id = id;
  u.finished = true;
  engine::SequenceDelta d;
  d.finish = engine::FinishReason::kAbort;
  u.sequences.push_back(std::move(d));
  u.emitted_nanos = NowNanos();
  return u;
}

}  // namespace

UnitFrontEngine::UnitFrontEngine(ExpertGroup& group) : group_(group), ranks_(group.size()) {
  MutexLock lock(&mu_);
  counters_.resize(static_cast<size_t>(ranks_));
  outbox_.resize(static_cast<size_t>(ranks_));
}

UnitFrontEngine::~UnitFrontEngine() { Shutdown(); }

void UnitFrontEngine::Attach(std::unique_ptr<engine::Engine> local, int64_t max_num_batched_tokens) {
  local_ = std::move(local);
  const engine::EngineInfo& info = local_->info();
  capacity_.batched_tokens = std::max<int64_t>(max_num_batched_tokens, 1);
  capacity_.kv_tokens = std::max<int64_t>(info.kv_blocks * info.block_tokens, 1);
  capacity_.sequences = std::max<int64_t>(info.max_num_seqs, 1);
  dispatcher_ = std::thread([this] { DispatchLoop(); });
}

Result<engine::RequestId> UnitFrontEngine::AddRequest(std::vector<int32_t> prompt, engine::RequestParams params,
                                                      engine::UpdateCallback callback) {
  const int64_t prompt_tokens = static_cast<int64_t>(prompt.size());
  const double prompt_context = PromptContext(prompt_tokens);
  // Rank 0's fitted cost model prices attention against tokens (the ranks run the same model and options).
  RankCapacity capacity = capacity_;
  if (const engine::EngineStats stats = local_->Stats(); stats.step_cost_calibrated && stats.step_cost[1] > 0)
    capacity.context_cost_per_token = std::max(0.0, stats.step_cost[3] / stats.step_cost[1]);
  uint64_t id = 0;
  int rank = 0;
  {
    MutexLock lock(&mu_);
    if (stopping_) return Status::Unavailable("the unit is shutting down");
    std::vector<RankLoad> loads;
    for (const RankServingCounters& c : counters_) loads.push_back(c.load);
    rank = PlaceRequest(loads, capacity);
    id = next_id_++;
    Placed& p = requests_[id];
    p.rank = rank;
    p.callback = std::move(callback);
    p.prompt_tokens = prompt_tokens;
    RankLoad& load = counters_[static_cast<size_t>(rank)].load;
    load.queued_prefill_tokens += prompt_tokens;
    load.queued_prefill_context += prompt_context;
    load.kv_tokens += prompt_tokens;
    ++load.requests;
    ++load.placed;
    if (rank != 0) {
      ++remote_unfinished_;
      AppendUnitMessage({.kind = UnitMessageKind::kAdd, .request = id,
                         .body = engine::RequestToJson({std::move(prompt), std::move(params)})},
                        &outbox_[static_cast<size_t>(rank)]);
    }
  }
  // Undoes the booking of a request that did not start.
  const auto unbook = [this, id, rank, prompt_tokens, prompt_context]() REQUIRES(mu_) {
    requests_.erase(id);
    RankLoad& load = counters_[static_cast<size_t>(rank)].load;
    load.queued_prefill_tokens -= prompt_tokens;
    load.queued_prefill_context -= prompt_context;
    load.kv_tokens -= prompt_tokens;
    --load.requests;
    --load.placed;
  };
  if (rank == 0) {
    auto added = local_->AddRequest(std::move(prompt), std::move(params), [this, id](engine::RequestUpdate u) {
      u.id = id;
      if (engine::UpdateCallback cb = Book(&u)) cb(std::move(u));
    });
    MutexLock lock(&mu_);
    if (!added.ok()) {
      unbook();
      return added.status();
    }
    if (auto it = requests_.find(id); it != requests_.end()) it->second.local_id = *added;
    return id;
  }
  // Another rank: its answer comes back within an agreement or two.
  MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(AcceptTimeout());
  while (true) {
    auto it = requests_.find(id);
    if (it == requests_.end()) return Status::Unavailable("the unit is shutting down");
    if (it->second.answered) {
      if (it->second.accepted.ok()) return id;
      Status refused = it->second.accepted;
      --remote_unfinished_;
      unbook();
      return refused;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      // Its rank may still run it: it is aborted there, and its updates go nowhere.
      it->second.callback = nullptr;
      AppendUnitMessage({.kind = UnitMessageKind::kAbort, .request = id}, &outbox_[static_cast<size_t>(rank)]);
      return Status::Unavailable("rank " + std::to_string(rank) + " did not accept the request in time");
    }
    cv_.WaitUntil(&mu_, deadline);
  }
}

void UnitFrontEngine::Abort(engine::RequestId id) {
  engine::RequestId local_id = 0;
  {
    MutexLock lock(&mu_);
    auto it = requests_.find(id);
    if (it == requests_.end()) return;
    if (it->second.rank != 0) {
      AppendUnitMessage({.kind = UnitMessageKind::kAbort, .request = id},
                        &outbox_[static_cast<size_t>(it->second.rank)]);
      return;
    }
    local_id = it->second.local_id;
  }
  local_->Abort(local_id);
}

engine::UpdateCallback UnitFrontEngine::Book(engine::RequestUpdate* update) {
  MutexLock lock(&mu_);
  auto it = requests_.find(update->id);
  if (it == requests_.end()) return nullptr;
  Placed& p = it->second;
  RankServingCounters& c = counters_[static_cast<size_t>(p.rank)];
  if (!p.first_update) {
    p.first_update = true;
    c.load.queued_prefill_tokens -= p.prompt_tokens;
    c.load.queued_prefill_context -= PromptContext(p.prompt_tokens);
  }
  const int64_t tokens = TokensIn(*update);
  p.generated += tokens;
  c.load.kv_tokens += tokens;
  c.generation_tokens += static_cast<uint64_t>(tokens);
  if (!update->finished) return p.callback;
  engine::UpdateCallback callback = std::move(p.callback);
  c.load.kv_tokens -= p.prompt_tokens + p.generated;
  --c.load.requests;
  ++c.finished;
  requests_.erase(it);
  cv_.SignalAll();
  return callback;
}

void UnitFrontEngine::DispatchLoop() {
  while (true) {
    engine::RequestUpdate update;
    {
      MutexLock lock(&mu_);
      while (dispatch_.empty() && !dispatch_stop_) cv_.Wait(&mu_);
      if (dispatch_.empty()) return;
      update = std::move(dispatch_.front());
      dispatch_.pop_front();
    }
    if (engine::UpdateCallback cb = Book(&update)) cb(std::move(update));
  }
}

bool UnitFrontEngine::HasWork() {
  MutexLock lock(&mu_);
  if (remote_unfinished_ > 0) return true;
  for (const std::string& bytes : outbox_)
    if (!bytes.empty()) return true;
  return false;
}

void UnitFrontEngine::TakeOutgoing(std::vector<std::string>* to_member) {
  MutexLock lock(&mu_);
  for (int r = 1; r < ranks_; ++r) std::swap((*to_member)[static_cast<size_t>(r)], outbox_[static_cast<size_t>(r)]);
}

Status UnitFrontEngine::Deliver(int from, std::string_view bytes) {
  DI_ASSIGN_OR_RETURN(std::vector<UnitMessage> messages, ParseUnitMessages(bytes));
  MutexLock lock(&mu_);
  for (UnitMessage& m : messages) {
    if (m.kind == UnitMessageKind::kFigures) {
      counters_[static_cast<size_t>(from)].engine = m.figures;
      continue;
    }
    auto it = requests_.find(m.request);
    if (it == requests_.end()) continue;  // given up (Shutdown): its rank's late words go nowhere
    if (it->second.rank != from)
      return Status::DataLoss("rank " + std::to_string(from) + " answered for a request it does not run");
    if (m.kind == UnitMessageKind::kAccepted) {
      it->second.answered = true;
      it->second.accepted = std::move(m.status);
      cv_.SignalAll();
    } else if (m.kind == UnitMessageKind::kUpdate) {
      if (m.update.finished) --remote_unfinished_;
      m.update.emitted_nanos = NowNanos();
      dispatch_.push_back(std::move(m.update));
      cv_.SignalAll();
    } else {
      return Status::DataLoss("rank " + std::to_string(from) + " sent rank 0 a request");
    }
  }
  return Status::Ok();
}

Result<std::vector<engine::GenerateOutput>> UnitFrontEngine::Generate(std::span<const std::vector<int32_t>> prompts,
                                                                      const engine::RequestParams& params) {
  struct Shared {
    Mutex mu;
    CondVar cv;
    size_t left = 0;
  };
  auto shared = std::make_shared<Shared>();
  std::vector<engine::GenerateOutput> out(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    {
      MutexLock lock(&shared->mu);
      ++shared->left;
    }
    auto added = AddRequest(prompts[i], params, [shared, o = &out[i]](engine::RequestUpdate u) {
      MutexLock lock(&shared->mu);
      o->prompt_tokens = u.prompt_tokens;
      o->prompt_cache_hit_tokens = u.prompt_cache_hit_tokens;
      o->seed = u.seed;
      for (engine::SequenceDelta& d : u.sequences) {
        if (o->sequences.size() <= static_cast<size_t>(d.index)) o->sequences.resize(static_cast<size_t>(d.index) + 1);
        engine::GenerateOutput::Sequence& s = o->sequences[static_cast<size_t>(d.index)];
        for (engine::GeneratedToken& t : d.tokens) s.tokens.push_back(std::move(t));
        s.text += d.text;
        if (d.finish) s.finish = *d.finish;
        if (!d.stop_string.empty()) s.stop_string = d.stop_string;
      }
      if (u.finished) {
        o->status = u.status;
        --shared->left;
        shared->cv.SignalAll();
      }
    });
    if (!added.ok()) {
      MutexLock lock(&shared->mu);
      --shared->left;
      out[i].status = added.status();
    }
  }
  MutexLock lock(&shared->mu);
  while (shared->left > 0) shared->cv.Wait(&shared->mu);
  return out;
}

engine::EngineStats UnitFrontEngine::Stats() const { return local_->Stats(); }

std::vector<RankServingCounters> UnitFrontEngine::RankCounters() const {
  const engine::EngineStats stats = local_->Stats();
  MutexLock lock(&mu_);
  std::vector<RankServingCounters> out = counters_;
  out[0].engine = {stats.num_requests_running, stats.num_requests_waiting, stats.kv_blocks_used,
                   stats.kv_blocks_total, stats.queued_prefill_tokens, static_cast<int64_t>(stats.num_preemptions)};
  return out;
}

std::string UnitFrontEngine::PrometheusText() const {
  const std::vector<RankServingCounters> counters = RankCounters();
  std::string out;
  const auto family = [&](const char* name, const char* type, const char* help, auto value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    for (size_t r = 0; r < counters.size(); ++r)
      out += std::string(name) + "{rank=\"" + std::to_string(r) + "\"} " + std::to_string(value(counters[r])) + "\n";
  };
  family("deepinfer_unit_rank_requests_placed_total", "counter", "Requests rank 0 placed on each rank of the unit.",
         [](const RankServingCounters& c) { return c.load.placed; });
  family("deepinfer_unit_rank_requests_finished_total", "counter", "Requests that finished on each rank.",
         [](const RankServingCounters& c) { return c.finished; });
  family("deepinfer_unit_rank_generation_tokens_total", "counter", "Tokens generated on each rank.",
         [](const RankServingCounters& c) { return c.generation_tokens; });
  family("deepinfer_unit_rank_requests", "gauge", "Unfinished requests on each rank.",
         [](const RankServingCounters& c) { return c.load.requests; });
  family("deepinfer_unit_rank_queued_prefill_tokens", "gauge",
         "Prompt tokens placed on each rank whose first update has not come back.",
         [](const RankServingCounters& c) { return c.load.queued_prefill_tokens; });
  family("deepinfer_unit_rank_kv_tokens", "gauge", "Prompt and generated tokens of each rank's unfinished requests.",
         [](const RankServingCounters& c) { return c.load.kv_tokens; });
  // As each rank's engine reports them (the other ranks' every tenth of a second).
  family("deepinfer_unit_rank_engine_requests_running", "gauge", "Requests running in each rank's engine.",
         [](const RankServingCounters& c) { return c.engine.running; });
  family("deepinfer_unit_rank_engine_requests_waiting", "gauge", "Requests waiting in each rank's engine.",
         [](const RankServingCounters& c) { return c.engine.waiting; });
  family("deepinfer_unit_rank_engine_kv_cache_usage", "gauge", "Used over total KV blocks of each rank's engine.",
         [](const RankServingCounters& c) {
           return c.engine.kv_blocks_total > 0
                      ? static_cast<double>(c.engine.kv_blocks_used) / static_cast<double>(c.engine.kv_blocks_total)
                      : 0.0;
         });
  family("deepinfer_unit_rank_engine_queued_prefill_tokens", "gauge",
         "Prompt tokens not yet computed in each rank's engine.",
         [](const RankServingCounters& c) { return c.engine.queued_prefill_tokens; });
  family("deepinfer_unit_rank_engine_preemptions_total", "counter", "Preemptions in each rank's engine.",
         [](const RankServingCounters& c) { return c.engine.preemptions; });
  // Expert parallelism: the rows each rank's experts computed, and their balance (ExpertGroup::ExpertRows).
  const ExpertGroup::ExpertRows rows = group_.expert_rows();
  if (rows.routed_steps > 0) {
    out += "# HELP deepinfer_unit_rank_expert_rows_total Routed (token, expert) pairs each rank's experts computed.\n"
           "# TYPE deepinfer_unit_rank_expert_rows_total counter\n";
    for (size_t r = 0; r < rows.total.size(); ++r)
      out += "deepinfer_unit_rank_expert_rows_total{rank=\"" + std::to_string(r) + "\"} " + std::to_string(rows.total[r]) + "\n";
    // Per MoE layer (label `layer`, routed layers in order): max over mean of the pairs the ranks computed in
    // that layer in one step.
    const auto per_layer = [&out](const std::string& name, const std::string& help, const std::vector<double>& values) {
      out += "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n";
      for (size_t l = 0; l < values.size(); ++l)
        out += name + "{layer=\"" + std::to_string(l) + "\"} " + std::to_string(values[l]) + "\n";
    };
    per_layer("deepinfer_unit_expert_balance_last_step",
              "Max over mean of the routed pairs the ranks' experts computed per layer, in the last step that routed rows.",
              rows.last_step_balance);
    per_layer("deepinfer_unit_expert_balance_window",
              "Mean over the last " + std::to_string(ExpertGroup::kBalanceWindowSteps) +
                  " steps that routed rows of each step's max over mean of the pairs the ranks computed per layer.",
              rows.window_balance);
    per_layer("deepinfer_unit_expert_balance_total",
              "Mean since start over the steps that routed rows of each step's max over mean of the pairs the "
              "ranks computed per layer.",
              rows.total_balance);
    out += "# HELP deepinfer_unit_expert_rebalances_total Expert placements the load balancer applied.\n"
           "# TYPE deepinfer_unit_expert_rebalances_total counter\n"
           "deepinfer_unit_expert_rebalances_total " + std::to_string(group_.rebalances()) + "\n";
    out += "# HELP deepinfer_unit_expert_rebalances_skipped_total Expert placements the load balancer computed and "
           "did not apply: no better than the one in use over its window.\n"
           "# TYPE deepinfer_unit_expert_rebalances_skipped_total counter\n"
           "deepinfer_unit_expert_rebalances_skipped_total " + std::to_string(group_.skipped_rebalances()) + "\n";
  }
  return out;
}

void UnitFrontEngine::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    std::vector<engine::RequestId> local_ids;
    {
      MutexLock lock(&mu_);
      stopping_ = true;
      for (auto& [id, p] : requests_) {
        if (p.rank == 0) {
          local_ids.push_back(p.local_id);
        } else {
          AppendUnitMessage({.kind = UnitMessageKind::kAbort, .request = id}, &outbox_[static_cast<size_t>(p.rank)]);
        }
      }
    }
    if (local_ == nullptr) return;
    for (engine::RequestId id : local_ids) local_->Abort(id);
    std::vector<engine::RequestUpdate> abandoned;
    {
      MutexLock lock(&mu_);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(AbortWait());
      while (!requests_.empty() && std::chrono::steady_clock::now() < deadline) cv_.WaitUntil(&mu_, deadline);
      // What is left gets its last update here; the other ranks are told to stop regardless.
      for (const auto& [id, p] : requests_)
        if (p.rank != 0) abandoned.push_back(AbortedUpdate(id));
      remote_unfinished_ = 0;
    }
    for (engine::RequestUpdate& u : abandoned)
      if (engine::UpdateCallback cb = Book(&u)) cb(std::move(u));
    group_.FinishAndWait();
    local_->Shutdown();
    {
      MutexLock lock(&mu_);
      dispatch_stop_ = true;
      cv_.SignalAll();
    }
    if (dispatcher_.joinable()) dispatcher_.join();
  });
}

void UnitRankWorker::Attach(engine::Engine* engine) {
  std::vector<UnitMessage> waiting;
  {
    MutexLock lock(&mu_);
    engine_ = engine;
    waiting.swap(waiting_);
  }
  Process(std::move(waiting));
}

bool UnitRankWorker::HasWork() {
  MutexLock lock(&mu_);
  return !outbox_.empty() || !waiting_.empty();
}

void UnitRankWorker::TakeOutgoing(std::vector<std::string>* to_member) {
  engine::Engine* engine = nullptr;
  {
    MutexLock lock(&mu_);
    std::swap((*to_member)[0], outbox_);
    engine = engine_;
  }
  const auto now = std::chrono::steady_clock::now();
  if (engine != nullptr && now - figures_sent_ >= std::chrono::duration<double>(UnitFrontEngine::kFiguresEveryS)) {
    figures_sent_ = now;
    const engine::EngineStats s = engine->Stats();
    AppendUnitMessage({.kind = UnitMessageKind::kFigures,
                       .figures = {s.num_requests_running, s.num_requests_waiting, s.kv_blocks_used, s.kv_blocks_total,
                                   s.queued_prefill_tokens, static_cast<int64_t>(s.num_preemptions)}},
                      &(*to_member)[0]);
  }
}

Status UnitRankWorker::Deliver(int from, std::string_view bytes) {
  if (from != 0) return Status::DataLoss("rank " + std::to_string(from) + " sent requests (only rank 0 places them)");
  DI_ASSIGN_OR_RETURN(std::vector<UnitMessage> messages, ParseUnitMessages(bytes));
  for (const UnitMessage& m : messages)
    if (m.kind != UnitMessageKind::kAdd && m.kind != UnitMessageKind::kAbort)
      return Status::DataLoss("rank 0 sent an answer where requests were expected");
  {
    MutexLock lock(&mu_);
    if (engine_ == nullptr) {
      for (UnitMessage& m : messages) waiting_.push_back(std::move(m));
      return Status::Ok();
    }
  }
  Process(std::move(messages));
  return Status::Ok();
}

void UnitRankWorker::Process(std::vector<UnitMessage> messages) {
  engine::Engine* engine = nullptr;
  {
    MutexLock lock(&mu_);
    engine = engine_;
  }
  for (UnitMessage& m : messages) {
    const uint64_t request = m.request;
    if (m.kind == UnitMessageKind::kAbort) {
      engine::RequestId local = 0;
      {
        MutexLock lock(&mu_);
        auto it = local_ids_.find(request);
        if (it == local_ids_.end()) continue;  // finished already
        local = it->second;
      }
      engine->Abort(local);
      continue;
    }
    auto parsed = engine::RequestFromJson(m.body);
    // Held across AddRequest, so that the acceptance goes out before the request's first update.
    MutexLock lock(&mu_);
    Result<engine::RequestId> added = parsed.status();
    if (parsed.ok()) {
      added = engine->AddRequest(std::move(parsed->prompt), std::move(parsed->params),
                                 [this, request](engine::RequestUpdate u) {
                                   MutexLock update_lock(&mu_);
                                   if (u.finished && local_ids_.erase(request) == 0) finished_early_.insert(request);
                                   AppendUnitMessage({.kind = UnitMessageKind::kUpdate, .request = request,
                                                      .update = std::move(u)},
                                                     &outbox_);
                                 });
    }
    if (added.ok() && finished_early_.erase(request) == 0) local_ids_[request] = *added;
    AppendUnitMessage({.kind = UnitMessageKind::kAccepted, .request = request, .status = added.status()}, &outbox_);
  }
}

}  // namespace deepinfer::parallel
