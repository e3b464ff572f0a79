// LocalExecutor: a step is setups (forks, block copies, releases, fresh and restored states), one Forward
// over the planned chunks with the masks of the rows it samples filled beside it, then sampling every row
// in parallel on the model's idle pool.
#include <algorithm>

#include "core/clock.h"
#include "core/sched.h"
#include "core/thread_pool.h"
#include "engine/executor.h"

namespace deepinfer::engine {

MaskFiller::MaskFiller() : thread_([this] { Loop(); }) {}

MaskFiller::~MaskFiller() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

void MaskFiller::Start(std::function<void()> job) {
  {
    MutexLock lock(&mu_);
    job_ = std::move(job);
    busy_ = true;
  }
  cv_.SignalAll();
}

void MaskFiller::Wait() {
  MutexLock lock(&mu_);
  while (busy_) cv_.Wait(&mu_);
}

void MaskFiller::Loop() {
  SetCurrentThreadName("di-engine-mask");
  while (true) {
    std::function<void()> job;
    {
      MutexLock lock(&mu_);
      while (!stop_ && !job_) cv_.Wait(&mu_);
      if (!job_) return;
      job = std::move(job_);
      job_ = nullptr;
    }
    job();
    {
      MutexLock lock(&mu_);
      busy_ = false;
    }
    cv_.SignalAll();
  }
}

// One sampled row of a step: an output and the logits it samples from. A verify row has `verify` + 1
// rows of logits (positions first_position, first_position + 1, ...) and samples them in order while each
// token equals the draft's.
struct LocalExecutor::Row {
  SeqId id = 0;
  Slot* slot = nullptr;
  size_t chunk = 0;             // its chunk in the forward pass
  int64_t first_row = 0;        // the chunk's logits row of position first_position
  int64_t first_position = 0;   // the position the first token sampled takes
  int64_t verify = 0;
  const int32_t* draft = nullptr;  // verify tokens
  int64_t draft_tokens = -1;       // the most draft tokens to propose after this step (-1: K)
  bool owns_state = false;         // the chunk ran this output's own model state (not its parent's)
  const float* logits = nullptr;
  int64_t position = 0;
  Status status;
  sampling::SampledToken token;  // the last one sampled
  std::vector<sampling::SampledToken> tokens;  // accepted
  bool ended = false;       // its last token is an ending id
  bool terminated = false;  // its mask allows no more
};

LocalExecutor::LocalExecutor(std::unique_ptr<model::CausalLM> model, kvcache::KvPools pools,
                             std::shared_ptr<sampling::ConstraintCompiler> compiler, std::unique_ptr<Drafter> drafter,
                             int draft_tokens, bool rejection_sampling)
    : model_(std::move(model)), spec_(model_->cache_spec()), pools_(std::move(pools)),
      vocab_size_(model_->info().vocab_size), drafter_(std::move(drafter)), draft_tokens_(draft_tokens),
      rejection_sampling_(rejection_sampling),
      constraint_masks_(std::make_unique<sampling::ConstraintMasks>(std::move(compiler))) {
  if (drafter_) drafter_->Attach(model_.get(), &pools_);
}

LocalExecutor::~LocalExecutor() { StopCompiling(); }

void LocalExecutor::StopCompiling() {
  std::unique_ptr<sampling::ConstraintMasks> masks;
  {
    MutexLock lock(&constraints_mu_);
    masks = std::move(constraint_masks_);
  }
  masks.reset();  // joins the compile threads; one that was compiling reports first (taking constraints_mu_)
}

// The one place a request's constraint becomes logits masks.
Result<Executor::ConstraintTicket> LocalExecutor::PrepareConstraints(const RequestParams& params, int n,
                                                                     ConstraintReady on_ready) {
  const sampling::OutputConstraint& constraint = params.constraint;
  if (!constraint.grammar && !constraint.scripted_tokens) return ConstraintTicket{};
  if (constraint.grammar && constraint.scripted_tokens)
    return Status::InvalidArgument("constraint: a grammar and scripted tokens cannot be combined");
  // Held across Prepare, so a compile that finishes at once finds its entry here.
  MutexLock lock(&constraints_mu_);
  if (!constraint_masks_) return Status::Unavailable("engine: shutting down");
  if (constraint.grammar && !constraint_masks_->can_compile())
    return Status::InvalidArgument("constraint: grammars need the engine's tokenizer or a constraint compiler");
  const uint64_t handle = next_constraint_++;
  PreparedMasks& entry = constraints_[handle];
  entry.n = n;
  entry.prepared = constraint_masks_->Prepare(constraint, [this, handle, on_ready = std::move(on_ready)] {
    on_ready(handle, MakePreparedMasks(handle));
  });
  // A grammar always reports through on_ready, even when its compile thread has already finished: its
  // outcome (masks or a compile error that fails the request) then reaches the scheduler one way only.
  if (constraint.grammar) return ConstraintTicket{handle, false};
  auto masks = entry.prepared->MakeMasks(n);
  if (!masks.ok()) {
    constraints_.erase(handle);
    return masks.status();
  }
  entry.masks = std::move(masks).value();
  return ConstraintTicket{handle, true};
}

Status LocalExecutor::MakePreparedMasks(uint64_t handle) {
  MutexLock lock(&constraints_mu_);
  auto it = constraints_.find(handle);
  if (it == constraints_.end()) return Status::Ok();  // dropped meanwhile: nobody waits for it
  auto masks = it->second.prepared->MakeMasks(it->second.n);
  if (!masks.ok()) {
    constraints_.erase(it);
    return masks.status();  // "constraint: ..." (sampling/constraint_masks.h)
  }
  it->second.masks = std::move(masks).value();
  return Status::Ok();
}

void LocalExecutor::DropConstraints(uint64_t handle) {
  MutexLock lock(&constraints_mu_);
  constraints_.erase(handle);
}

std::unique_ptr<sampling::LogitsMask> LocalExecutor::TakeMask(uint64_t handle, int index) {
  if (handle == 0) return nullptr;
  MutexLock lock(&constraints_mu_);
  auto it = constraints_.find(handle);
  if (it == constraints_.end()) return nullptr;
  std::vector<std::unique_ptr<sampling::LogitsMask>>& masks = it->second.masks;
  if (index >= static_cast<int>(masks.size())) return nullptr;
  auto mask = std::move(masks[static_cast<size_t>(index)]);
  if (std::all_of(masks.begin(), masks.end(), [](const auto& m) { return m == nullptr; })) constraints_.erase(it);
  return mask;
}

std::vector<std::span<uint8_t>> LocalExecutor::PrefixBlock(int32_t block) {
  std::vector<std::span<uint8_t>> bytes;
  for (size_t g = 0; g < spec_.groups.size(); ++g) {
    if (spec_.groups[g].retention != kvcache::CacheRetention::kPrefix) continue;
    bytes.emplace_back(pools_.group(g).block(block), static_cast<size_t>(spec_.groups[g].bytes_per_block));
  }
  return bytes;
}

void LocalExecutor::MirrorTables(const PlannedChunk& c, model::SequenceState* state) {
  for (size_t g = 0; g < spec_.groups.size(); ++g) {
    const bool prefix = spec_.groups[g].retention == kvcache::CacheRetention::kPrefix;
    state->block_table(g) = prefix ? c.prefix_table : c.window_table;
  }
}

int64_t LocalExecutor::ClassBlockBytes(bool window) const {
  int64_t bytes = 0;
  for (const kvcache::CacheGroupSpec& g : spec_.groups)
    if ((g.retention == kvcache::CacheRetention::kWindow) == window) bytes += g.bytes_per_block;
  return bytes;
}

Result<std::shared_ptr<const SequenceSnapshot>> LocalExecutor::TakeSnapshot(const SnapshotTake& take, bool rewind) {
  auto slot = slots_.find(take.id);
  const model::SequenceState* state = slot == slots_.end() ? nullptr : slot->second.state.get();
  if (state == nullptr || state->num_tokens() != take.num_tokens + (rewind ? 1 : 0))
    return Status::Internal("engine: a snapshot's sequence has no model state at its position");
  auto snap = std::make_shared<SequenceSnapshot>();
  if (rewind) {
    // A copy goes back, the sequence itself goes on.
    DI_ASSIGN_OR_RETURN(std::unique_ptr<model::SequenceState> copy, model_->Fork(*state));
    DI_RETURN_IF_ERROR(model_->Truncate(*copy, take.num_tokens));
    DI_ASSIGN_OR_RETURN(snap->state, model_->ExportState(*copy));
  } else {
    DI_ASSIGN_OR_RETURN(snap->state, model_->ExportState(*state));
  }
  snap->num_tokens = take.num_tokens;
  snap->prefix_first = take.prefix_first;
  snap->prefix_count = static_cast<int64_t>(take.prefix_blocks.size());
  snap->window_first = take.window_first;
  snap->window_count = static_cast<int64_t>(take.window_blocks.size());
  snap->blocks.reserve(static_cast<size_t>(snap->prefix_count * ClassBlockBytes(false) +
                                           snap->window_count * ClassBlockBytes(true)));
  for (bool window : {false, true}) {
    for (int32_t block : window ? take.window_blocks : take.prefix_blocks) {
      for (size_t g = 0; g < spec_.groups.size(); ++g) {
        if ((spec_.groups[g].retention == kvcache::CacheRetention::kWindow) != window) continue;
        if (!pools_.group(g).contains(block)) return Status::Internal("engine: a snapshot's block is not in the pool");
        const uint8_t* bytes = pools_.group(g).block(block);
        snap->blocks.insert(snap->blocks.end(), bytes, bytes + spec_.groups[g].bytes_per_block);
      }
    }
  }
  return std::shared_ptr<const SequenceSnapshot>(std::move(snap));
}

Status LocalExecutor::ResumeFromSnapshot(const PlannedChunk& c, model::SequenceState* state) {
  const SequenceSnapshot* snap = c.setup->snapshot.get();
  if (snap == nullptr || snap->num_tokens != c.setup->position || c.start != snap->num_tokens)
    return Status::Internal("engine: a snapshot setup does not match its chunk");
  const int64_t expected = snap->prefix_count * ClassBlockBytes(false) + snap->window_count * ClassBlockBytes(true);
  if (static_cast<int64_t>(snap->blocks.size()) != expected)
    return Status::Internal("engine: a snapshot's blocks do not match the cache layout");
  MirrorTables(c, state);
  const uint8_t* from = snap->blocks.data();
  for (bool window : {false, true}) {
    const std::vector<int32_t>& table = window ? c.window_table : c.prefix_table;
    const int64_t first = window ? snap->window_first : snap->prefix_first;
    const int64_t count = window ? snap->window_count : snap->prefix_count;
    for (int64_t i = first; i < first + count; ++i) {
      const int32_t block = i >= 0 && i < static_cast<int64_t>(table.size()) ? table[static_cast<size_t>(i)] : -1;
      for (size_t g = 0; g < spec_.groups.size(); ++g) {
        if ((spec_.groups[g].retention == kvcache::CacheRetention::kWindow) != window) continue;
        if (!pools_.group(g).contains(block))
          return Status::Internal("engine: a snapshot's block has no block in the sequence's table");
        std::copy_n(from, spec_.groups[g].bytes_per_block, pools_.group(g).block(block));
        from += spec_.groups[g].bytes_per_block;
      }
    }
  }
  return model_->ImportState(*state, snap->state);
}

Status LocalExecutor::Setup(const PlannedChunk& c, Slot& slot) {
  slot.state = model_->NewSequence();
  if (c.setup->kind == StateSetup::Kind::kSnapshot) {
    Status st = ResumeFromSnapshot(c, slot.state.get());
    if (!st.ok()) slot.state.reset();
    return st;
  }
  if (c.setup->kind == StateSetup::Kind::kFresh || c.setup->position == 0) return Status::Ok();
  MirrorTables(c, slot.state.get());
  const model::RestoreFrom from = c.setup->source == RestoreSource::kWindowBlocks ? model::RestoreFrom::kWindowBlocks
                                                                                  : model::RestoreFrom::kNoWindow;
  Status st = model_->RestoreAt(*slot.state, c.setup->position, from, pools_);
  if (!st.ok()) slot.state.reset();
  return st;
}

StepResult LocalExecutor::Execute(const StepPlan& plan) {
  StepResult result;
  // Snapshots first: their sequences' states go with `finished` below, and their blocks may be written
  // by this step's copies and chunks.
  for (const SnapshotTake& take : plan.snapshots) {
    auto snap = TakeSnapshot(take, false);
    result.snapshots.emplace_back(take.key, snap.ok() ? std::move(snap).value() : nullptr);
  }
  for (const SamplingSetup& setup : plan.new_samplers) {
    Slot& slot = slots_[setup.id];
    slot.sampling = setup;
    slot.has_sampling = true;
    if (setup.use_counts && !setup.prompt.empty()) slot.counts.SetPrompt(setup.prompt);
    if (drafter_ && !setup.prompt.empty()) {
      slot.history = setup.prompt;
      slot.prompt_tokens = static_cast<int64_t>(setup.prompt.size());
    }
    slot.mask = TakeMask(setup.constraint, setup.index);
    if (slot.mask) slot.allowed.Resize(vocab_size_);
  }
  std::vector<SequenceResult> failed;  // setups that failed
  for (const ForkSetup& f : plan.forks) {
    auto parent = slots_.find(f.parent);
    Status st = parent == slots_.end() || !parent->second.state
                    ? Status::Internal("engine: a fork's parent has no model state")
                    : Status::Ok();
    if (st.ok()) {
      auto state = model_->Fork(*parent->second.state);
      if (state.ok()) slots_[f.child].state = std::move(state).value();
      else st = state.status();
    }
    if (!st.ok()) failed.push_back({.id = f.child, .status = st, .not_run = true});
  }
  for (const BlockCopy& copy : plan.copies) {
    for (size_t g = 0; g < spec_.groups.size(); ++g) {
      const bool window = spec_.groups[g].retention == kvcache::CacheRetention::kWindow;
      if (window == copy.window) pools_.group(g).CopyBlock(copy.from, copy.to);
    }
  }
  for (SeqId id : plan.dropped) {
    auto it = slots_.find(id);
    if (it != slots_.end()) it->second.state.reset();
  }
  for (SeqId id : plan.finished) {
    auto it = slots_.find(id);
    if (it == slots_.end()) continue;
    if (drafter_ && !it->second.history.empty()) drafter_->Finished(DraftInputFor(id, it->second));
    slots_.erase(it);
  }
  if (!plan.released_constraints.empty()) {
    MutexLock lock(&constraints_mu_);
    for (uint64_t handle : plan.released_constraints) constraints_.erase(handle);
  }

  chunks_.clear();
  std::vector<const PlannedChunk*> ran;
  for (const PlannedChunk& c : plan.chunks) {
    Slot& slot = slots_[c.id];
    if (std::any_of(failed.begin(), failed.end(), [&](const SequenceResult& f) { return f.id == c.id; })) continue;
    if (c.setup) {
      Status st = Setup(c, slot);
      if (!st.ok()) {
        failed.push_back({.id = c.id, .status = st, .not_run = true});
        continue;
      }
    }
    if (!slot.state) {
      failed.push_back(
          {.id = c.id, .status = Status::Internal("engine: a chunk's sequence has no model state"), .not_run = true});
      continue;
    }
    MirrorTables(c, slot.state.get());
    model::SequenceChunk chunk;
    chunk.state = slot.state.get();
    chunk.tokens = c.tokens;
    chunk.logits = c.logits ? model::LogitsWanted::kLast : model::LogitsWanted::kNone;
    if (c.verify > 0) {
      if (!c.logits || c.verify + 1 != c.end - c.start || c.samplers.size() != 1 ||
          c.verify > static_cast<int64_t>(c.tokens.size())) {
        failed.push_back({.id = c.id, .status = Status::Internal("engine: a malformed verify chunk"), .not_run = true});
        continue;
      }
      chunk.logits = model::LogitsWanted::kAll;
    } else if (c.prompt_logprobs >= 0 && !c.state_only) {
      chunk.logits = model::LogitsWanted::kAll;
    }
    chunk.state_only = c.state_only;
    chunks_.push_back(chunk);
    ran.push_back(&c);
  }

  // The rows this step samples; the masks of their tokens are computed while the forward pass runs.
  std::vector<Row> rows;
  if (!plan.discard_logits) {
    for (size_t k = 0; k < ran.size(); ++k) {
      const PlannedChunk& c = *ran[k];
      if (!c.logits) continue;
      for (size_t i = 0; i < c.samplers.size(); ++i) {
        Row row;
        row.id = c.samplers[i];
        row.slot = &slots_[row.id];
        row.chunk = k;
        row.verify = c.verify;
        row.first_position = c.end - c.verify;
        row.position = row.first_position;
        row.owns_state = i == 0;
        if (c.verify > 0) row.draft = c.tokens.data() + (c.tokens.size() - static_cast<size_t>(c.verify));
        row.draft_tokens = c.draft_tokens;
        // Outputs born from this row start from their parent's penalty counts (and history).
        if (i > 0) {
          const Slot& parent = slots_[c.id];
          row.slot->counts = parent.counts;
          if (drafter_) {
            row.slot->history = parent.history;
            row.slot->prompt_tokens = parent.prompt_tokens;
          }
        }
        rows.push_back(std::move(row));
      }
    }
  }
  const bool any_mask = std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.slot->mask != nullptr; });
  if (any_mask) mask_filler_.Start([this, &rows] { FillMasks(rows); });

  if (!chunks_.empty()) {
    result.forward_start_nanos = NowNanos();
    result.status = model_->Forward(chunks_, pools_, &forward_out_);
    result.forward_end_nanos = NowNanos();
  } else if (forward_every_step_) {
    result.status = model_->Forward(chunks_, pools_, &forward_out_);  // joins the group's expert exchanges
  }
  if (any_mask) mask_filler_.Wait();
  result.sequences = std::move(failed);
  for (const SnapshotTake& take : plan.prompt_snapshots) {
    auto snap = result.status.ok() ? TakeSnapshot(take, take.rewind) : Result<std::shared_ptr<const SequenceSnapshot>>(result.status);
    result.snapshots.emplace_back(take.key, snap.ok() ? std::move(snap).value() : nullptr);
  }
  if (!result.status.ok()) return result;
  for (size_t k = 0; k < ran.size(); ++k) {
    const PlannedChunk& c = *ran[k];
    if (c.verify == 0 && c.prompt_logprobs >= 0 && !c.state_only) result.prompt_logprobs.push_back(PromptLogprobs(c, k));
  }
  for (Row& row : rows) {
    // kAll gives every position's row; the first verified one is the pending token's.
    row.first_row = forward_out_.num_rows[row.chunk] - 1 - row.verify;
    row.logits = forward_out_.row(row.chunk, row.first_row);
  }
  Sample(rows);
  std::vector<size_t> continuing;
  for (size_t i = 0; i < rows.size(); ++i) {
    Row& row = rows[i];
    if (!row.status.ok()) continue;
    Accept(row);
    if (Continues(row)) continuing.push_back(i);
  }
  if (!continuing.empty()) Verify(rows, continuing);
  // A verify chunk's state keeps the positions up to its last accepted token's.
  for (Row& row : rows) {
    if (row.verify == 0 || !row.status.ok()) continue;
    const PlannedChunk& c = *ran[row.chunk];
    const int64_t keep = c.start + static_cast<int64_t>(row.tokens.size());
    if (keep < c.end) {
      Status st = model_->Truncate(*row.slot->state, keep);
      if (!st.ok()) row.status = st;
    }
  }
  std::vector<SequenceResult> sampled;
  for (Row& row : rows) {
    SequenceResult r;
    r.id = row.id;
    if (!row.status.ok()) {
      r.status = row.status;
    } else {
      r.tokens = std::move(row.tokens);
      r.terminated = row.terminated;
    }
    sampled.push_back(std::move(r));
  }
  if (drafter_) Propose(rows, &sampled);
  for (SequenceResult& r : sampled) result.sequences.push_back(std::move(r));
  return result;
}

