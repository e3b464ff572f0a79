// A randomized driver for the block manager, shared by the property test (seeded runs) and the libFuzzer
// target fuzz_kvcache_block_manager (bytes → operations): sequences start with prefix hits, grow in chunks,
// fork, free, and time passes; after every operation the manager's own invariants hold and every block a
// sequence holds has exactly as many references as holders. At the end nothing is leaked.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "kvcache/block_manager.h"

namespace deepinfer::kvcache::test_support {

class ByteStream {
 public:
  ByteStream(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return at_ >= size_; }
  uint32_t Next(uint32_t bound) {  // in [0, bound)
    uint32_t v = 0;
    for (int i = 0; i < 3; ++i) v = (v << 8) | (at_ < size_ ? data_[at_++] : 0);
    return bound ? v % bound : 0;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

inline Status RunBlockManagerOps(const uint8_t* data, size_t size) {
  ByteStream in(data, size);
  static constexpr int64_t kWindows[] = {16, 128, 200};
  BlockManagerOptions options;
  options.prefix_blocks = 2 + in.Next(40);
  options.window_blocks = 2 + in.Next(20);
  options.window = kWindows[in.Next(3)];
  options.window_max_cached = static_cast<int64_t>(in.Next(6)) - 1;
  options.window_ttl_s = 1 + in.Next(5);
  options.prefix_caching = in.Next(8) != 0;
  BlockManager m(options);
  // Three "documents" that sequences take prefixes of, so that hits, shared blocks and forks happen.
  std::vector<std::vector<int32_t>> docs(3);
  for (size_t d = 0; d < docs.size(); ++d) {
    for (int i = 0; i < 1200; ++i) docs[d].push_back(static_cast<int32_t>((i * 31 + d * 7) % 50 + (i > 300 ? d : 0)));
  }
  const BlockHash root = RootHash({1, 1}, "exact", "f32", "");
  struct Slot {
    bool live = false;
    SequenceBlocks blocks;
    std::vector<int32_t> tokens;
    int64_t computed = 0;
  };
  std::vector<Slot> slots(8);
  int64_t now = 0;

  auto check = [&]() -> Status {
    DI_RETURN_IF_ERROR(m.CheckInvariants());
    std::map<int32_t, int32_t> prefix_holds, window_holds;
    for (const Slot& s : slots) {
      if (!s.live) continue;
      for (int32_t b : s.blocks.prefix) if (b != kNoBlock) ++prefix_holds[b];
      for (int32_t b : s.blocks.window) if (b != kNoBlock) ++window_holds[b];
    }
    for (const auto& [b, n] : prefix_holds) {
      if (m.prefix().refcount(b) != n)
        return Status::Internal("prefix block " + std::to_string(b) + " has " + std::to_string(m.prefix().refcount(b)) +
                                " references for " + std::to_string(n) + " holders");
    }
    for (const auto& [b, n] : window_holds) {
      if (m.window_class().refcount(b) != n) return Status::Internal("window block " + std::to_string(b) + " refcount wrong");
    }
    int64_t held_prefix = static_cast<int64_t>(prefix_holds.size()), held_window = static_cast<int64_t>(window_holds.size());
    if (m.prefix().num_used() != held_prefix)
      return Status::Internal("prefix blocks used " + std::to_string(m.prefix().num_used()) + " but " +
                              std::to_string(held_prefix) + " are held");
    if (m.window_class().num_used() != held_window) return Status::Internal("window blocks leaked");
    return Status::Ok();
  };

  for (int op = 0; op < 400 && !in.empty(); ++op) {
    Slot& s = slots[in.Next(static_cast<uint32_t>(slots.size()))];
    now += static_cast<int64_t>(in.Next(800)) * 1'000'000;
    switch (in.Next(6)) {
      case 0: {  // start: a prefix of a document, matched against the cache
        if (s.live) break;
        const auto& doc = docs[in.Next(3)];
        s.tokens.assign(doc.begin(), doc.begin() + 1 + in.Next(static_cast<uint32_t>(doc.size() - 1)));
        s.blocks = SequenceBlocks{};
        s.blocks.root = root;
        ExtendBlockHashes(root, s.tokens, &s.blocks.hashes);
        const int64_t len = static_cast<int64_t>(s.tokens.size());
        const int64_t hit = m.MatchPrefix(s.blocks.hashes, (len - 1) / kBlockTokens);
        const int64_t window_at = m.HasWindowAt(s.blocks.hashes, hit) ? hit : -1;
        m.Attach(&s.blocks, hit, window_at);
        s.computed = window_at >= 0 ? hit * kBlockTokens : 0;
        if (window_at < 0) {  // no exact resume: recompute from the start, keeping the attached prefix
          m.Free(&s.blocks, now);
          s.blocks = SequenceBlocks{};
          s.blocks.root = root;
          ExtendBlockHashes(root, s.tokens, &s.blocks.hashes);
          m.Attach(&s.blocks, 0, -1);
        }
        s.live = true;
        break;
      }
      case 1: {  // a chunk
        if (!s.live) break;
        const int64_t left = static_cast<int64_t>(s.tokens.size()) - s.computed;
        if (left <= 0) {
          s.tokens.push_back(static_cast<int32_t>(in.Next(50)));  // decode: one more token
          break;
        }
        const int64_t n = 1 + in.Next(static_cast<uint32_t>(std::min<int64_t>(left, 300)));
        if (!m.Grow(&s.blocks, s.computed, s.computed + n)) break;
        s.computed += n;
        m.Commit(&s.blocks, s.tokens, s.computed, now);
        break;
      }
      case 2:
        if (!s.live) break;
        m.Free(&s.blocks, now);
        s.live = false;
        break;
      case 3: {  // fork into a free slot
        if (!s.live || s.computed != static_cast<int64_t>(s.tokens.size())) break;
        for (Slot& t : slots) {
          if (t.live) continue;
          std::vector<BlockManager::Copy> copies;
          if (m.Fork(s.blocks, s.computed, &t.blocks, &copies)) {
            t.tokens = s.tokens;
            t.computed = s.computed;
            t.live = true;
          }
          break;
        }
        break;
      }
      case 4:
        m.Expire(now);
        break;
      default:
        if (s.live) s.tokens.push_back(static_cast<int32_t>(in.Next(50)));
        break;
    }
    DI_RETURN_IF_ERROR(check().WithContext("after op " + std::to_string(op)));
  }
  for (Slot& s : slots) {
    if (s.live) m.Free(&s.blocks, now);
    s.live = false;
  }
  DI_RETURN_IF_ERROR(check().WithContext("after freeing everything"));
  if (m.prefix().num_used() != 0 || m.window_class().num_used() != 0) return Status::Internal("blocks leaked");
  return Status::Ok();
}

}  // namespace deepinfer::kvcache::test_support
