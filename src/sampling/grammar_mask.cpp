#include "sampling/grammar_mask.h"

#include <algorithm>
#include <cstring>

namespace deepinfer::sampling {

GrammarLogitsMask::GrammarLogitsMask(std::shared_ptr<const grammar::BoundGrammar> grammar, int32_t start_after_token)
    : matcher_(std::move(grammar)), start_after_(start_after_token), active_(start_after_token < 0) {}

Status GrammarLogitsMask::FillAllowed(TokenBitmask* allowed, bool* all_allowed) {
  *all_allowed = false;
  if (!active_) {
    *all_allowed = true;
    return Status::Ok();
  }
  const size_t words = matcher_.bound().vocab().words();
  if (allowed->words().size() < words) {
    // The model's logits are narrower than the grammar's mask: fill a full-width copy, then cut.
    std::vector<uint32_t> full(words);
    DI_RETURN_IF_ERROR(matcher_.FillNextTokenBitmask(full.data()));
    std::memcpy(allowed->words().data(), full.data(), allowed->words().size() * 4);
    return Status::Ok();
  }
  std::fill(allowed->words().begin(), allowed->words().end(), 0u);
  return matcher_.FillNextTokenBitmask(allowed->words().data());
}

Status GrammarLogitsMask::Accept(int32_t token) {
  if (!active_) {
    if (token == start_after_) {
      active_ = true;
      kinds_.push_back(1);
    } else {
      kinds_.push_back(0);
    }
    return Status::Ok();
  }
  if (!matcher_.AcceptToken(token)) {
    if (!matcher_.error().ok()) return matcher_.error();
    return Status::FailedPrecondition("token " + std::to_string(token) + " is not allowed by the grammar");
  }
  kinds_.push_back(2);
  return Status::Ok();
}

Status GrammarLogitsMask::Rollback(int n) {
  if (n < 0 || static_cast<size_t>(n) > kinds_.size()) return Status::OutOfRange("rollback past the first token");
  size_t constrained = 0;
  for (int i = 0; i < n; ++i) {
    uint8_t k = kinds_.back();
    kinds_.pop_back();
    if (k == 2) ++constrained;
    if (k == 1) active_ = false;
  }
  matcher_.Rollback(constrained);
  return Status::Ok();
}

}  // namespace deepinfer::sampling