void LocalExecutor::Accept(Row& row) {
  Slot& slot = *row.slot;
  const int32_t id = row.token.id;
  ++slot.generated;
  row.tokens.push_back(std::move(row.token));
  row.token = {};
  const std::vector<int32_t>& ending = slot.sampling.ending_ids;
  if (std::find(ending.begin(), ending.end(), id) != ending.end()) {
    row.ended = true;
    return;
  }
  if (slot.sampling.use_counts) slot.counts.AddOutput(id);
  if (slot.mask) {
    slot.mask_filled = false;
    Status accepted = slot.mask->Accept(id);
    if (!accepted.ok()) {
      row.status = accepted;
      return;
    }
    row.terminated = slot.mask->Terminated();
  }
}

bool LocalExecutor::Continues(const Row& row) const {
  const auto verified = static_cast<int64_t>(row.tokens.size());  // positions sampled so far
  return row.status.ok() && !row.ended && !row.terminated && verified <= row.verify &&
         row.tokens.back().id == row.draft[verified - 1];
}

// Rows without a mask continue in parallel; a mask is filled and advanced on this thread (the helper
// thread has finished), one row after another.
void LocalExecutor::Verify(std::vector<Row>& rows, const std::vector<size_t>& continuing) {
  std::vector<size_t> parallel;
  for (size_t i : continuing) {
    if (rows[i].slot->mask) {
      thread_local sampling::Sampler sampler;
      ContinueVerify(rows[i], sampler);
    } else {
      parallel.push_back(i);
    }
  }
  ThreadPool::Shared().ParallelFor(
      static_cast<int64_t>(parallel.size()),
      [&](int64_t begin, int64_t end) {
        thread_local sampling::Sampler sampler;
        for (int64_t i = begin; i < end; ++i) ContinueVerify(rows[parallel[static_cast<size_t>(i)]], sampler);
      },
      1);
}

