// Helpers for the KV store tests: scratch directories, a two-segment layout whose sizes are not page
// multiples, deterministic block contents, and synchronous wrappers over the store's callbacks.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <future>
#include <random>
#include <string>
#include <vector>

#include "kvstore/store.h"

namespace deepinfer::kvstore::test_support {

class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/kvstore_test.XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    path_ = made != nullptr ? made : "";
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline StoreLayout TestLayout(uint64_t fingerprint = 1, uint64_t a = 3000, uint64_t b = 5000) {
  StoreLayout layout;
  layout.model_fingerprint = {.high = 0x1234, .low = fingerprint};
  layout.description = "test: compressed r=4 f32 " + std::to_string(a) + "; indexer r=4 f32 " + std::to_string(b);
  layout.segment_bytes = {a, b};
  return layout;
}

// One block's identity and bytes, all derived from `seed`.
struct TestBlock {
  Hash128 hash;
  Hash128 parent;
  uint32_t index = 0;
  std::vector<int32_t> tokens;
  std::vector<std::vector<uint8_t>> segments;

  std::vector<std::span<const uint8_t>> spans() const {
    std::vector<std::span<const uint8_t>> out;
    for (const auto& s : segments) out.emplace_back(s);
    return out;
  }
};

inline TestBlock MakeBlock(const StoreLayout& layout, uint64_t seed, Hash128 parent = {}, uint32_t index = 0) {
  TestBlock b;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 7);
  const uint64_t first = rng();
  b.hash = {.high = rng(), .low = first};
  b.parent = parent;
  b.index = index;
  for (int i = 0; i < kvcache::kBlockTokens; ++i) b.tokens.push_back(static_cast<int32_t>(rng() % 129280));
  for (uint64_t n : layout.segment_bytes) {
    std::vector<uint8_t> seg(n);
    for (auto& byte : seg) byte = static_cast<uint8_t>(rng());
    b.segments.push_back(std::move(seg));
  }
  return b;
}

// A chain of blocks: each one's parent is the previous one's hash.
inline std::vector<TestBlock> MakeChain(const StoreLayout& layout, uint64_t seed, int n) {
  std::vector<TestBlock> out;
  Hash128 parent{};
  for (int i = 0; i < n; ++i) {
    out.push_back(MakeBlock(layout, seed * 1000 + static_cast<uint64_t>(i), parent, static_cast<uint32_t>(i)));
    parent = out.back().hash;
  }
  return out;
}

inline bool PutBlock(Store& store, const TestBlock& b, TtlClass ttl = TtlClass::kChat) {
  const auto spans = b.spans();
  BlockWrite w;
  w.hash = b.hash;
  w.parent = b.parent;
  w.block_index = b.index;
  w.tokens = b.tokens;
  w.ttl = ttl;
  w.segments = spans;
  return store.Put(w);
}

// Reads blocks into fresh buffers; `out` gets each block's bytes (segment after segment).
inline std::vector<ReadResult> ReadBlocks(Store& store, const std::vector<const TestBlock*>& blocks,
                                          std::vector<std::vector<uint8_t>>* out = nullptr,
                                          TtlClass ttl = TtlClass::kChat) {
  const auto& seg = store.layout().segment_bytes;
  std::vector<std::vector<std::vector<uint8_t>>> buffers(blocks.size());
  std::vector<ReadItem> items;
  for (size_t i = 0; i < blocks.size(); ++i) {
    ReadItem item;
    item.hash = blocks[i]->hash;
    item.parent = blocks[i]->parent;
    item.tokens = blocks[i]->tokens;
    item.ttl = ttl;
    for (uint64_t n : seg) buffers[i].emplace_back(n, 0xEE);
    for (auto& b : buffers[i]) item.dest.emplace_back(b);
    items.push_back(std::move(item));
  }
  std::promise<std::vector<ReadResult>> promise;
  auto future = promise.get_future();
  store.Read(std::move(items), [&promise](std::vector<ReadResult> r) { promise.set_value(std::move(r)); });
  auto results = future.get();
  if (out != nullptr) {
    out->clear();
    for (auto& parts : buffers) {
      std::vector<uint8_t> all;
      for (auto& p : parts) all.insert(all.end(), p.begin(), p.end());
      out->push_back(std::move(all));
    }
  }
  return results;
}

inline std::vector<uint8_t> Concat(const TestBlock& b) {
  std::vector<uint8_t> all;
  for (const auto& s : b.segments) all.insert(all.end(), s.begin(), s.end());
  return all;
}

inline LookupResult LookupBlocks(Store& store, const std::vector<Hash128>& hashes) {
  std::promise<LookupResult> promise;
  auto future = promise.get_future();
  store.Lookup(hashes, [&promise](LookupResult r) { promise.set_value(std::move(r)); });
  return future.get();
}

inline StoreOptions TestOptions(const std::string& dir, IoBackendKind backend = IoBackendKind::kAuto) {
  StoreOptions o;
  o.dir = dir;
  o.layout = TestLayout();
  o.backend = backend;
  o.sweep_interval_s = 0;  // tests sweep explicitly
  o.refresh_interval_s = 0;
  return o;
}

inline size_t CountFiles(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    if (it->is_regular_file()) ++n;
  }
  return n;
}

}  // namespace deepinfer::kvstore::test_support
