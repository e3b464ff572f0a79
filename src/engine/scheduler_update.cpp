// The scheduler's bookkeeping half: turning a planned step into a StepPlan for the executor, and the
// executor's StepResult into what the next step depends on — positions, block registration (and offers to
// the persistent tier), n > 1 births, finish decisions (end and stop tokens, max_tokens, the context, the
// mask), the metrics — and the events for the output threads.
#include <algorithm>
#include <map>

#include "core/clock.h"
#include "core/log.h"
#include "engine/scheduler.h"

namespace deepinfer::engine {

SamplingSetup Scheduler::SamplingFor(const Sequence* s) const {
  const Request* r = s->request;
  const sampling::SamplingParams& sp = r->params.sampling;
  SamplingSetup setup;
  setup.id = s->id;
  setup.params = sp;
  setup.seed = r->seed;
  setup.index = s->index;
  if (!sp.ignore_eos) setup.ending_ids = config_.eos_token_ids;
  setup.ending_ids.insert(setup.ending_ids.end(), sp.stop_token_ids.begin(), sp.stop_token_ids.end());
  setup.use_counts = r->use_counts;
  if ((r->use_counts || options_.speculative.enabled()) && s->index == 0)
    setup.prompt.assign(s->tokens.begin(), s->tokens.begin() + r->prompt_tokens);
  setup.constraint = r->constraint;
  return setup;
}

StepPlan Scheduler::BuildPlan(std::vector<Work> plan) {
  StepPlan out;
  current_ = std::move(plan);
  const std::vector<Work>& work = current_;
  current_shape_ = StepShape{};
  if (work.empty()) return out;
  auto send_sampler = [&](Sequence* s) {
    if (s->sampler_sent) return;
    s->sampler_sent = true;
    out.new_samplers.push_back(SamplingFor(s));
  };
  for (const Work& w : work) {
    Sequence* s = w.seq;
    send_sampler(s);
    PlannedChunk c;
    c.id = s->id;
    c.setup = s->setup;
    s->setup.reset();
    c.start = w.start;
    c.end = w.end;
    c.tokens.assign(s->tokens.begin() + w.start, s->tokens.begin() + (w.end - w.verify));
    c.tokens.insert(c.tokens.end(), s->draft.begin(), s->draft.begin() + w.verify);
    c.verify = w.verify;
    c.draft_tokens = s->draft_limit;
    c.state_only = w.state_only;
    c.logits = w.logits;
    SetPromptLogprobs(*s, w, &c);
    if (w.logits) {
      c.samplers.push_back(s->id);
      Request* r = s->request;
      if (s->index == 0 && !r->forked && r->seqs.size() > 1) {
        for (size_t i = 1; i < r->seqs.size(); ++i) {
          send_sampler(r->seqs[i].get());
          c.samplers.push_back(r->seqs[i]->id);
        }
      }
    }
    c.prefix_table = s->blocks.prefix;
    c.window_table = s->blocks.window;
    if (!w.state_only && w.verify == 0) TakePromptSnapshot(*s, w.start, w.end, &out.prompt_snapshots);
    current_shape_.AddChunk(w.start, w.end - w.start, w.logits);
    current_shape_.logit_rows += static_cast<double>(w.verify);
    out.chunks.push_back(std::move(c));
  }
  out.forks = std::move(forks_);
  out.copies = std::move(copies_);
  out.dropped = std::move(dropped_);
  out.finished = std::move(finished_);
  out.released_constraints = std::move(released_constraints_);
  forks_.clear();
  copies_.clear();
  dropped_.clear();
  finished_.clear();
  released_constraints_.clear();
  return out;
}

void Scheduler::SetPromptLogprobs(const Sequence& s, const Work& w, PlannedChunk* c) const {
  const Request& r = *s.request;
  const int64_t collected = static_cast<int64_t>(r.prompt_logprobs.size());
  // Its rows predict positions start + 1 .. end: they must include the next one still missing (1 + collected).
  if (r.params.prompt_logprobs < 0 || r.prompt_logprobs_sent || s.index != 0 || w.state_only || w.verify > 0 ||
      w.start > collected || w.end <= collected || w.start + 1 >= r.prompt_tokens) {
    return;
  }
  c->prompt_logprobs = r.params.prompt_logprobs;
  c->next_prompt_token = w.end < r.prompt_tokens ? s.tokens[static_cast<size_t>(w.end)] : -1;
}

void Scheduler::CollectPromptLogprobs(const PromptLogprobsResult& result, Request* r) {
  for (size_t i = 0; i < result.tokens.size(); ++i) {
    const int64_t position = result.first_position + static_cast<int64_t>(i);
    if (position >= r->prompt_tokens) break;
    if (position == static_cast<int64_t>(r->prompt_logprobs.size()) + 1) r->prompt_logprobs.push_back(result.tokens[i]);
  }
}

void Scheduler::DeliverPromptLogprobs(const Sequence& s, std::vector<OutputEvent>* events) {
  Request* r = s.request;
  if (r->params.prompt_logprobs < 0 || r->prompt_logprobs_sent || s.index != 0) return;
  if (static_cast<int64_t>(r->prompt_logprobs.size()) + 1 < r->prompt_tokens) return;
  std::vector<sampling::SampledToken> all;
  all.reserve(r->prompt_logprobs.size() + 1);
  sampling::SampledToken first;
  first.id = s.tokens.front();  // no position before it
  all.push_back(std::move(first));
  for (sampling::SampledToken& t : r->prompt_logprobs) all.push_back(std::move(t));
  r->prompt_logprobs.clear();
  r->prompt_logprobs.shrink_to_fit();
  r->prompt_logprobs_sent = true;
  EventFor(r, events).prompt_logprobs = std::move(all);
}

OutputEvent& Scheduler::EventFor(Request* r, std::vector<OutputEvent>* events) {
  for (OutputEvent& e : *events) {
    if (e.request == r->out) return e;
  }
  events->emplace_back();
  events->back().request = r->out;
  events->back().hit_tokens = std::max<int64_t>(r->hit_tokens, 0);
  return events->back();
}

void Scheduler::FinishSequence(Sequence* s, FinishReason reason, int32_t stop_token, OutputEvent* event) {
  if (s->finished) return;
  s->finished = true;
  if (s->running) {
    TakeSnapshot(s, reason);
    ReleaseSequence(s);
    s->running = false;
  } else if (waiting_.erase(s)) {
    ReleaseSequence(s);
  }
  finished_.push_back(s->id);
  SeqEvent* se = nullptr;
  for (SeqEvent& e : event->seqs) {
    if (e.index == s->index) se = &e;
  }
  if (!se) {
    event->seqs.push_back({});
    se = &event->seqs.back();
    se->index = s->index;
  }
  se->finish = reason;
  se->stop_token = stop_token;
  Request* r = s->request;
  if (--r->live == 0) {
    if (r->constraint != 0) released_constraints_.push_back(r->constraint);
    const int64_t now = NowNanos();
    metrics_->e2e.Record(static_cast<double>(now - r->arrival_nanos) * 1e-9);
    MutexLock lock(&metrics_->mu);
    ++metrics_->counters.requests_finished[static_cast<int>(reason)];
  }
}

void Scheduler::FinishRequest(Request* r, FinishReason reason, const Status& status) {
  std::vector<OutputEvent> events;
  OutputEvent& e = EventFor(r, &events);
  e.status = status;
  for (auto& s : r->seqs) FinishSequence(s.get(), reason, -1, &e);
  if (r->fresh) {
    MutexLock lock(&inbox_->mu);
    r->fresh = false;
    --inbox_->waiting_fresh;
  }
  output_->Post(events);
  requests_.erase(r->id);
}

void Scheduler::FailPlan(const Status& status) {
  DI_LOG(kError, "engine: forward pass failed").Field("status", status.ToString()).Field("chunks", current_.size());
  std::vector<RequestId> failed;
  for (const Work& c : current_) {
    if (std::find(failed.begin(), failed.end(), c.seq->request->id) == failed.end())
      failed.push_back(c.seq->request->id);
  }
  for (RequestId id : failed) {
    auto it = requests_.find(id);
    if (it != requests_.end()) FinishRequest(it->second.get(), FinishReason::kError, status);
  }
}

void Scheduler::OfferBlock(const Sequence* s, int64_t index, int32_t block) {
  if (!options_.lower_tier) return;
  kvcache::BlockKey key;
  key.hash = s->blocks.hashes[static_cast<size_t>(index)];
  key.parent = index == 0 ? s->blocks.root : s->blocks.hashes[static_cast<size_t>(index - 1)];
  std::copy_n(s->tokens.begin() + index * kvcache::kBlockTokens, kvcache::kBlockTokens, key.tokens.begin());
  key.ttl_class = s->request->params.kv_ttl_class;
  std::vector<std::span<const uint8_t>> bytes;
  for (std::span<uint8_t> group : bytes_->PrefixBlock(block)) bytes.emplace_back(group);
  options_.lower_tier->Offer(key, bytes);
}

void Scheduler::Update(const StepResult& result) {
  ReceiveSnapshots(result);
  if (current_.empty()) return;  // a step of snapshots only
  // The executor has copied the forks' partial blocks.
  const int64_t released_at = NowNanos();
  if (result.status.ok() && schedule_started_cpu_nanos_ > 0) {
    int64_t verified = 0;
    for (const Work& w : current_) verified += w.verify;
    ObserveVerifyStep(static_cast<int64_t>(current_.size()), verified,
                      static_cast<double>(ProcessCpuNanos() - schedule_started_cpu_nanos_) * 1e-9);
  }
  for (const BlockCopy& pin : copy_pins_)
    (pin.window ? blocks_.window_class() : blocks_.prefix()).Release(pin.from, released_at);
  copy_pins_.clear();

  const int64_t t0 = result.forward_start_nanos, t1 = result.forward_end_nanos;
  const double gap = last_forward_end_ > 0 && t0 > 0 ? static_cast<double>(t0 - last_forward_end_) * 1e-9 : -1;
  last_forward_end_ = t1;
  const double seconds = static_cast<double>(t1 - t0) * 1e-9;
  if (GetLogLevel() == LogLevel::kDebug && t1 > t0) {
    // One line a step, to see which steps make the streams' inter-token latency: its decode rows and
    // prefill tokens, the model's prediction (before this step joins its samples), the target it was
    // planned against and what it took.
    int64_t decode_rows = 0;
    for (const Work& w : current_) decode_rows += w.end - w.start == 1 + w.verify && w.logits ? 1 : 0;
    DI_LOG(kDebug, "engine: step")
        .Field("decode_rows", decode_rows)
        .Field("prefill_tokens", static_cast<int64_t>(current_shape_.tokens) - decode_rows)
        .Field("chunks", current_.size())
        .Field("predicted_ms", PredictedStepSeconds() * 1e3)
        .Field("target_ms", TargetSeconds() * 1e3)
        .Field("measured_ms", seconds * 1e3)
        .Field("gap_ms", gap * 1e3)
        .Field("fitted_tokens", cost_.fitted_tokens())
        // The step's whole shape (the cost model's features), so that a log replays the fit exactly.
        .Field("logit_rows", current_shape_.logit_rows)
        .Field("context", current_shape_.context);
  }
  if (result.status.ok() && t1 > t0) cost_.Observe(current_shape_, seconds);  // t0 = t1 = 0: no forward pass
  if (options_.check_invariants) CheckStep();
  {
    MutexLock lock(&metrics_->mu);
    EngineStats& stats = metrics_->counters;
    stats.max_step_tokens = std::max<uint64_t>(stats.max_step_tokens, static_cast<uint64_t>(current_shape_.tokens));
    ++stats.steps;
    stats.forward_seconds += seconds;
    if (gap >= 0) stats.idle_gap_seconds += gap;
  }
  if (gap >= 0) metrics_->gap.Record(gap);
  if (!result.status.ok()) {
    FailPlan(result.status);
    return;
  }

  // A chunk whose model state the executor could not make (restore, fork) did not run: its request fails.
  std::vector<OutputEvent> events;
  std::vector<std::pair<RequestId, Status>> setup_failed;
  auto failed = [&](const Sequence* s) {
    for (const SequenceResult& r : result.sequences) {
      if (r.id == s->id && r.not_run) {
        setup_failed.push_back({s->request->id, r.status});
        return true;
      }
    }
    return false;
  };
  auto request_failed = [&](const Request* r) {
    return std::any_of(setup_failed.begin(), setup_failed.end(), [&](const auto& f) { return f.first == r->id; });
  };
  const int64_t now = NowNanos();
  for (const PromptLogprobsResult& p : result.prompt_logprobs) {
    for (const Work& c : current_) {
      if (c.seq->id == p.id && !failed(c.seq)) CollectPromptLogprobs(p, c.seq->request);
    }
  }
  std::unordered_map<SeqId, Sequence*> by_id;
  std::vector<Sequence*> parents;  // sequences whose first token gives birth to outputs 1..n-1
  for (const Work& c : current_) {
    Sequence* s = c.seq;
    Request* r = s->request;
    by_id[s->id] = s;
    if (c.logits && s->index == 0 && !r->forked && r->seqs.size() > 1) {
      for (size_t i = 1; i < r->seqs.size(); ++i) by_id[r->seqs[i]->id] = r->seqs[i].get();
    }
    if (request_failed(r) || failed(s)) continue;
    if (c.verify > 0) {
      auto row = std::find_if(result.sequences.begin(), result.sequences.end(),
                              [&](const SequenceResult& x) { return x.id == s->id; });
      if (row == result.sequences.end() || !row->status.ok() || row->tokens.empty()) continue;  // it fails below
      Status st = ApplyVerify(c, *row, now);
      if (!st.ok()) setup_failed.push_back({r->id, st});
      continue;
    }
    s->computed = c.end;
    blocks_.Commit(&s->blocks, s->tokens, c.end, now,
                   [&](int64_t index, int32_t block) { OfferBlock(s, index, block); });
    if (c.draft_room > 0) {
      Status st = blocks_.Rollback(&s->blocks, s->computed, now);
      if (!st.ok()) setup_failed.push_back({r->id, st});
    }
    if (c.logits) DeliverPromptLogprobs(*s, &events);
    if (c.logits && s->index == 0 && !r->forked && r->seqs.size() > 1) {
      parents.push_back(s);
      for (size_t i = 1; i < r->seqs.size(); ++i) {
        Sequence* child = r->seqs[i].get();
        child->tokens = s->tokens;
        child->born = true;
      }
    }
  }

  uint64_t generated = 0;
  for (const SequenceResult& row : result.sequences) {
    auto found = by_id.find(row.id);
    if (found == by_id.end()) continue;
    Sequence* s = found->second;
    Request* r = s->request;
    if (s->finished || request_failed(r)) continue;
    OutputEvent& event = EventFor(r, &events);
    if (!row.status.ok()) {
      event.status = row.status;
      FinishSequence(s, FinishReason::kError, -1, &event);
      continue;
    }
    const sampling::SamplingParams& sp = r->params.sampling;
    s->draft = row.draft;
    s->draft_survival = row.draft_survival;
    for (const sampling::SampledToken& token : row.tokens) {
      ++s->generated;
      ++generated;
      if (!r->first_token_seen) {
        r->first_token_seen = true;
        metrics_->ttft.Record(static_cast<double>(now - r->arrival_nanos) * 1e-9);
      } else if (s->last_token_nanos > 0) {
        metrics_->itl.Record(static_cast<double>(now - s->last_token_nanos) * 1e-9);
      }
      s->last_token_nanos = now;
      const int32_t id = token.id;
      const bool is_eos = !sp.ignore_eos && std::find(config_.eos_token_ids.begin(), config_.eos_token_ids.end(), id) !=
                                                config_.eos_token_ids.end();
      const bool is_stop_id =
          std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), id) != sp.stop_token_ids.end();
      if (is_eos || is_stop_id) {
        FinishSequence(s, FinishReason::kStop, id, &event);
        break;
      }
      s->tokens.push_back(id);
      SeqEvent* se = nullptr;
      for (SeqEvent& e : event.seqs) {
        if (e.index == s->index) se = &e;
      }
      if (!se) {
        event.seqs.push_back({});
        se = &event.seqs.back();
        se->index = s->index;
      }
      se->tokens.push_back(token);
      if (row.terminated && &token == &row.tokens.back()) FinishSequence(s, FinishReason::kStop, -1, &event);
      else if (s->generated >= sp.max_tokens || static_cast<int64_t>(s->tokens.size()) >= config_.max_model_len)
        FinishSequence(s, FinishReason::kLength, -1, &event);
      if (s->finished) break;
    }
  }
  for (Sequence* parent : parents) BirthChildren(parent);
  {
    MutexLock lock(&metrics_->mu);
    metrics_->counters.generation_tokens += generated;
  }
  std::vector<RequestId> done;
  for (OutputEvent& e : events) {
    auto it = requests_.find(e.request->id);
    if (it != requests_.end() && it->second->live == 0) done.push_back(e.request->id);
  }
  PublishPoolGauges();  // what the finished ones released, before their callers hear of it
  output_->Post(events);
  for (RequestId id : done) requests_.erase(id);
  for (const auto& [id, status] : setup_failed) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    DI_LOG(kError, "engine: a sequence's model state could not be made").Field("status", status.ToString());
    FinishRequest(it->second.get(), FinishReason::kError, status);
  }
}

