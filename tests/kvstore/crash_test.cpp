// Processes on one store directory: writers killed with SIGKILL mid-write (the CI-sized kill loop at the
// store's level), and two processes writing, reading and evicting at once.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <random>

#include "kvstore/inspect.h"
#include "kvstore/store.h"
#include "kvstore_test_util.h"

namespace deepinfer::kvstore {
namespace {

using namespace test_support;
namespace fs = std::filesystem;

// The hash MakeBlock gives `seed`, without making the block's bytes.
Hash128 HashOf(uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 7);
  const uint64_t first = rng();
  return {.high = rng(), .low = first};
}

// Runs in a forked child until killed: writes blocks seed_base + 0, 1, 2, ...
[[noreturn]] void WriteForever(const std::string& dir, IoBackendKind backend, uint64_t seed_base) {
  StoreOptions o = TestOptions(dir, backend);
  o.close_flush_s = 0;
  auto s = Store::Open(o);
  if (!s.ok()) ::_exit(3);
  for (uint64_t i = 0;; ++i) {
    PutBlock(**s, MakeBlock((*s)->layout(), seed_base + i));
    if (i % 8 == 7) (*s)->Flush();
  }
}

TEST(CrashTest, KilledWritersNeverLeaveABlockThatIsServedWrong) {
  ScratchDir dir;
  ASSERT_TRUE(Store::Open(TestOptions(dir.path())).ok());  // create the store once, up front
  constexpr int kKills = 50;
  constexpr uint64_t kPerChild = 100000;
  std::mt19937 rng(99);
  for (int k = 0; k < kKills; ++k) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) WriteForever(dir.path(), k % 2 == 0 ? IoBackendKind::kUring : IoBackendKind::kPosix, k * kPerChild);
    ::usleep(2000 + rng() % 20000);
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child " << k << " exited early with " << WEXITSTATUS(status);
  }
  // The restarted store removes every temporary the killed writers left.
  const size_t leftover = CountFiles(dir.Sub("tmp"));
  RecordProperty("leftover_temporaries", static_cast<int>(leftover));
  auto store = Store::Open(TestOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->stats().tmp_cleaned, leftover);
  EXPECT_TRUE(fs::is_empty(dir.Sub("tmp")));
  // Every block file is whole and verifies ...
  auto report = VerifyStore(*StoreDir::Open(dir.path(), false), false);
  ASSERT_TRUE(report.ok());
  EXPECT_GT(report->checked, static_cast<uint64_t>(kKills));
  EXPECT_EQ(report->good, report->checked) << (report->bad.empty() ? "" : report->bad[0]);
  // ... and reads back as exactly the block its writer made.
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> seed_of;
  for (int k = 0; k < kKills; ++k) {
    for (uint64_t i = 0; i < 4000; ++i) {
      const Hash128 h = HashOf(k * kPerChild + i);
      seed_of[{h.low, h.high}] = k * kPerChild + i;
    }
  }
  uint64_t compared = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir.path() + "/" + (*store)->namespace_id().ToHex())) {
    Hash128 h;
    if (!entry.is_regular_file() || !ParseBlockName(entry.path().filename().string(), &h)) continue;
    auto it = seed_of.find({h.low, h.high});
    ASSERT_NE(it, seed_of.end()) << entry.path();
    const TestBlock b = MakeBlock((*store)->layout(), it->second);
    std::vector<std::vector<uint8_t>> got;
    auto r = ReadBlocks(**store, {&b}, &got);
    ASSERT_TRUE(r[0].status.ok()) << entry.path() << ": " << r[0].status.ToString();
    EXPECT_EQ(got[0], Concat(b));
    ++compared;
  }
  EXPECT_EQ(compared, report->checked);
  EXPECT_EQ((*store)->stats().verify_failures_total(), 0u);
}

// A child's whole run: write, read and evict for `seconds`; the exit code says what went wrong
// (0 fine, 1 a corrupt or failed read, 2 nothing was ever served, 3 open failed).
[[noreturn]] void ShareAndEvict(const std::string& dir, IoBackendKind backend, uint64_t seed, double seconds) {
  StoreOptions o = TestOptions(dir, backend);
  o.sweep_interval_s = 0.01;
  o.sweep.capacity_bytes = 30 * (kHeaderBytes + 8000);
  o.sweep.high_watermark = 0.9;
  o.sweep.low_watermark = 0.5;
  o.sweep.trash_grace_s = 0.02;
  auto s = Store::Open(o);
  if (!s.ok()) ::_exit(3);
  Store& store = **s;
  std::mt19937_64 rng(seed);
  std::vector<TestBlock> pool;
  for (uint64_t i = 0; i < 100; ++i) pool.push_back(MakeBlock(store.layout(), 7000 + i));  // shared by both
  uint64_t hits = 0;
  const int64_t end = NowNanos() + static_cast<int64_t>(seconds * 1e9);
  while (NowNanos() < end) {
    for (int i = 0; i < 4; ++i) PutBlock(store, pool[rng() % pool.size()]);
    std::vector<const TestBlock*> want;
    for (int i = 0; i < 6; ++i) want.push_back(&pool[rng() % pool.size()]);
    std::vector<std::vector<uint8_t>> got;
    auto r = ReadBlocks(store, want, &got);
    for (size_t i = 0; i < want.size(); ++i) {
      if (r[i].status.ok()) {
        if (got[i] != Concat(*want[i])) ::_exit(1);
        ++hits;
      } else if (r[i].status.code() != StatusCode::kNotFound) {
        ::_exit(1);
      }
    }
  }
  if (store.stats().verify_failures_total() != 0) ::_exit(1);
  ::_exit(hits > 0 ? 0 : 2);
}

TEST(CrashTest, TwoProcessesShareADirectoryUnderEviction) {
  ScratchDir dir;
  ASSERT_TRUE(Store::Open(TestOptions(dir.path())).ok());
  pid_t children[2];
  for (int c = 0; c < 2; ++c) {
    children[c] = ::fork();
    ASSERT_GE(children[c], 0);
    if (children[c] == 0) ShareAndEvict(dir.path(), c == 0 ? IoBackendKind::kUring : IoBackendKind::kPosix, c + 1, 1.5);
  }
  for (pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  // Eviction kept the store near its capacity, and what is left verifies.
  auto report = VerifyStore(*StoreDir::Open(dir.path(), false), false);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->good, report->checked);
  EXPECT_LE(report->checked, 100u);
}

}  // namespace
}  // namespace deepinfer::kvstore
