// The step thread's execution half: one Forward over the planned chunks (masks filled beside it), then
// the bookkeeping the next step depends on — positions, block registration, sampling every logits row in
// parallel, n > 1 births, finish checks — and the events for the output thread.
#include <algorithm>
#include <map>

#include "core/clock.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "engine/engine_impl.h"

namespace deepinfer::engine {
namespace {

struct Row {
  Sequence* seq = nullptr;
  const float* logits = nullptr;
  std::vector<int32_t> banned;
  Status status;
  sampling::SampledToken token;
};

}  // namespace

void EngineImpl::MirrorTables(Sequence* s) {
  for (size_t g = 0; g < spec_.groups.size(); ++g) {
    const bool prefix = spec_.groups[g].retention == model::CacheRetention::kPrefix;
    s->state->block_table(g) = prefix ? s->blocks.prefix : s->blocks.window;
  }
}

OutputEvent& EngineImpl::EventFor(Request* r, std::vector<OutputEvent>* events) {
  for (OutputEvent& e : *events) {
    if (e.request == r->out) return e;
  }
  events->emplace_back();
  events->back().request = r->out;
  events->back().hit_tokens = std::max<int64_t>(r->hit_tokens, 0);
  return events->back();
}

void EngineImpl::Post(std::vector<OutputEvent>& events) {
  if (events.empty()) return;
  const int64_t now = NowNanos();
  const size_t shards = out_shards_.size();
  out_sorted_.resize(shards);
  for (OutputEvent& e : events) {
    e.posted_nanos = now;
    out_sorted_[static_cast<size_t>(e.request->id % shards)].push_back(std::move(e));
  }
  for (size_t i = 0; i < shards; ++i) {
    std::vector<OutputEvent>& mine = out_sorted_[i];
    if (mine.empty()) continue;
    OutputShard& shard = *out_shards_[i];
    {
      std::lock_guard<std::mutex> lock(shard.mutex);
      for (OutputEvent& e : mine) shard.queue.push_back(std::move(e));
    }
    // One wake-up per shard and step, after the lock: a notify per event (or under the lock) let the
    // output thread preempt this thread once per request and contend for the mutex it had just been
    // woken on.
    shard.cv.notify_one();
    mine.clear();
  }
  events.clear();
}

void EngineImpl::FinishSequence(Sequence* s, FinishReason reason, int32_t stop_token, OutputEvent* event) {
  if (s->finished) return;
  s->finished = true;
  if (s->running) {
    ReleaseSequence(s);
    s->running = false;
  } else if (waiting_.erase(s)) {
    ReleaseSequence(s);
  }
  s->mask.reset();
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
    const int64_t now = NowNanos();
    e2e_.Record(static_cast<double>(now - r->arrival_nanos) * 1e-9);
    std::lock_guard<std::mutex> lock(stats_mutex_);
    ++counters_.requests_finished[static_cast<int>(reason)];
  }
}

void EngineImpl::FinishRequest(Request* r, FinishReason reason, const Status& status) {
  std::vector<OutputEvent> events;
  OutputEvent& e = EventFor(r, &events);
  e.status = status;
  for (auto& s : r->seqs) FinishSequence(s.get(), reason, -1, &e);
  if (r->fresh) {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    r->fresh = false;
    --waiting_fresh_;
  }
  Post(events);
  requests_.erase(r->id);
}

void EngineImpl::FailPlan(std::vector<PlannedChunk>& plan, const Status& status) {
  DI_LOG(kError, "engine: forward pass failed").Field("status", status.ToString()).Field("chunks", plan.size());
  std::vector<Request*> failed;
  for (const PlannedChunk& c : plan) {
    if (std::find(failed.begin(), failed.end(), c.seq->request) == failed.end()) failed.push_back(c.seq->request);
  }
  for (Request* r : failed) FinishRequest(r, FinishReason::kError, status);
}