Status Scheduler::ApplyVerify(const Work& c, const SequenceResult& row, int64_t now) {
  Sequence* s = c.seq;
  const auto sampled = static_cast<int64_t>(row.tokens.size());
  const int64_t kept = std::min(sampled, c.verify + 1);
  // The state holds the pending token and the draft tokens before the last one sampled (each equal to
  // the token sampled at its position); only blocks full of those are registered.
  s->computed = c.start + kept;
  const size_t before = s->tokens.size();
  s->tokens.insert(s->tokens.end(), s->draft.begin(), s->draft.begin() + (kept - 1));
  blocks_.Commit(&s->blocks, s->tokens, s->computed, now,
                 [&](int64_t index, int32_t block) { OfferBlock(s, index, block); });
  s->tokens.resize(before);
  Status st = blocks_.Rollback(&s->blocks, s->computed, now);

  // Draft tokens equal to the tokens sampled at their positions (the last one sampled counts too when it
  // matched and ended the run: an end or stop token, a terminated mask).
  int64_t accepted = 0;
  while (accepted < std::min(kept, c.verify) &&
         row.tokens[static_cast<size_t>(accepted)].id == s->draft[static_cast<size_t>(accepted)])
    ++accepted;
  ObserveAcceptance(c.verify, accepted);
  MutexLock lock(&metrics_->mu);
  EngineStats& stats = metrics_->counters;
  ++stats.spec_decode_num_drafts;
  stats.spec_decode_num_draft_tokens += static_cast<uint64_t>(c.verify);
  stats.spec_decode_num_accepted_tokens += static_cast<uint64_t>(accepted);
  for (int64_t i = 0; i < accepted && i < kMaxSpeculativeTokens; ++i) ++stats.spec_decode_num_accepted_tokens_per_pos[i];
  return st;
}

