// The store end to end on a real directory, with both I/O backends: write-behind, lookups, verified reads,
// restarts and a second store on the same directory, and every way a file can be wrong.
#include "kvstore/store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>

#include "kvstore/store_dir.h"
#include "kvstore_test_util.h"

namespace deepinfer::kvstore {
namespace {

using namespace test_support;
namespace fs = std::filesystem;

class StoreTest : public ::testing::TestWithParam<IoBackendKind> {
 protected:
  std::unique_ptr<Store> OpenStore(StoreOptions o) {
    auto s = Store::Open(std::move(o));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  std::unique_ptr<Store> OpenStore() { return OpenStore(TestOptions(dir_.path(), GetParam())); }
  std::string BlockFile(const Store& s, const TestBlock& b) {
    return StoreDir::Open(dir_.path(), false)->BlockPath(s.namespace_id(), b.hash);
  }
  ScratchDir dir_;
};

TEST_P(StoreTest, WritesBehindAndReadsBackVerified) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  if (GetParam() == IoBackendKind::kUring) {
    EXPECT_EQ(store->backend_name(), "io_uring");
  } else {
    EXPECT_EQ(store->backend_name(), "posix");
  }
  const auto chain = MakeChain(store->layout(), 1, 6);
  for (const auto& b : chain) EXPECT_TRUE(PutBlock(*store, b));
  store->Flush();
  StoreStats st = store->stats();
  EXPECT_EQ(st.writes_done, 6u);
  EXPECT_EQ(st.queue_depth, 0u);
  EXPECT_EQ(st.bytes_written, 6 * (kHeaderBytes + 8000));
  // Each block is one file of exactly header + payload, and no temporary is left.
  for (const auto& b : chain) EXPECT_EQ(fs::file_size(BlockFile(*store, b)), kHeaderBytes + 8000);
  EXPECT_TRUE(fs::is_empty(dir_.Sub("tmp")));