void LocalExecutor::ContinueVerify(Row& row, sampling::Sampler& sampler) {
  while (Continues(row)) {
    const auto i = static_cast<int64_t>(row.tokens.size());
    Slot& s = *row.slot;
    if (s.mask) {
      s.mask_status = s.mask->FillAllowed(&s.allowed, &s.all_allowed);
      s.mask_filled = true;
    }
    row.logits = forward_out_.row(row.chunk, row.first_row + i);
    row.position = row.first_position + i;
    SampleOne(row, sampler);
    if (!row.status.ok()) return;
    Accept(row);
  }
}

DraftInput LocalExecutor::DraftInputFor(SeqId id, const Slot& slot) const {
  return {.sequence = id,
          .tokens = slot.history,
          .prompt_tokens = slot.prompt_tokens,
          .seed = slot.sampling.params.greedy() ? 0 : slot.sampling.seed,  // greedy draws nothing
          .index = slot.sampling.index,
          .max_tokens = draft_tokens_};
}

// Draft steps write the window groups at positions num_tokens() onward: as far as the blocks in the tables
// reach (the scheduler allocates lookahead blocks for them), and inside the model's positions.
int64_t LocalExecutor::DraftRoom(const model::SequenceState& state) const {
  const int64_t n = state.num_tokens();
  int64_t room = model_->info().max_position_embeddings > 0 ? model_->info().max_position_embeddings - n : INT64_MAX;
  for (size_t g = 0; g < spec_.groups.size(); ++g) {
    if (spec_.groups[g].retention != kvcache::CacheRetention::kWindow) continue;
    const std::vector<int32_t>& table = state.block_table(g);
    int64_t blocks = static_cast<int64_t>(table.size());
    while (blocks > 0 && table[static_cast<size_t>(blocks - 1)] == kvcache::kNoBlock) --blocks;
    room = std::min(room, blocks * kvcache::kBlockTokens - n);
  }
  return std::max<int64_t>(room, 0);
}