void EngineImpl::FillMasks(const std::vector<PlannedChunk>& plan) {
  for (const PlannedChunk& c : plan) {
    if (!c.logits) continue;
    Request* r = c.seq->request;
    const bool births = c.seq->index == 0 && !r->forked && r->seqs.size() > 1;
    for (size_t i = 0; i < (births ? r->seqs.size() : 1); ++i) {
      Sequence* s = births ? r->seqs[i].get() : c.seq;
      if (!s->mask || s->mask_filled) continue;
      s->mask_status = s->mask->FillAllowed(&s->allowed, &s->all_allowed);
      s->mask_filled = true;
    }
  }
}

void EngineImpl::Execute(std::vector<PlannedChunk>& plan) {
  for (const PlannedChunk& c : plan) MirrorTables(c.seq);
  chunks_.clear();
  StepShape shape;
  for (const PlannedChunk& c : plan) {
    model::SequenceChunk chunk;
    chunk.state = c.seq->state.get();
    chunk.tokens = std::span<const int32_t>(c.seq->tokens.data() + c.start, static_cast<size_t>(c.end - c.start));
    chunk.logits = c.logits ? model::LogitsWanted::kLast : model::LogitsWanted::kNone;
    chunk.state_only = c.state_only;
    chunks_.push_back(chunk);
    shape.AddChunk(c.start, c.end - c.start, c.logits);
  }
  // The masks of the tokens this step samples are computed while the forward pass runs.
  std::thread masks;
  const bool any_mask = std::any_of(plan.begin(), plan.end(), [](const PlannedChunk& c) {
    if (!c.logits) return false;
    if (c.seq->mask) return true;
    const Request* r = c.seq->request;
    return c.seq->index == 0 && !r->forked &&
           std::any_of(r->seqs.begin(), r->seqs.end(), [](const auto& s) { return s->mask != nullptr; });
  });
  if (any_mask) masks = std::thread([this, &plan] { FillMasks(plan); });

  const int64_t t0 = NowNanos();
  const double gap = last_forward_end_ > 0 ? static_cast<double>(t0 - last_forward_end_) * 1e-9 : -1;
  Status status = model_->Forward(chunks_, pools_, &forward_out_);
  const int64_t t1 = NowNanos();
  last_forward_end_ = t1;
  if (masks.joinable()) masks.join();
  const double seconds = static_cast<double>(t1 - t0) * 1e-9;
  if (status.ok()) cost_.Observe(shape, seconds);
  if (options_.check_invariants) CheckStep(plan);
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    counters_.max_step_tokens = std::max<uint64_t>(counters_.max_step_tokens, static_cast<uint64_t>(shape.tokens));
    ++counters_.steps;
    counters_.forward_seconds += seconds;
    if (gap >= 0) counters_.idle_gap_seconds += gap;
  }
  if (gap >= 0) gap_.Record(gap);
  if (!status.ok()) {
    FailPlan(plan, status);
    return;
  }
  const int64_t now = NowNanos();
  for (const PlannedChunk& c : plan) {
    Sequence* s = c.seq;
    s->computed = c.end;
    blocks_->Commit(&s->blocks, s->tokens, c.end, now, [&](int64_t index, int32_t block) {
      if (!options_.lower_tier) return;
      kvcache::BlockKey key;
      key.hash = s->blocks.hashes[static_cast<size_t>(index)];
      key.parent = index == 0 ? s->blocks.root : s->blocks.hashes[static_cast<size_t>(index - 1)];
      std::copy_n(s->tokens.begin() + index * model::kBlockTokens, model::kBlockTokens, key.tokens.begin());
      key.ttl_class = s->request->params.kv_ttl_class;
      std::vector<std::span<const uint8_t>> bytes;
      for (size_t g = 0; g < spec_.groups.size(); ++g) {
        if (spec_.groups[g].retention != model::CacheRetention::kPrefix) continue;
        bytes.emplace_back(pools_.group(g).block(block), static_cast<size_t>(spec_.groups[g].bytes_per_block));
      }
      options_.lower_tier->Offer(key, bytes);
    });
  }
  SampleAndAdvance(plan, forward_out_);
}

