// The per-step logits mask hook: a request may carry a stateful constraint (structured output's grammar
// matcher, or a script of forced tokens) that says, before each sampled token, which tokens are allowed.
// The sampler never picks a token outside the mask; the engine feeds the constraint every token sampled.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"

namespace deepinfer::sampling {

// One bit per token id: bit (id % 32) of word id / 32 (xgrammar's and llguidance's layout, so a matcher
// writing theirs writes ours).
class TokenBitmask {
 public:
  TokenBitmask() = default;
  explicit TokenBitmask(int64_t vocab_size) { Resize(vocab_size); }

  void Resize(int64_t vocab_size) {
    vocab_size_ = vocab_size;
    words_.assign(static_cast<size_t>((vocab_size + 31) / 32), 0);
  }
  int64_t vocab_size() const { return vocab_size_; }
  void AllowAll();
  void DisallowAll() { std::fill(words_.begin(), words_.end(), 0u); }
  void Allow(int32_t id) { words_[static_cast<size_t>(id) >> 5] |= 1u << (id & 31); }
  void Disallow(int32_t id) { words_[static_cast<size_t>(id) >> 5] &= ~(1u << (id & 31)); }
  bool allowed(int32_t id) const { return (words_[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u; }
  int64_t CountAllowed() const;
  std::span<uint32_t> words() { return words_; }
  std::span<const uint32_t> words() const { return words_; }

 private:
  int64_t vocab_size_ = 0;
  std::vector<uint32_t> words_;
};

// A constraint on one sequence's output. The engine calls it from one thread at a time, in this order for
// every generated token: FillAllowed (possibly on a worker thread while the step's forward pass runs),
// then Accept with the token sampled under that mask. It is never called after Terminated() is true.
class LogitsMask {
 public:
  virtual ~LogitsMask() = default;

  // Sets `allowed` (sized to the vocabulary, content unspecified on entry) to the tokens allowed next, or
  // sets *all_allowed (then `allowed` is not read): a constraint that is not active yet (thinking before
  // the structured answer) costs nothing. An error ends the sequence with that error.
  virtual Status FillAllowed(TokenBitmask* allowed, bool* all_allowed) = 0;
  // The token sampled under the last mask.
  virtual Status Accept(int32_t token) = 0;
  // Nothing may follow what was accepted: the sequence finishes (reason "stop").
  virtual bool Terminated() const = 0;
  // Forgets the last n accepted tokens (speculative decoding). Optional.
  virtual Status Rollback(int n) {
    (void)n;
    return Status::Unimplemented("this logits mask cannot roll back");
  }
};

// Allows exactly the scripted tokens, one after the other, then terminates: the output is the script
// whatever the model's logits say (the server's tests use it to force real tool calls and reasoning through
// the whole serving path; jump-forward decoding is the same idea).
class ScriptedTokensMask final : public LogitsMask {
 public:
  explicit ScriptedTokensMask(std::vector<int32_t> script) : script_(std::move(script)) {}
  Status FillAllowed(TokenBitmask* allowed, bool* all_allowed) override;
  Status Accept(int32_t token) override;
  bool Terminated() const override { return next_ >= script_.size(); }
  Status Rollback(int n) override;

 private:
  std::vector<int32_t> script_;
  size_t next_ = 0;
};

}  // namespace deepinfer::sampling