// Outputs 1..n-1 of a request take the prompt's state from output 0 once their first tokens are sampled:
// shared full blocks, copies of the partial ones, a forked model state (made by the executor at the start
// of the next step). Without Fork (or blocks for the copies) an output waits and recomputes the prompt
// (usually from the prefix cache).
void Scheduler::BirthChildren(Sequence* parent) {
  Request* r = parent->request;
  r->forked = true;
  const int64_t prompt = r->prompt_tokens;
  for (size_t i = 1; i < r->seqs.size(); ++i) {
    Sequence* child = r->seqs[i].get();
    if (child->finished) continue;
    bool forked = false;
    if (can_fork_ && parent->running && parent->computed == prompt) {
      std::vector<kvcache::BlockManager::Copy> copies;
      if (blocks_.Fork(parent->blocks, prompt, &child->blocks, &copies)) {
        for (const auto& copy : copies) {
          (copy.window ? blocks_.window_class() : blocks_.prefix()).AddRef(copy.from);
          copy_pins_.push_back({copy.window, copy.from, copy.to});
          copies_.push_back({copy.window, copy.from, copy.to});
        }
        forks_.push_back({child->id, parent->id});
        child->computed = prompt;
        child->running = true;
        running_.insert(std::upper_bound(running_.begin(), running_.end(), child, SeqOrder()), child);
        forked = true;
      }
    }
    if (!forked) waiting_.insert(child);
  }
}