void EngineImpl::SampleAndAdvance(std::vector<PlannedChunk>& plan, const model::ForwardOutput& out) {
  std::vector<Row> rows;
  std::vector<Sequence*> parents;  // sequences whose first token gives birth to outputs 1..n-1
  for (size_t k = 0; k < plan.size(); ++k) {
    const PlannedChunk& c = plan[k];
    if (!c.logits) continue;
    Request* r = c.seq->request;
    const bool births = c.seq->index == 0 && !r->forked && r->seqs.size() > 1;
    if (births) {
      parents.push_back(c.seq);
      for (size_t i = 1; i < r->seqs.size(); ++i) {
        Sequence* child = r->seqs[i].get();
        child->tokens = c.seq->tokens;
        child->counts = c.seq->counts;
        child->born = true;
      }
    }
    for (size_t i = 0; i < (births ? r->seqs.size() : 1); ++i) {
      Row row;
      row.seq = births ? r->seqs[i].get() : c.seq;
      row.logits = out.row(k);
      rows.push_back(std::move(row));
    }
  }
  // Sample every row; rows are independent and each draw is keyed by its sequence and position, so the
  // split over threads changes nothing. The model's pool is idle between forward passes.
  ThreadPool::Shared().ParallelFor(
      static_cast<int64_t>(rows.size()),
      [&](int64_t begin, int64_t end) {
        thread_local sampling::Sampler sampler;
        for (int64_t i = begin; i < end; ++i) {
          Row& row = rows[static_cast<size_t>(i)];
          Sequence* s = row.seq;
          const sampling::SamplingParams& sp = s->request->params.sampling;
          if (s->mask && !s->mask_status.ok()) {
            row.status = s->mask_status;
            continue;
          }
          if (s->generated < sp.min_tokens) {
            if (!sp.ignore_eos) row.banned = eos_;
            row.banned.insert(row.banned.end(), sp.stop_token_ids.begin(), sp.stop_token_ids.end());
          }
          sampling::SampleInputs in;
          in.params = &sp;
          in.draw = {.seed = s->request->seed,
                     .stream = sp.random_stream,
                     .sequence = static_cast<uint32_t>(s->index),
                     .position = static_cast<int64_t>(s->tokens.size())};
          in.counts = s->use_counts ? &s->counts : nullptr;
          in.allowed = s->mask && !s->all_allowed ? &s->allowed : nullptr;
          in.banned = row.banned;
          auto sampled = sampler.Sample(std::span<const float>(row.logits, static_cast<size_t>(info_.vocab_size)), in);
          if (sampled.ok()) row.token = std::move(sampled).value();
          else row.status = sampled.status();
        }
      },
      1);

  std::vector<OutputEvent> events;
  const int64_t now = NowNanos();
  uint64_t generated = 0;
  for (Row& row : rows) {
    Sequence* s = row.seq;
    Request* r = s->request;
    OutputEvent& event = EventFor(r, &events);
    if (!row.status.ok()) {
      event.status = row.status;
      FinishSequence(s, FinishReason::kError, -1, &event);
      continue;
    }
    sampling::SampledToken token = std::move(row.token);
    const sampling::SamplingParams& sp = r->params.sampling;
    ++s->generated;
    ++generated;
    if (!r->first_token_seen) {
      r->first_token_seen = true;
      ttft_.Record(static_cast<double>(now - r->arrival_nanos) * 1e-9);
    } else if (s->last_token_nanos > 0) {
      itl_.Record(static_cast<double>(now - s->last_token_nanos) * 1e-9);
    }
    s->last_token_nanos = now;
    const int32_t id = token.id;
    const bool is_eos = !sp.ignore_eos && std::find(eos_.begin(), eos_.end(), id) != eos_.end();
    const bool is_stop_id = std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), id) != sp.stop_token_ids.end();
    if (is_eos || is_stop_id) {
      FinishSequence(s, FinishReason::kStop, id, &event);
      continue;
    }
    if (s->use_counts) s->counts.AddOutput(id);
    bool terminated = false;
    if (s->mask) {
      s->mask_filled = false;
      Status accepted = s->mask->Accept(id);
      if (!accepted.ok()) {
        event.status = accepted;
        FinishSequence(s, FinishReason::kError, -1, &event);
        continue;
      }
      terminated = s->mask->Terminated();
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
    se->tokens.push_back(std::move(token));
    if (terminated) FinishSequence(s, FinishReason::kStop, -1, &event);
    else if (s->generated >= sp.max_tokens || static_cast<int64_t>(s->tokens.size()) >= info_.max_model_len)
      FinishSequence(s, FinishReason::kLength, -1, &event);
  }
  for (Sequence* parent : parents) BirthChildren(parent);
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    counters_.generation_tokens += generated;
  }
  std::vector<RequestId> done;
  for (OutputEvent& e : events) {
    auto it = requests_.find(e.request->id);
    if (it != requests_.end() && it->second->live == 0) done.push_back(e.request->id);
  }
  Post(events);
  for (RequestId id : done) requests_.erase(id);
}