void LocalExecutor::Propose(std::vector<Row>& rows, std::vector<SequenceResult>* results) {
  std::vector<DraftInput> inputs;
  std::vector<size_t> of;
  for (size_t i = 0; i < rows.size(); ++i) {
    Row& row = rows[i];
    SequenceResult& r = (*results)[i];
    if (!r.status.ok()) continue;
    for (const sampling::SampledToken& t : r.tokens) row.slot->history.push_back(t.id);
    if (row.ended || r.terminated || row.slot->history.empty() || row.draft_tokens == 0) continue;
    inputs.push_back(DraftInputFor(row.id, *row.slot));
    if (row.draft_tokens > 0) inputs.back().max_tokens = static_cast<int>(std::min<int64_t>(row.draft_tokens, draft_tokens_));
    if (drafter_->uses_model() && row.owns_state && row.slot->state) {
      inputs.back().state = row.slot->state.get();
      inputs.back().room = DraftRoom(*row.slot->state);
    }
    of.push_back(i);
  }
  if (inputs.empty()) return;
  std::vector<std::vector<int32_t>> drafts;
  drafter_->Propose(inputs, &drafts);
  for (size_t j = 0; j < of.size() && j < drafts.size(); ++j) (*results)[of[j]].draft = std::move(drafts[j]);
  if (const std::vector<std::vector<float>>* survival = drafter_->survival()) {
    for (size_t j = 0; j < of.size() && j < survival->size(); ++j) (*results)[of[j]].draft_survival = (*survival)[j];
  }
}