// The checks of EngineOptions::check_invariants: the block manager's own, the budget, and that every block
// a sequence holds is referenced at least by it (the allocator counts the references).
void Scheduler::CheckStep() {
  std::vector<std::string> problems;
  Status s = blocks_.CheckInvariants();
  if (!s.ok()) problems.push_back(s.message());
  int64_t tokens = 0;
  for (const Work& c : current_) tokens += c.end - c.start;
  if (tokens > options_.max_num_batched_tokens) problems.push_back("step of " + std::to_string(tokens) + " tokens");
  if (static_cast<int64_t>(running_.size()) > options_.max_num_seqs + static_cast<int64_t>(sampling::kMaxN))
    problems.push_back("too many running sequences");
  std::map<int32_t, int32_t> prefix, window;
  for (const Sequence* r : running_) {
    for (int32_t b : r->blocks.prefix) prefix[b] += b != kvcache::kNoBlock;
    for (int32_t b : r->blocks.window) window[b] += b != kvcache::kNoBlock;
  }
  for (const auto& [b, n] : prefix) {
    if (b != kvcache::kNoBlock && blocks_.prefix().refcount(b) < n) problems.push_back("prefix block under-referenced");
  }
  for (const auto& [b, n] : window) {
    if (b != kvcache::kNoBlock && blocks_.window_class().refcount(b) < n) problems.push_back("window block under-referenced");
  }
  if (problems.empty()) return;
  for (const std::string& p : problems) DI_LOG(kError, "engine invariant violated").Field("problem", p);
  MutexLock lock(&metrics_->mu);
  metrics_->counters.invariant_violations += problems.size();
}