// Outputs 1..n-1 of a request take the prompt's state from output 0 once their first tokens are sampled:
// shared full blocks, copies of the partial ones, a forked model state. Without Fork (or blocks for the
// copies) an output waits and recomputes the prompt (usually from the prefix cache).
void EngineImpl::BirthChildren(Sequence* parent) {
  Request* r = parent->request;
  r->forked = true;
  const int64_t prompt = r->prompt_tokens;
  for (size_t i = 1; i < r->seqs.size(); ++i) {
    Sequence* child = r->seqs[i].get();
    if (child->finished) continue;
    bool forked = false;
    if (can_fork_ && parent->state && parent->computed == prompt) {
      std::vector<kvcache::BlockManager::Copy> copies;
      if (blocks_->Fork(parent->blocks, prompt, &child->blocks, &copies)) {
        auto state = model_->Fork(*parent->state);
        if (state.ok()) {
          for (const auto& copy : copies) {
            for (size_t g = 0; g < spec_.groups.size(); ++g) {
              const bool window = spec_.groups[g].retention == model::CacheRetention::kWindow;
              if (window == copy.window) pools_.group(g).CopyBlock(copy.from, copy.to);
            }
          }
          child->state = std::move(state).value();
          child->computed = prompt;
          child->running = true;
          running_.insert(std::upper_bound(running_.begin(), running_.end(), child, SeqOrder()), child);
          forked = true;
        } else {
          if (state.status().code() == StatusCode::kUnimplemented) can_fork_ = false;
          blocks_->Free(&child->blocks, NowNanos());
          child->blocks = kvcache::SequenceBlocks{};
        }
      }
    }
    if (!forked) waiting_.insert(child);
  }
}