PromptLogprobsResult LocalExecutor::PromptLogprobs(const PlannedChunk& c, size_t chunk) const {
  PromptLogprobsResult out;
  out.id = c.id;
  out.first_position = c.start + 1;
  const int64_t rows = forward_out_.num_rows[chunk];
  for (int64_t i = 0; i < rows; ++i) {
    // Row i is position start + i's: it predicts the token at start + i + 1.
    const size_t next = static_cast<size_t>(i + 1);
    const int32_t id = next < c.tokens.size() ? c.tokens[next] : c.next_prompt_token;
    if (id < 0 || id >= vocab_size_) break;
    sampling::SampledToken token;
    token.id = id;
    sampling::RawLogprobs(std::span<const float>(forward_out_.row(chunk, i), static_cast<size_t>(vocab_size_)), id,
                          c.prompt_logprobs, &token);
    out.tokens.push_back(std::move(token));
  }
  return out;
}

void LocalExecutor::FillMasks(const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    Slot& s = *row.slot;
    if (!s.mask || s.mask_filled) continue;
    s.mask_status = s.mask->FillAllowed(&s.allowed, &s.all_allowed);
    s.mask_filled = true;
  }
}

// Rows are independent and each draw is keyed by its sequence and position, so the split over threads
// changes nothing. The model's pool is idle between forward passes.
void LocalExecutor::Sample(std::vector<Row>& rows) {
  ThreadPool::Shared().ParallelFor(
      static_cast<int64_t>(rows.size()),
      [&](int64_t begin, int64_t end) {
        thread_local sampling::Sampler sampler;
        for (int64_t i = begin; i < end; ++i) SampleOne(rows[static_cast<size_t>(i)], sampler);
      },
      1);
}

