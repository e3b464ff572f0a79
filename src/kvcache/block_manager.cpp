#include "kvcache/block_manager.h"

#include <algorithm>

namespace deepinfer::kvcache {
namespace {

int64_t BlocksCovering(int64_t positions) { return (positions + kBlockTokens - 1) / kBlockTokens; }

}  // namespace

BlockManager::BlockManager(const BlockManagerOptions& o)
    : prefix_({.num_blocks = o.prefix_blocks, .max_cached = -1, .ttl_seconds = o.prefix_ttl_s}),
      window_({.num_blocks = o.window_blocks,
               .max_cached = o.window_max_cached,
               .ttl_seconds = o.window_ttl_s,
               .budget = o.window_budget,
               .block_bytes = o.window_block_bytes}),
      window_size_(o.window),
      caching_(o.prefix_caching),
      max_rollback_(std::max<int64_t>(o.max_rollback, 0)) {}

BlockRange BlockManager::WindowRange(int64_t from, int64_t end) const {
  from = std::max<int64_t>(from, 0);
  if (end <= from) return {from / kBlockTokens, from / kBlockTokens};
  return {from / kBlockTokens, BlocksCovering(end)};
}

int64_t BlockManager::MatchPrefix(std::span<const BlockHash> hashes, int64_t max_blocks) const {
  if (!caching_ || !has_prefix()) return 0;
  const int64_t limit = std::min<int64_t>(max_blocks, static_cast<int64_t>(hashes.size()));
  int64_t n = 0;
  while (n < limit && prefix_.Find(hashes[static_cast<size_t>(n)]) != kNoBlock) ++n;
  return n;
}

bool BlockManager::HasWindowAt(std::span<const BlockHash> hashes, int64_t b) const {
  if (!has_window() || b == 0) return true;
  if (!caching_) return false;
  const BlockRange r = WindowRange(b * kBlockTokens - window_size_ + 1, b * kBlockTokens);
  for (int64_t i = r.first; i < r.end; ++i) {
    if (i >= static_cast<int64_t>(hashes.size()) || window_.Find(hashes[static_cast<size_t>(i)]) == kNoBlock)
      return false;
  }
  return true;
}

Forgotten BlockManager::WhyNoWindowAt(std::span<const BlockHash> hashes, int64_t b) const {
  Forgotten why = Forgotten::kNever;
  if (!has_window() || b == 0 || !caching_) return why;
  const BlockRange r = WindowRange(b * kBlockTokens - window_size_ + 1, b * kBlockTokens);
  for (int64_t i = r.first; i < std::min<int64_t>(r.end, static_cast<int64_t>(hashes.size())); ++i) {
    const BlockHash& h = hashes[static_cast<size_t>(i)];
    if (window_.Find(h) != kNoBlock) continue;
    const Forgotten f = window_.WhyForgotten(h);
    if (f == Forgotten::kExpired) return f;
    if (f == Forgotten::kEvicted) why = f;
  }
  return why;
}

void BlockManager::Attach(SequenceBlocks* seq, int64_t n, int64_t window_at) {
  seq->prefix.clear();
  seq->window.clear();
  if (has_prefix()) {
    for (int64_t i = 0; i < n; ++i) seq->prefix.push_back(prefix_.Acquire(seq->hashes[static_cast<size_t>(i)]));
  }
  seq->registered = n;
  seq->window_registered = 0;
  if (has_window()) {
    seq->window.assign(static_cast<size_t>(n), kNoBlock);
    if (window_at > 0) {
      const BlockRange r = WindowRange(window_at * kBlockTokens - window_size_ + 1, window_at * kBlockTokens);
      for (int64_t i = r.first; i < r.end; ++i)
        seq->window[static_cast<size_t>(i)] = window_.Acquire(seq->hashes[static_cast<size_t>(i)]);
    }
    // Window blocks the sequence recomputes (a replay) from window_at on are its own to register.
    seq->window_registered = std::max<int64_t>(window_at, 0);
  }
}

BlockManager::Need BlockManager::NeedFor(const SequenceBlocks& seq, int64_t start, int64_t end) const {
  Need need;
  const int64_t blocks = BlocksCovering(end);
  if (has_prefix()) need.prefix = std::max<int64_t>(0, blocks - static_cast<int64_t>(seq.prefix.size()));
  if (has_window()) {
    const BlockRange r = WindowRange(start - window_size_ + 1, end);
    for (int64_t i = r.first; i < r.end; ++i) {
      if (i >= static_cast<int64_t>(seq.window.size()) || seq.window[static_cast<size_t>(i)] == kNoBlock) ++need.window;
    }
  }
  return need;
}

bool BlockManager::CanAllocate(const Need& need) const {
  return need.prefix <= prefix_.num_available() && need.window <= window_.num_available();
}

bool BlockManager::Grow(SequenceBlocks* seq, int64_t start, int64_t end) {
  const Need need = NeedFor(*seq, start, end);
  if (!CanAllocate(need)) return false;
  const int64_t blocks = BlocksCovering(end);
  if (has_prefix()) {
    while (static_cast<int64_t>(seq->prefix.size()) < blocks) seq->prefix.push_back(prefix_.Allocate());
  }
  if (has_window()) {
    if (static_cast<int64_t>(seq->window.size()) < blocks) seq->window.resize(static_cast<size_t>(blocks), kNoBlock);
    const BlockRange r = WindowRange(start - window_size_ + 1, end);
    for (int64_t i = r.first; i < r.end; ++i) {
      int32_t& slot = seq->window[static_cast<size_t>(i)];
      if (slot == kNoBlock) slot = window_.Allocate();
    }
  }
  return true;
}

void BlockManager::Commit(SequenceBlocks* seq, std::span<const int32_t> tokens, int64_t num_tokens, int64_t now_nanos,
                          const std::function<void(int64_t, int32_t)>& on_full) {
  num_tokens = std::min<int64_t>(num_tokens, static_cast<int64_t>(tokens.size()));
  ExtendBlockHashes(seq->root, tokens.first(static_cast<size_t>(num_tokens)), &seq->hashes);
  const int64_t full = static_cast<int64_t>(seq->hashes.size());
  const int64_t limit = std::min(full, seq->register_limit);
  if (caching_ && has_prefix()) {
    for (int64_t i = seq->registered; i < limit && i < static_cast<int64_t>(seq->prefix.size()); ++i) {
      const int32_t b = seq->prefix[static_cast<size_t>(i)];
      if (prefix_.Register(b, seq->hashes[static_cast<size_t>(i)]) == b && on_full) on_full(i, b);
    }
  }
  seq->registered = std::max(seq->registered, full);
  if (has_window()) {
    if (caching_) {
      const int64_t window_limit = std::min(full, seq->window_register_limit);
      for (int64_t i = seq->window_registered; i < window_limit && i < static_cast<int64_t>(seq->window.size()); ++i) {
        const int32_t b = seq->window[static_cast<size_t>(i)];
        if (b != kNoBlock) window_.Register(b, seq->hashes[static_cast<size_t>(i)]);
      }
    }
    seq->window_registered = std::max(seq->window_registered, full);
    // The next query (at position num_tokens, or max_rollback before it after a rollback) sees
    // [num_tokens − max_rollback − window + 1, num_tokens]: blocks wholly before that are no longer this
    // sequence's business.
    const int64_t keep_from = WindowRange(num_tokens - max_rollback_ - window_size_ + 1, num_tokens + 1).first;
    for (int64_t i = 0; i < keep_from && i < static_cast<int64_t>(seq->window.size()); ++i) {
      int32_t& slot = seq->window[static_cast<size_t>(i)];
      if (slot != kNoBlock) {
        window_.Release(slot, now_nanos);
        slot = kNoBlock;
      }
    }
  }
}

void BlockManager::Free(SequenceBlocks* seq, int64_t now_nanos) {
  // Newest first, so that of a sequence's cached blocks its oldest (the most widely shared prefix) stay
  // longest in the LRU order.
  for (auto it = seq->prefix.rbegin(); it != seq->prefix.rend(); ++it) {
    if (*it != kNoBlock) prefix_.Release(*it, now_nanos);
  }
  for (auto it = seq->window.rbegin(); it != seq->window.rend(); ++it) {
    if (*it != kNoBlock) window_.Release(*it, now_nanos);
  }
  seq->prefix.clear();
  seq->window.clear();
}

bool BlockManager::AllocateLookahead(SequenceBlocks* seq, int64_t num_tokens, int64_t k) {
  return Grow(seq, num_tokens, num_tokens + std::max<int64_t>(k, 0));
}

Status BlockManager::Rollback(SequenceBlocks* seq, int64_t num_tokens, int64_t now_nanos) {
  if (num_tokens < 0) return Status::InvalidArgument("rollback: negative position count");
  const int64_t full = num_tokens / kBlockTokens;
  const auto hashed = static_cast<int64_t>(seq->hashes.size());
  if (std::min({seq->registered, seq->register_limit, hashed}) > full ||
      (has_window() && std::min({seq->window_registered, seq->window_register_limit, hashed}) > full))
    return Status::FailedPrecondition("rollback: position " + std::to_string(num_tokens) +
                                      " is inside a registered block");
  if (has_window()) {
    const BlockRange r = WindowRange(num_tokens - window_size_ + 1, num_tokens);
    for (int64_t i = r.first; i < r.end; ++i) {
      if (i >= static_cast<int64_t>(seq->window.size()) || seq->window[static_cast<size_t>(i)] == kNoBlock)
        return Status::FailedPrecondition("rollback: position " + std::to_string(num_tokens) +
                                          " needs window blocks already released");
    }
  }
  const auto keep = static_cast<size_t>(BlocksCovering(num_tokens));
  auto trim = [&](BlockAllocator& alloc, std::vector<int32_t>* blocks) {
    while (blocks->size() > keep) {
      if (blocks->back() != kNoBlock) alloc.Release(blocks->back(), now_nanos);
      blocks->pop_back();
    }
  };
  trim(prefix_, &seq->prefix);
  trim(window_, &seq->window);
  if (static_cast<int64_t>(seq->hashes.size()) > full) seq->hashes.resize(static_cast<size_t>(full));
  seq->registered = std::min(seq->registered, full);
  seq->window_registered = std::min(seq->window_registered, full);
  return Status::Ok();
}

bool BlockManager::Fork(const SequenceBlocks& parent, int64_t num_tokens, SequenceBlocks* child,
                        std::vector<Copy>* copies) {
  const int64_t full = num_tokens / kBlockTokens;
  const int64_t extent = BlocksCovering(num_tokens);
  Need need;
  if (has_prefix() && extent > full && full < static_cast<int64_t>(parent.prefix.size())) need.prefix = 1;
  if (has_window() && extent > full && full < static_cast<int64_t>(parent.window.size()) &&
      parent.window[static_cast<size_t>(full)] != kNoBlock)
    need.window = 1;
  if (!CanAllocate(need)) return false;
  *child = SequenceBlocks{};
  child->hashes = parent.hashes;
  child->root = parent.root;
  child->registered = parent.registered;
  child->window_registered = parent.window_registered;
  child->register_limit = parent.register_limit;
  child->window_register_limit = parent.window_register_limit;
  auto fork_class = [&](BlockAllocator& alloc, const std::vector<int32_t>& from, std::vector<int32_t>* to,
                        bool window) {
    const int64_t n = std::min<int64_t>(extent, static_cast<int64_t>(from.size()));
    to->assign(static_cast<size_t>(n), kNoBlock);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t b = from[static_cast<size_t>(i)];
      if (b == kNoBlock) continue;
      if (i < full) {
        alloc.AddRef(b);
        (*to)[static_cast<size_t>(i)] = b;
      } else {
        const int32_t fresh = alloc.Allocate();
        (*to)[static_cast<size_t>(i)] = fresh;
        copies->push_back({window, b, fresh});
      }
    }
  };
  if (has_prefix()) fork_class(prefix_, parent.prefix, &child->prefix, false);
  if (has_window()) fork_class(window_, parent.window, &child->window, true);
  return true;
}

void BlockManager::Expire(int64_t now_nanos) {
  prefix_.Expire(now_nanos);
  window_.Expire(now_nanos);
}

Status BlockManager::CheckInvariants() const {
  DI_RETURN_IF_ERROR(prefix_.CheckInvariants().WithContext("prefix class"));
  return window_.CheckInvariants().WithContext("window class");
}

}  // namespace deepinfer::kvcache