  std::vector<const TestBlock*> all;
  for (const auto& b : chain) all.push_back(&b);
  std::vector<std::vector<uint8_t>> got;
  auto results = ReadBlocks(*store, all, &got);
  ASSERT_EQ(results.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_TRUE(results[i].status.ok()) << i << ": " << results[i].status.ToString();
    EXPECT_EQ(got[i], Concat(chain[i])) << i;
  }
  st = store->stats();
  EXPECT_EQ(st.hit_blocks, 6u);
  EXPECT_EQ(st.bytes_read, 6 * (kHeaderBytes + 8000));
  EXPECT_EQ(st.verify_failures_total(), 0u);
}

TEST_P(StoreTest, LookupReportsThePresentPrefix) {
  auto store = OpenStore();
  const auto chain = MakeChain(store->layout(), 2, 5);
  for (int i : {0, 1, 3}) PutBlock(*store, chain[i]);
  store->Flush();
  std::vector<Hash128> hashes;
  for (const auto& b : chain) hashes.push_back(b.hash);
  const LookupResult r = LookupBlocks(*store, hashes);
  EXPECT_EQ(r.present, (std::vector<bool>{true, true, false, true, false}));
  EXPECT_EQ(r.prefix, 2u);
  EXPECT_EQ(LookupBlocks(*store, {}).prefix, 0u);
  EXPECT_EQ(store->stats().lookups, 5u);
  EXPECT_EQ(store->stats().lookup_present, 3u);
  // A miss read is a plain NotFound, counted as a miss, not a failure.
  auto results = ReadBlocks(*store, {&chain[2]});
  EXPECT_EQ(results[0].status.code(), StatusCode::kNotFound);
  EXPECT_EQ(store->stats().miss_blocks, 1u);
  EXPECT_EQ(store->stats().verify_failures_total(), 0u);
}

TEST_P(StoreTest, DuplicatePutsAreSkipped) {
  auto store = OpenStore();
  const auto b = MakeBlock(store->layout(), 3);
  EXPECT_TRUE(PutBlock(*store, b));
  EXPECT_FALSE(PutBlock(*store, b));  // queued or known: never twice
  store->Flush();
  EXPECT_FALSE(PutBlock(*store, b));
  EXPECT_EQ(store->stats().writes_done, 1u);
  EXPECT_EQ(store->stats().writes_present, 2u);
  // A fresh process does not know it, stats the file, and skips the write.
  store.reset();
  store = OpenStore();
  EXPECT_TRUE(PutBlock(*store, b));
  store->Flush();
  EXPECT_EQ(store->stats().writes_done, 0u);
  EXPECT_EQ(store->stats().writes_present, 1u);
}

TEST_P(StoreTest, MalformedPutsAndFullQueueDropAndCount) {
  StoreOptions o = TestOptions(dir_.path(), GetParam());
  o.max_queue_bytes = kHeaderBytes + 8000 - 1;  // less than one block: every write is refused
  auto store = OpenStore(o);
  auto b = MakeBlock(store->layout(), 4);
  EXPECT_FALSE(PutBlock(*store, b));
  b.tokens.pop_back();
  EXPECT_FALSE(PutBlock(*store, b));
  EXPECT_EQ(store->stats().writes_dropped, 2u);
  EXPECT_EQ(store->stats().writes_queued, 0u);
}

TEST_P(StoreTest, RestartAndSecondProcessServeTheStoredBlocks) {
  const StoreLayout layout = TestLayout();
  const auto chain = MakeChain(layout, 5, 4);
  {
    auto a = OpenStore();
    for (const auto& b : chain) PutBlock(*a, b);
  }  // closing flushes the queue
  auto restarted = OpenStore();
  auto second = OpenStore();
  for (Store* s : {restarted.get(), second.get()}) {
    std::vector<const TestBlock*> all;
    for (const auto& b : chain) all.push_back(&b);
    std::vector<std::vector<uint8_t>> got;
    auto results = ReadBlocks(*s, all, &got);
    for (size_t i = 0; i < chain.size(); ++i) {
      ASSERT_TRUE(results[i].status.ok()) << results[i].status.ToString();
      EXPECT_EQ(got[i], Concat(chain[i]));
    }
  }
}

TEST_P(StoreTest, TtlClassSetsExpiryAndAHitExtendsIt) {
  StoreOptions o = TestOptions(dir_.path(), GetParam());
  o.ttl_seconds = {1000, 5000};
  auto store = OpenStore(o);
  const auto a = MakeBlock(store->layout(), 6);
  const int64_t before = UnixMillis() / 1000;
  PutBlock(*store, a, TtlClass::kAgent);
  store->Flush();
  struct stat st {};
  ASSERT_EQ(::stat(BlockFile(*store, a).c_str(), &st), 0);
  const int64_t after = UnixMillis() / 1000 + 1;
  // atime = last use (now), mtime = expiry (now + the agent TTL).
  EXPECT_GE(st.st_atim.tv_sec, before);
  EXPECT_LE(st.st_atim.tv_sec, after);
  EXPECT_GE(st.st_mtim.tv_sec, before + 1000);
  EXPECT_LE(st.st_mtim.tv_sec, after + 1000);
  // A chat reader's hit extends the life to the chat TTL (never shortens it).
  ASSERT_TRUE(ReadBlocks(*store, {&a}, nullptr, TtlClass::kChat)[0].status.ok());
  ASSERT_EQ(::stat(BlockFile(*store, a).c_str(), &st), 0);
  EXPECT_GE(st.st_mtim.tv_sec, before + 5000);
  ASSERT_TRUE(ReadBlocks(*store, {&a}, nullptr, TtlClass::kAgent)[0].status.ok());
  ASSERT_EQ(::stat(BlockFile(*store, a).c_str(), &st), 0);
  EXPECT_GE(st.st_mtim.tv_sec, before + 5000);
}

// Each way a stored file can be wrong: never served, counted by reason, moved to the quarantine, and the
// next read of that hash is a clean miss (so the block is recomputed and written again).
class CorruptionTest : public StoreTest {
 protected:
  void ExpectRefused(Store& store, const TestBlock& asked, VerifyFailure why) {
    const std::string path = BlockFile(store, asked);
    const uint64_t before = store.stats().verify_failures[static_cast<int>(why)];
    auto r = ReadBlocks(store, {&asked});
    EXPECT_EQ(r[0].status.code(), StatusCode::kDataLoss) << r[0].status.ToString();
    EXPECT_EQ(r[0].failure, why) << VerifyFailureName(r[0].failure);
    EXPECT_EQ(store.stats().verify_failures[static_cast<int>(why)], before + 1);
    EXPECT_FALSE(fs::exists(path));
    EXPECT_EQ(ReadBlocks(store, {&asked})[0].status.code(), StatusCode::kNotFound);
  }
};

void FlipByte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x10);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

TEST_P(CorruptionTest, FlippedPayloadAndHeaderBytes) {
  auto store = OpenStore();
  const auto a = MakeBlock(store->layout(), 10);
  const auto b = MakeBlock(store->layout(), 11);
  PutBlock(*store, a);
  PutBlock(*store, b);
  store->Flush();
  FlipByte(BlockFile(*store, a), kHeaderBytes + 5000);  // inside the second segment
  ExpectRefused(*store, a, VerifyFailure::kChecksum);
  FlipByte(BlockFile(*store, b), 200);  // a token id
  ExpectRefused(*store, b, VerifyFailure::kChecksum);
  EXPECT_EQ(store->stats().quarantined, 2u);
  EXPECT_EQ(CountFiles(dir_.Sub("quarantine")), 2u);
}

TEST_P(CorruptionTest, TruncatedExtendedAndEmptyFiles) {
  auto store = OpenStore();
  const auto a = MakeBlock(store->layout(), 12);
  const auto b = MakeBlock(store->layout(), 13);
  const auto c = MakeBlock(store->layout(), 14);
  for (const auto* x : {&a, &b, &c}) PutBlock(*store, *x);
  store->Flush();
  fs::resize_file(BlockFile(*store, a), kHeaderBytes + 100);
  fs::resize_file(BlockFile(*store, b), kHeaderBytes + 8001);
  fs::resize_file(BlockFile(*store, c), 0);
  ExpectRefused(*store, a, VerifyFailure::kTruncated);
  ExpectRefused(*store, b, VerifyFailure::kTruncated);
  ExpectRefused(*store, c, VerifyFailure::kTruncated);
}

TEST_P(CorruptionTest, SwappedFilesAndWrongParent) {
  auto store = OpenStore();
  const auto chain = MakeChain(store->layout(), 15, 3);
  for (const auto& b : chain) PutBlock(*store, b);
  store->Flush();
  // Block 1's file under block 2's name: a valid block, but not the one asked for.
  fs::copy_file(BlockFile(*store, chain[1]), BlockFile(*store, chain[2]), fs::copy_options::overwrite_existing);
  ExpectRefused(*store, chain[2], VerifyFailure::kHash);
  // The right block asked for under another parent (a chain that does not match).
  TestBlock wrong_parent = chain[1];
  wrong_parent.parent = {99, 99};
  ExpectRefused(*store, wrong_parent, VerifyFailure::kHash);
}

TEST_P(CorruptionTest, AnotherModelsBlockIsRefused) {
  // Another model's store on the same directory writes its own namespace; its file copied into ours
  // (a misconfigured sync, a swapped directory) has a valid checksum but the wrong namespace.
  StoreOptions other_options = TestOptions(dir_.path(), GetParam());
  other_options.layout = TestLayout(/*fingerprint=*/2);
  auto other = OpenStore(other_options);
  auto store = OpenStore();
  ASSERT_NE(other->namespace_id(), store->namespace_id());
  const auto a = MakeBlock(store->layout(), 16);
  PutBlock(*other, a);
  other->Flush();
  EXPECT_EQ(ReadBlocks(*store, {&a})[0].status.code(), StatusCode::kNotFound);  // namespaces keep them apart
  fs::create_directories(fs::path(BlockFile(*store, a)).parent_path());
  fs::copy_file(BlockFile(*other, a), BlockFile(*store, a));
  ExpectRefused(*store, a, VerifyFailure::kNamespace);
  EXPECT_TRUE(ReadBlocks(*other, {&a})[0].status.ok());  // the other model still has its block
}

TEST_P(CorruptionTest, ForcedHashCollisionIsNeverServed) {
  // Same name, same chain, different token ids: a valid, checksummed block for other tokens.
  auto store = OpenStore();
  const auto a = MakeBlock(store->layout(), 17);
  TestBlock impostor = a;
  impostor.tokens[77] += 1;
  impostor.segments[0][0] ^= 1;
  PutBlock(*store, impostor);
  store->Flush();
  ExpectRefused(*store, a, VerifyFailure::kTokens);
  // Recomputed and written again, the real block is then served.
  PutBlock(*store, a);
  store->Flush();
  std::vector<std::vector<uint8_t>> got;
  ASSERT_TRUE(ReadBlocks(*store, {&a}, &got)[0].status.ok());
  EXPECT_EQ(got[0], Concat(a));
}

TEST_P(CorruptionTest, OtherFormatVersionIsRefused) {
  auto store = OpenStore();
  const auto a = MakeBlock(store->layout(), 18);
  PutBlock(*store, a);
  store->Flush();
  // Rewrite the version field and re-seal, as a future writer would: refused as a version, not as damage.
  const std::string path = BlockFile(*store, a);
  std::vector<uint8_t> bytes(fs::file_size(path));
  {
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  bytes[8] = 2;
  std::span<const uint8_t> payload(bytes.data() + kHeaderBytes, bytes.size() - kHeaderBytes);
  SealHeader(std::span<uint8_t, kHeaderBytes>(bytes.data(), kHeaderBytes), std::span(&payload, 1));
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  ExpectRefused(*store, a, VerifyFailure::kVersion);
}

TEST_P(StoreTest, DirectIoReadsTheSameBytes) {
  StoreOptions o = TestOptions(dir_.path(), GetParam());
  o.direct_io = true;  // falls back to buffered reads where the filesystem refuses O_DIRECT
  auto store = OpenStore(o);
  const auto chain = MakeChain(store->layout(), 19, 3);
  for (const auto& b : chain) PutBlock(*store, b);
  store->Flush();
  std::vector<std::vector<uint8_t>> got;
  auto r = ReadBlocks(*store, {&chain[0], &chain[1], &chain[2]}, &got);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(r[i].status.ok()) << r[i].status.ToString();
    EXPECT_EQ(got[i], Concat(chain[i]));
  }
}

// Page-aligned destinations whose sizes are page multiples (as the pool's blocks are for V4-Flash's groups)
// are filled by O_DIRECT itself; an unaligned one in the same batch goes through a bounce buffer. Both give
// the written bytes, and damage read either way is refused.
TEST_P(StoreTest, DirectIoIntoAlignedDestinations) {
  StoreOptions o = TestOptions(dir_.path(), GetParam());
  o.layout = TestLayout(7, 8192, 12288);
  o.direct_io = true;
  auto store = OpenStore(o);
  const auto chain = MakeChain(store->layout(), 21, 3);
  for (const auto& b : chain) PutBlock(*store, b);
  store->Flush();
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  // Block 0 and 1: aligned; block 2: its second segment one byte off a page (so its destination is not).
  std::vector<std::unique_ptr<uint8_t, Free>> memory;
  std::vector<ReadItem> items;
  for (size_t i = 0; i < chain.size(); ++i) {
    ReadItem item;
    item.hash = chain[i].hash;
    item.parent = chain[i].parent;
    item.tokens = chain[i].tokens;
    for (uint64_t n : store->layout().segment_bytes) {
      memory.emplace_back(static_cast<uint8_t*>(std::aligned_alloc(4096, n + 4096)));
      std::memset(memory.back().get(), 0xEE, n + 4096);
      item.dest.emplace_back(memory.back().get() + (i == 2 && n == 12288 ? 1 : 0), n);
    }
    items.push_back(std::move(item));
  }
  std::vector<std::vector<std::span<uint8_t>>> dests;
  for (const auto& item : items) dests.push_back(item.dest);
  std::promise<std::vector<ReadResult>> promise;
  store->Read(std::move(items), [&promise](std::vector<ReadResult> r) { promise.set_value(std::move(r)); });
  const auto r = promise.get_future().get();
  for (size_t i = 0; i < chain.size(); ++i) {
    ASSERT_TRUE(r[i].status.ok()) << i << ": " << r[i].status.ToString();
    for (size_t k = 0; k < dests[i].size(); ++k) {
      EXPECT_TRUE(std::equal(dests[i][k].begin(), dests[i][k].end(), chain[i].segments[k].begin())) << i << "/" << k;
    }
  }
  const StoreStats st = store->stats();
  if (st.direct_reads == 0) GTEST_SKIP() << "this filesystem refuses O_DIRECT (reads were buffered)";
  EXPECT_EQ(st.direct_reads, 3u);
  EXPECT_EQ(st.bounced_reads, 1u);
  // A flipped payload byte read straight into an aligned destination is still caught.
  FlipByte(BlockFile(*store, chain[0]), kHeaderBytes + 9000);
  auto* pa = static_cast<uint8_t*>(std::aligned_alloc(4096, 8192));
  auto* pb = static_cast<uint8_t*>(std::aligned_alloc(4096, 12288));
  memory.emplace_back(pa);
  memory.emplace_back(pb);
  ReadItem item;
  item.hash = chain[0].hash;
  item.tokens = chain[0].tokens;
  item.dest = {{pa, 8192}, {pb, 12288}};
  std::promise<std::vector<ReadResult>> again;
  store->Read({item}, [&again](std::vector<ReadResult> res) { again.set_value(std::move(res)); });
  const auto bad = again.get_future().get();
  EXPECT_EQ(bad[0].failure, VerifyFailure::kChecksum) << bad[0].status.ToString();
  EXPECT_EQ(store->stats().bounced_reads, 1u);
}

TEST_P(StoreTest, ManyConcurrentReadersAndWriters) {
  StoreOptions o = TestOptions(dir_.path(), GetParam());
  o.queue_depth = 4;
  o.write_depth = 2;
  auto store = OpenStore(o);
  const auto chain = MakeChain(store->layout(), 20, 64);
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = t; i < 64; i += 4) PutBlock(*store, chain[i]);
    });
  }
  for (auto& w : writers) w.join();
  store->Flush();
  EXPECT_EQ(store->stats().writes_done, 64u);
  std::vector<const TestBlock*> all;
  for (const auto& b : chain) all.push_back(&b);
  std::vector<std::thread> readers;
  std::atomic<int> good{0};
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      std::vector<std::vector<uint8_t>> got;
      auto r = ReadBlocks(*store, all, &got);
      for (size_t i = 0; i < all.size(); ++i) good += r[i].status.ok() && got[i] == Concat(chain[i]) ? 1 : 0;
    });
  }
  for (auto& r : readers) r.join();
  EXPECT_EQ(good.load(), 3 * 64);
}

