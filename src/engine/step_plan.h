// What the scheduler and the executor exchange each step, and nothing else: the scheduler decides a
// StepPlan (which sequences compute which positions, where their model state comes from, which blocks
// they use), the executor runs it and answers with a StepResult (the tokens each sampling sequence
// accepted). Both are plain values: no pointers into either side's state and no model types, so an
// executor in another process can take the plan as bytes. Sequences are named by SeqId, which the
// scheduler assigns and the executor uses as the key of its per-sequence state.
//
// The scheduler's files include this header and never the model's (not even through other headers); the
// executor's include this header and never the scheduler's (the ctest `engine_scheduler_has_no_model`
// checks both).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "core/status.h"
#include "kvcache/sequence_snapshot.h"
#include "sampling/params.h"
#include "sampling/sampler.h"

namespace deepinfer::engine {

using SeqId = uint64_t;

// Where a restored sequence's window state comes from (the model's RestoreFrom, as plain data).
enum class RestoreSource : uint8_t {
  kWindowBlocks,  // the cached window blocks before the position: bit-exact
  kNoWindow,      // none: the model starts its window state empty there (a replay rebuilds it)
};

// A finished sequence's snapshot (token-exact continuation): kvcache/sequence_snapshot.h, where the
// persistent tier can store it too.
using kvcache::SequenceSnapshot;

// How a sequence gets the model state its chunk continues from, when it has none yet (or a new one
// replaces what it had).
struct StateSetup {
  enum class Kind : uint8_t {
    kFresh,     // a new sequence at position 0
    kRestore,   // a new sequence restored at `position` (a block boundary) from its prefix blocks
    kSnapshot,  // a new sequence at `position` = snapshot->num_tokens: its full prefix blocks attached, the
                // snapshot's blocks copied into its fresh ones at the same indices, its state imported
  };
  Kind kind = Kind::kFresh;
  int64_t position = 0;
  RestoreSource source = RestoreSource::kWindowBlocks;
  std::shared_ptr<const SequenceSnapshot> snapshot;  // kSnapshot
};

// A snapshot to make: of a finished sequence before anything else in the step changes its blocks or
// state (StepPlan::snapshots), or of a sequence whose chunk ends its prompt, right after the forward pass,
// at the position before the prompt's last (StepPlan::prompt_snapshots), so that the same prompt sent again
// resumes there and computes only its last position, whose logits it samples (or, for a request that asks,
// after the prompt's last position: RequestParams::snapshot_whole_prompt).
struct SnapshotTake {
  SeqId id = 0;       // its model state is still in the executor (the plan's `finished` drops it after)
  uint64_t key = 0;   // the scheduler's name for it (StepResult::snapshots answers under it)
  int64_t num_tokens = 0;  // the state's position, or for a prompt's snapshot one before it
  // A prompt's snapshot one position before the state's (the position its last token is at); false: at the
  // state's position (a finished sequence's, or a whole prompt's: RequestParams::snapshot_whole_prompt).
  bool rewind = false;
  int64_t prefix_first = 0, window_first = 0;
  std::vector<int32_t> prefix_blocks, window_blocks;  // the blocks to copy (held until the step is done)
};

// The executor's per-output sampling state, sent once, the first time an output samples or computes.
struct SamplingSetup {
  SeqId id = 0;
  sampling::SamplingParams params;
  uint64_t seed = 0;
  int index = 0;  // the output's index among the request's n (its random stream)
  // Tokens that end the output (end-of-sequence unless ignore_eos, and the stop token ids): banned while
  // fewer than min_tokens were generated; when sampled they neither count for penalties nor reach the mask.
  std::vector<int32_t> ending_ids;
  bool use_counts = false;      // repetition / presence / frequency penalties
  // The prompt's ids, sent when the penalty counts start from them or a drafter reads them (empty for an
  // output born of another: it takes its parent's at birth).
  std::vector<int32_t> prompt;
  // The request's logits masks, prepared by Executor::PrepareConstraints (0: none).
  uint64_t constraint = 0;
};

// A second output of a request taking a copy of its parent's model state (n > 1), as it stood at the end
// of the previous step.
struct ForkSetup {
  SeqId child = 0;
  SeqId parent = 0;
};

struct BlockCopy {
  bool window = false;  // the window class (else the prefix class)
  int32_t from = -1, to = -1;
};

// One sequence's work in a step.
struct PlannedChunk {
  SeqId id = 0;
  std::optional<StateSetup> setup;  // none: it continues the state it has
  int64_t start = 0, end = 0;       // positions [start, end)
  std::vector<int32_t> tokens;      // the ids at those positions
  bool state_only = false;          // replay: advance the window state, write no prefix block
  bool logits = false;              // the last position's logits are sampled
  // The outputs that sample from that row: this one, and at a birth (the prompt's first token of a
  // request with n > 1) the outputs born from it, each with its own random stream and mask.
  std::vector<SeqId> samplers;
  // Draft tokens at the chunk's end to verify (speculative decoding): the chunk is a decoding output's
  // pending token followed by `verify` draft tokens, every position's logits are computed, and the tokens
  // sampled are kept up to the first one that differs from the draft (the bonus token when none does).
  // The model state then holds the positions up to that token's, and the blocks of the rejected ones are
  // the scheduler's to roll back.
  int64_t verify = 0;
  // The most draft tokens the drafter proposes for the outputs sampling here after this step (-1: K; 0:
  // none, the output decodes plainly next step).
  int64_t draft_tokens = -1;
  // >= 0: also the log probability (and this many alternatives) of each prompt token after the chunk's
  // first position, from the row of the position before it: every position's logits are computed.
  int prompt_logprobs = -1;
  int32_t next_prompt_token = -1;  // the prompt's token at `end` (its row is the chunk's last); -1: none
  // Its block tables by class (entry i: positions [128·i, 128·(i+1)); -1 where it holds none).
  std::vector<int32_t> prefix_table, window_table;
};

struct StepPlan {
  std::vector<SnapshotTake> snapshots;  // made first
  // Made after the forward pass, before anything drafts: a copy of each sequence's state is rolled back
  // one position (as a rejected draft token is) and exported with copies of its blocks.
  std::vector<SnapshotTake> prompt_snapshots;
  std::vector<SamplingSetup> new_samplers;
  std::vector<ForkSetup> forks;    // run first
  std::vector<BlockCopy> copies;   // then these (the partial blocks of forks)
  std::vector<SeqId> dropped;      // then these lose their model state (preempted; sampling state stays)
  std::vector<SeqId> finished;     // and these lose everything
  std::vector<uint64_t> released_constraints;  // handles of finished requests' masks no output took
  std::vector<PlannedChunk> chunks;
  bool discard_logits = false;     // calibration: nothing is sampled
  bool empty() const { return chunks.empty() && snapshots.empty(); }
};

// What one sampling sequence got from a step.
struct SequenceResult {
  SeqId id = 0;
  // Accepted tokens with their logprobs: one, or for a verify chunk 1 to verify + 1 (the model state holds
  // the chunk's start plus that many positions).
  std::vector<sampling::SampledToken> tokens;
  std::vector<int32_t> draft;  // the drafter's proposals for the tokens after these (empty: none)
  // Where the drafter predicts it: per draft token, the probability that it and the ones before it survive.
  std::vector<float> draft_survival;
  Status status;               // not ok: this output failed (its mask, its sampling); no tokens
  bool terminated = false;     // its logits mask accepted its last token and allows no more
  bool not_run = false;        // its chunk did not run: its model state could not be made (status says why)
};

// A chunk's prompt logprobs (PlannedChunk::prompt_logprobs): the tokens at first_position, first_position + 1, ...
struct PromptLogprobsResult {
  SeqId id = 0;
  int64_t first_position = 0;
  std::vector<sampling::SampledToken> tokens;
};

struct StepResult {
  Status status;  // the forward pass; not ok: no chunk of the plan advanced
  std::vector<SequenceResult> sequences;  // one per sampler of the plan, in plan order
  std::vector<PromptLogprobsResult> prompt_logprobs;  // one per chunk that asked and ran
  // One per SnapshotTake of the plan (both kinds): its key and the snapshot (null where it could not be made).
  std::vector<std::pair<uint64_t, std::shared_ptr<const SequenceSnapshot>>> snapshots;
  int64_t forward_start_nanos = 0, forward_end_nanos = 0;  // both 0 when no chunk ran
};

// The bytes of a prefix-class block in each prefix cache group, which the persistent tier reads into and
// is offered from. The executor that holds the pools provides it; valid while the executor lives.
class PrefixBlockBytes {
 public:
  virtual ~PrefixBlockBytes() = default;
  virtual std::vector<std::span<uint8_t>> PrefixBlock(int32_t block) = 0;
};

}  // namespace deepinfer::engine
