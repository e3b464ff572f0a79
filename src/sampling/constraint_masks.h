// From a request's OutputConstraint (plain data) to the LogitsMasks its outputs run under.
//
// ConstraintCompiler compiles grammar specs against one vocabulary through one cache of compiled grammars.
// The server compiles a request's spec before queuing it (an invalid schema is a 400, not a failed
// generation) and the engine compiles it again to make the masks: with one compiler shared by both, the
// second compile is a cache hit.
//
// ConstraintMasks is the engine's side: Prepare starts a grammar's compile on a small pool of compile
// threads of its own (never on the step thread, never a thread per request), the request waits until its
// PreparedConstraint is ready, and MakeMasks then makes one mask per output.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/status.h"
#include "grammar/constraint.h"
#include "grammar/token_index.h"
#include "sampling/logits_mask.h"
#include "sampling/output_constraint.h"

namespace deepinfer::tokenizer {
class Tokenizer;
}

namespace deepinfer::sampling {

class ConstraintCompiler {
 public:
  // The vocabulary of `tokenizer` (not owned, must outlive the compiler), indexed on first use, with the
  // tool-call block's `｜DSML｜` as a marker (grammar/tool_calls.h).
  explicit ConstraintCompiler(const tokenizer::Tokenizer* tokenizer, size_t cache_capacity = 256);
  // A vocabulary given as is (a model served without a tokenizer, tests).
  explicit ConstraintCompiler(std::shared_ptr<const grammar::TokenIndex> vocab, size_t cache_capacity = 256);
  ~ConstraintCompiler();

  // Thread-safe. An error when the tokenizer's vocabulary cannot be indexed (the same one every time).
  Result<std::shared_ptr<const grammar::TokenIndex>> Vocab();
  // Thread-safe; compiles on the calling thread unless the grammar is cached. Errors: the vocabulary's, or
  // the spec's (invalid, unsupported, over a compile limit).
  Result<std::shared_ptr<const grammar::BoundGrammar>> Compile(const grammar::ConstraintSpec& spec);
  // Compiled grammars held, and lookups answered from them.
  size_t cached() const;
  size_t hits() const;

 private:
  const tokenizer::Tokenizer* tokenizer_ = nullptr;
  std::once_flag vocab_once_;
  std::shared_ptr<const grammar::TokenIndex> vocab_;
  Status vocab_status_;
  grammar::ConstraintCache cache_;
};

// A request's constraint on its way to masks. Ready once its grammar has compiled or failed to (at once
// for a script); then MakeMasks, from any one thread.
class PreparedConstraint {
 public:
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  // Masks for outputs 0..n-1, each with its own state; the compile's error if the grammar did not compile.
  // Only once ready().
  Result<std::vector<std::unique_ptr<LogitsMask>>> MakeMasks(int n) const;

 private:
  friend class ConstraintMasks;
  OutputConstraint constraint_;
  std::shared_ptr<const grammar::BoundGrammar> grammar_;  // written before ready_ is set
  Status status_;
  std::atomic<bool> ready_{false};
};

class ConstraintMasks {
 public:
  // `compiler` may be null: then a grammar cannot be prepared (can_compile() is false).
  explicit ConstraintMasks(std::shared_ptr<ConstraintCompiler> compiler, int compile_threads = 2);
  // Stops the compile threads: a compile under way finishes (and calls its on_ready), queued ones are dropped.
  ~ConstraintMasks();
  ConstraintMasks(const ConstraintMasks&) = delete;
  ConstraintMasks& operator=(const ConstraintMasks&) = delete;

  bool can_compile() const { return compiler_ != nullptr; }
  // Null for an empty constraint. A script is ready on return. A grammar is queued for a compile thread,
  // which marks it ready and then calls `on_ready` (it must not block: it wakes whoever waits); Prepare
  // never calls it itself, so its caller may hold a lock that on_ready takes. Without a compiler a grammar
  // is ready on return, with an error.
  std::shared_ptr<PreparedConstraint> Prepare(const OutputConstraint& constraint, std::function<void()> on_ready);

 private:
  struct Job {
    std::shared_ptr<PreparedConstraint> prepared;
    std::function<void()> on_ready;
  };
  void CompileLoop();

  std::shared_ptr<ConstraintCompiler> compiler_;
  const int max_threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  int idle_ = 0;
  std::vector<std::thread> threads_;  // started as compiles arrive, up to max_threads_
};

}  // namespace deepinfer::sampling