std::string StoreBackendName(const ::testing::TestParamInfo<IoBackendKind>& p) {
  return p.param == IoBackendKind::kUring ? "uring" : "posix";
}
INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, ::testing::Values(IoBackendKind::kUring, IoBackendKind::kPosix), StoreBackendName);
INSTANTIATE_TEST_SUITE_P(Backends, CorruptionTest, ::testing::Values(IoBackendKind::kUring, IoBackendKind::kPosix),
                         StoreBackendName);

TEST(StoreDirTest, RefusesForeignDirectoriesAndOtherVersions) {
  ScratchDir dir;
  {
    std::ofstream(dir.Sub("notes.txt")) << "an operator's file";
  }
  auto s = StoreDir::Open(dir.path(), true);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("not a deepinfer KV store"), std::string::npos);
  fs::remove(dir.Sub("notes.txt"));
  ASSERT_TRUE(StoreDir::Open(dir.path(), true).ok());
  { std::ofstream(dir.Sub("KVSTORE"), std::ios::trunc) << "deepinfer-kvstore 2\n"; }
  s = StoreDir::Open(dir.path(), true);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("format '2', this build reads format 1"), std::string::npos)
      << s.status().message();
  // Missing without create: a clear NotFound.
  EXPECT_EQ(StoreDir::Open(dir.Sub("nope"), false).status().code(), StatusCode::kNotFound);
}

TEST(StoreDirTest, NamesParse) {
  std::string host;
  int64_t pid = 0;
  EXPECT_TRUE(ParseTmpName("node-1.4242.17.tmp", &host, &pid));
  EXPECT_EQ(host, "node-1");
  EXPECT_EQ(pid, 4242);
  EXPECT_FALSE(ParseTmpName("node-1.42x.17.tmp", &host, &pid));
  EXPECT_FALSE(ParseTmpName("node.tmp", &host, &pid));
  int64_t ms = 0;
  EXPECT_TRUE(ParseLeadingMillis("1764000000000.host.1.2.kvb", &ms));
  EXPECT_EQ(ms, 1764000000000);
  Hash128 h;
  EXPECT_TRUE(ParseBlockName("fedcba98765432100123456789abcdef.kvb", &h));
  EXPECT_FALSE(ParseBlockName("fedcba98765432100123456789abcdef.tmp", &h));
}

}  // namespace
}  // namespace deepinfer::kvstore
