#include "sampling/constraint_masks.h"

#include <string>
#include <utility>

#include "core/sched.h"
#include "grammar/tool_calls.h"
#include "sampling/grammar_mask.h"

namespace deepinfer::sampling {

ConstraintCompiler::ConstraintCompiler(const tokenizer::Tokenizer* tokenizer, size_t cache_capacity)
    : tokenizer_(tokenizer), cache_(cache_capacity) {}

ConstraintCompiler::ConstraintCompiler(std::shared_ptr<const grammar::TokenIndex> vocab, size_t cache_capacity)
    : vocab_(std::move(vocab)), cache_(cache_capacity) {}

ConstraintCompiler::~ConstraintCompiler() = default;

Result<std::shared_ptr<const grammar::TokenIndex>> ConstraintCompiler::Vocab() {
  std::call_once(vocab_once_, [this] {
    if (vocab_) return;
    if (!tokenizer_) {
      vocab_status_ = Status::FailedPrecondition("constraints: no vocabulary (neither a tokenizer nor a token index)");
      return;
    }
    // Stop ids: the tokenizer's end-of-sentence token, the engine's default end of an output.
    grammar::TokenIndex::Options options;
    options.markers = {std::string(grammar::kDsmlMarkerToken)};
    auto vocab = grammar::TokenIndex::FromTokenizer(*tokenizer_, options);
    if (vocab.ok()) {
      vocab_ = *vocab;
    } else {
      vocab_status_ = vocab.status();
    }
  });
  if (!vocab_) return vocab_status_;
  return vocab_;
}

Result<std::shared_ptr<const grammar::BoundGrammar>> ConstraintCompiler::Compile(const grammar::ConstraintSpec& spec) {
  DI_ASSIGN_OR_RETURN(auto vocab, Vocab());
  return cache_.Get(spec, std::move(vocab));
}

size_t ConstraintCompiler::cached() const { return cache_.size(); }
size_t ConstraintCompiler::hits() const { return cache_.hits(); }

Result<std::vector<std::unique_ptr<LogitsMask>>> PreparedConstraint::MakeMasks(int n) const {
  if (!ready()) return Status::FailedPrecondition("constraint: not compiled yet");
  DI_RETURN_IF_ERROR(status_);
  std::vector<std::unique_ptr<LogitsMask>> masks;
  masks.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    if (constraint_.scripted_tokens) {
      masks.push_back(std::make_unique<ScriptedTokensMask>(*constraint_.scripted_tokens));
    } else {
      masks.push_back(std::make_unique<GrammarLogitsMask>(grammar_, constraint_.grammar_start_after_token));
    }
  }
  return masks;
}

ConstraintMasks::ConstraintMasks(std::shared_ptr<ConstraintCompiler> compiler, int compile_threads)
    : compiler_(std::move(compiler)), max_threads_(compile_threads < 1 ? 1 : compile_threads) {}

ConstraintMasks::~ConstraintMasks() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

std::shared_ptr<PreparedConstraint> ConstraintMasks::Prepare(const OutputConstraint& constraint,
                                                            std::function<void()> on_ready) {
  if (constraint.empty()) return nullptr;
  auto prepared = std::make_shared<PreparedConstraint>();
  prepared->constraint_ = constraint;
  if (constraint.scripted_tokens || !compiler_) {
    if (!constraint.scripted_tokens)
      prepared->status_ = Status::FailedPrecondition("constraint: grammars need the engine's tokenizer");
    prepared->ready_.store(true, std::memory_order_release);
    return prepared;
  }
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back({prepared, std::move(on_ready)});
  if (idle_ == 0 && static_cast<int>(threads_.size()) < max_threads_) {
    threads_.emplace_back([this] {
      SetCurrentThreadName("di-compile");
      CompileLoop();
    });
  } else {
    cv_.notify_one();
  }
  return prepared;
}

void ConstraintMasks::CompileLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    ++idle_;
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (stopping_) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    PreparedConstraint& p = *job.prepared;
    auto grammar = compiler_->Compile(*p.constraint_.grammar);
    if (grammar.ok()) {
      p.grammar_ = std::move(grammar).value();
    } else {
      p.status_ = Status(grammar.status().code(), "constraint: " + grammar.status().message());
    }
    p.ready_.store(true, std::memory_order_release);
    if (job.on_ready) job.on_ready();
    lock.lock();
  }
}

}  // namespace deepinfer::sampling