void Scheduler::Calibrate(const std::function<StepResult(const StepPlan&)>& run) {
  // A few steps of typical shapes (a long and a short prefill chunk, decode batches) on scratch sequences;
  // the model's logits are discarded and the blocks freed (never registered). The optional steps stop once
  // the profile's forward passes took kBudgetSeconds (a slow or loaded machine): its measured seconds, not
  // the clock, so that the profile depends on what the steps cost alone.
  constexpr double kBudgetSeconds = 3;
  Stopwatch watch;
  double measured = 0;
  std::vector<std::unique_ptr<Sequence>> seqs;
  auto make = [&](int64_t len) {
    auto s = std::make_unique<Sequence>();
    s->id = next_seq_id_++;
    s->tokens.resize(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i)
      s->tokens[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % config_.vocab_size);
    seqs.push_back(std::move(s));
    return seqs.back().get();
  };
  auto step = [&](const std::vector<std::pair<Sequence*, int64_t>>& work) {
    StepPlan plan;
    plan.discard_logits = true;
    StepShape shape;
    for (const auto& [s, n] : work) {
      if (s->computed + n > static_cast<int64_t>(s->tokens.size())) return false;
      if (!blocks_.Grow(&s->blocks, s->computed, s->computed + n)) return false;
      PlannedChunk c;
      c.id = s->id;
      if (s->computed == 0) c.setup = StateSetup{};
      c.start = s->computed;
      c.end = s->computed + n;
      c.tokens.assign(s->tokens.begin() + c.start, s->tokens.begin() + c.end);
      c.logits = true;
      c.prefix_table = s->blocks.prefix;
      c.window_table = s->blocks.window;
      plan.chunks.push_back(std::move(c));
      shape.AddChunk(s->computed, n, true);
    }
    const StepResult result = run(plan);
    if (!result.status.ok()) return false;
    const double seconds = static_cast<double>(result.forward_end_nanos - result.forward_start_nanos) * 1e-9;
    measured += seconds;
    cost_.Observe(shape, seconds);
    for (const auto& [s, n] : work) s->computed += n;
    return true;
  };
  auto within_budget = [&] { return measured < kBudgetSeconds; };
  const int64_t big = std::min<int64_t>(options_.max_num_batched_tokens, 512);
  // `a` runs chunks of big, 64, 1 and 1, one token in two of the decode rounds and a last chunk of 8.
  Sequence* a = make(big + 64 + 1 + 1 + 2 + 8);
  bool ok = step({{a, big}}) && step({{a, 64}}) && step({{a, 1}}) && step({{a, 1}});
  // One step of several sequences a token each whatever the budget: without one, the fit cannot tell a
  // sequence's own cost from the intercept, and the first real decode batches (whose steps set the derived
  // latency target) are predicted from single-sequence steps alone. Each batch sequence takes a token here,
  // a chunk of 16 and a token in each decode round.
  std::vector<Sequence*> batch;
  for (int i = 0; ok && i < 8; ++i) batch.push_back(make(24));
  std::vector<std::pair<Sequence*, int64_t>> work;
  for (Sequence* s : batch) work.push_back({s, 1});
  ok = ok && step(work);
  if (ok && within_budget()) {
    work.clear();
    for (Sequence* s : batch) work.push_back({s, 16});
    ok = step(work);
  }
  for (int round = 0; ok && round < 4 && within_budget(); ++round) {
    work.clear();
    for (Sequence* s : batch) work.push_back({s, 1});
    if (round % 2) work.push_back({a, 1});
    ok = step(work);
  }
  if (ok && within_budget()) step({{a, 8}, {batch[0], 1}, {batch[1], 1}});
  for (auto& s : seqs) {
    blocks_.Free(&s->blocks, NowNanos());
    finished_.push_back(s->id);
  }
  cost_.EndCalibration();
  DI_LOG(kInfo, "engine: cost model calibrated")
      .Field("seconds", watch.ElapsedSeconds())
      .Field("steps", cost_.observations())
      .Field("ms_per_256_tokens", cost_.coefficients()[1] * 1e3);
}

}  // namespace deepinfer::engine