void LocalExecutor::SampleOne(Row& row, sampling::Sampler& sampler) {
  Slot& s = *row.slot;
  const sampling::SamplingParams& sp = s.sampling.params;
  if (s.mask && !s.mask_status.ok()) {
    row.status = s.mask_status;
    return;
  }
  std::span<const int32_t> banned;
  if (s.generated < sp.min_tokens) banned = s.sampling.ending_ids;
  sampling::SampleInputs in;
  in.params = &sp;
  in.draw = {.seed = s.sampling.seed,
             .stream = sp.random_stream,
             .sequence = static_cast<uint32_t>(s.sampling.index),
             .position = row.position};
  in.counts = s.sampling.use_counts ? &s.counts : nullptr;
  in.allowed = s.mask && !s.all_allowed ? &s.allowed : nullptr;
  in.banned = banned;
  // Rejection sampling: the draft token for this position (positions before the bonus one).
  const auto verified = static_cast<int64_t>(row.tokens.size());
  if (rejection_sampling_ && verified < row.verify) in.draft = row.draft[verified];
  auto sampled = sampler.Sample(std::span<const float>(row.logits, static_cast<size_t>(vocab_size_)), in);
  if (sampled.ok()) row.token = std::move(sampled).value();
  else row.status = sampled.status();
}

}  // namespace deepinfer::engine