// The checks of EngineOptions::check_invariants: the block manager's own, the budget, and that every block
// a sequence holds is referenced at least by it (the allocator counts the references).
void EngineImpl::CheckStep(const std::vector<PlannedChunk>& plan) {
  std::vector<std::string> problems;
  Status s = blocks_->CheckInvariants();
  if (!s.ok()) problems.push_back(s.message());
  int64_t tokens = 0;
  for (const PlannedChunk& c : plan) tokens += c.end - c.start;
  if (tokens > options_.max_num_batched_tokens) problems.push_back("step of " + std::to_string(tokens) + " tokens");
  if (static_cast<int64_t>(running_.size()) > options_.max_num_seqs + static_cast<int64_t>(sampling::kMaxN))
    problems.push_back("too many running sequences");
  std::map<int32_t, int32_t> prefix, window;
  for (const Sequence* r : running_) {
    for (int32_t b : r->blocks.prefix) prefix[b] += b != kvcache::kNoBlock;
    for (int32_t b : r->blocks.window) window[b] += b != kvcache::kNoBlock;
  }
  for (const auto& [b, n] : prefix) {
    if (b != kvcache::kNoBlock && blocks_->prefix().refcount(b) < n) problems.push_back("prefix block under-referenced");
  }
  for (const auto& [b, n] : window) {
    if (b != kvcache::kNoBlock && blocks_->window_class().refcount(b) < n) problems.push_back("window block under-referenced");
  }
  if (problems.empty()) return;
  for (const std::string& p : problems) DI_LOG(kError, "engine invariant violated").Field("problem", p);
  std::lock_guard<std::mutex> lock(stats_mutex_);
  counters_.invariant_violations += problems.size();
}

void EngineImpl::Calibrate() {
  // A few steps of typical shapes (a long and a short prefill chunk, decode batches) on scratch sequences;
  // the model's logits are discarded and the blocks freed (never registered).
  Stopwatch watch;
  std::vector<std::unique_ptr<Sequence>> seqs;
  Request scratch;
  auto make = [&](int64_t len) {
    auto s = std::make_unique<Sequence>();
    s->request = &scratch;
    s->state = model_->NewSequence();
    s->tokens.resize(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) s->tokens[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % info_.vocab_size);
    seqs.push_back(std::move(s));
    return seqs.back().get();
  };
  auto step = [&](const std::vector<std::pair<Sequence*, int64_t>>& work) {
    chunks_.clear();
    StepShape shape;
    for (const auto& [s, n] : work) {
      if (!blocks_->Grow(&s->blocks, s->computed, s->computed + n)) return false;
      MirrorTables(s);
      model::SequenceChunk c;
      c.state = s->state.get();
      c.tokens = std::span<const int32_t>(s->tokens.data() + s->computed, static_cast<size_t>(n));
      c.logits = model::LogitsWanted::kLast;
      chunks_.push_back(c);
      shape.AddChunk(s->computed, n, true);
    }
    const int64_t t0 = NowNanos();
    if (!model_->Forward(chunks_, pools_, &forward_out_).ok()) return false;
    cost_.Observe(shape, static_cast<double>(NowNanos() - t0) * 1e-9);
    for (const auto& [s, n] : work) s->computed += n;
    return true;
  };
  const int64_t big = std::min<int64_t>(options_.max_num_batched_tokens, 512);
  Sequence* a = make(big + 64 + 8);
  bool ok = step({{a, big}}) && step({{a, 64}}) && step({{a, 1}}) && step({{a, 1}});
  std::vector<Sequence*> batch;
  for (int i = 0; ok && i < 8 && watch.ElapsedSeconds() < 3; ++i) batch.push_back(make(24));
  std::vector<std::pair<Sequence*, int64_t>> work;
  for (Sequence* s : batch) work.push_back({s, 16});
  ok = ok && !batch.empty() && step(work);
  for (int round = 0; ok && round < 4 && watch.ElapsedSeconds() < 3; ++round) {
    work.clear();
    for (Sequence* s : batch) work.push_back({s, 1});
    if (round % 2) work.push_back({a, 1});
    ok = step(work);
  }
  if (ok && watch.ElapsedSeconds() < 3) step({{a, 8}, {batch[0], 1}, {batch[1], 1}});
  for (auto& s : seqs) blocks_->Free(&s->blocks, NowNanos());
  cost_.EndCalibration();
  DI_LOG(kInfo, "engine: cost model calibrated")
      .Field("seconds", watch.ElapsedSeconds())
      .Field("steps", cost_.observations())
      .Field("ms_per_256_tokens", cost_.coefficients()[1] * 1e3);
}

}  // namespace deepinfer::engine
