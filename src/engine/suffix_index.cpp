#include "engine/suffix_index.h"

#include <algorithm>

namespace deepinfer::engine {
namespace {

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t SuffixIndex::KeyOf(const int32_t* tokens, int n) {
  uint64_t h = Mix(static_cast<uint64_t>(n));
  for (int i = 0; i < n; ++i) h = Mix(h ^ static_cast<uint32_t>(tokens[i]));
  return h;
}

const SuffixIndex::Sequence* SuffixIndex::Find(uint64_t serial) const {
  if (sequences_.empty() || serial < sequences_.front().serial) return nullptr;
  const auto i = static_cast<size_t>(serial - sequences_.front().serial);  // serials are consecutive
  return i < sequences_.size() ? &sequences_[i] : nullptr;
}

void SuffixIndex::Add(std::span<const int32_t> tokens) {
  if (static_cast<int64_t>(tokens.size()) > kMaxSequenceTokens) tokens = tokens.last(static_cast<size_t>(kMaxSequenceTokens));
  if (static_cast<int64_t>(tokens.size()) <= min_n_) return;  // no n-gram with a token after it
  const int64_t lengths = max_n_ - min_n_ + 1;
  if (static_cast<int64_t>(tokens.size()) * lengths > max_entries_)
    tokens = tokens.last(static_cast<size_t>(max_entries_ / lengths));
  MutexLock lock(&mu_);
  while (!sequences_.empty() && (tokens_ + static_cast<int64_t>(tokens.size())) * lengths > max_entries_) Drop();
  Sequence& s = sequences_.emplace_back();
  s.serial = next_serial_++;
  s.tokens.assign(tokens.begin(), tokens.end());
  tokens_ += static_cast<int64_t>(s.tokens.size());
  const auto size = static_cast<int64_t>(s.tokens.size());
  for (int n = min_n_; n <= max_n_; ++n) {
    for (int64_t j = 0; j + n < size; ++j) latest_[KeyOf(s.tokens.data() + j, n)] = {s.serial, j + n};
  }
}

void SuffixIndex::Drop() {
  const Sequence& s = sequences_.front();
  const auto size = static_cast<int64_t>(s.tokens.size());
  for (int n = min_n_; n <= max_n_; ++n) {
    for (int64_t j = 0; j + n < size; ++j) {
      auto it = latest_.find(KeyOf(s.tokens.data() + j, n));
      if (it != latest_.end() && it->second.serial == s.serial) latest_.erase(it);
    }
  }
  tokens_ -= size;
  sequences_.pop_front();
}

std::vector<int32_t> SuffixIndex::Lookup(std::span<const int32_t> context, int max_tokens, int64_t* matched) const {
  *matched = 0;
  MutexLock lock(&mu_);
  const auto size = static_cast<int64_t>(context.size());
  for (int n = static_cast<int>(std::min<int64_t>(max_n_, size)); n >= min_n_; --n) {
    const int32_t* suffix = context.data() + size - n;
    auto it = latest_.find(KeyOf(suffix, n));
    if (it == latest_.end()) continue;
    const Sequence* s = Find(it->second.serial);
    const int64_t next = it->second.next;
    // A different n-gram with the same key is a miss.
    if (!s || !std::equal(suffix, suffix + n, s->tokens.begin() + (next - n))) continue;
    *matched = n;
    const int64_t to = std::min<int64_t>(static_cast<int64_t>(s->tokens.size()), next + max_tokens);
    return std::vector<int32_t>(s->tokens.begin() + next, s->tokens.begin() + to);
  }
  return {};
}

int64_t SuffixIndex::tokens() const {
  MutexLock lock(&mu_);
  return tokens_;
}

int64_t SuffixIndex::sequences() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(sequences_.size());
}

}  // namespace deepinfer::engine
