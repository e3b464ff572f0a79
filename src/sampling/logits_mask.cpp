#include "sampling/logits_mask.h"

#include <bit>
#include <string>

namespace deepinfer::sampling {

void TokenBitmask::AllowAll() {
  std::fill(words_.begin(), words_.end(), ~0u);
  if (vocab_size_ % 32 && !words_.empty()) words_.back() = (1u << (vocab_size_ % 32)) - 1;
}

int64_t TokenBitmask::CountAllowed() const {
  int64_t n = 0;
  for (uint32_t w : words_) n += std::popcount(w);
  return n;
}

Status ScriptedTokensMask::FillAllowed(TokenBitmask* allowed, bool* all_allowed) {
  *all_allowed = false;
  if (next_ >= script_.size()) return Status::FailedPrecondition("scripted output: the script is complete");
  const int32_t id = script_[next_];
  if (id < 0 || id >= allowed->vocab_size())
    return Status::InvalidArgument("scripted output: token id " + std::to_string(id) + " is not in the vocabulary");
  allowed->DisallowAll();
  allowed->Allow(id);
  return Status::Ok();
}

Status ScriptedTokensMask::Accept(int32_t token) {
  if (next_ >= script_.size() || token != script_[next_])
    return Status::FailedPrecondition("scripted output: token " + std::to_string(token) + " is not the script's next");
  ++next_;
  return Status::Ok();
}

Status ScriptedTokensMask::Rollback(int n) {
  if (n < 0 || static_cast<size_t>(n) > next_) return Status::OutOfRange("scripted output: cannot roll back that far");
  next_ -= static_cast<size_t>(n);
  return Status::Ok();
}

}  // namespace deepinfer::sampling
