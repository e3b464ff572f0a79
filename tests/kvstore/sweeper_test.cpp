// The sweeper: expiry, the LRU watermark, the trash's grace period, crashed writers' temporaries; snapshot
// records under the same rules, and gone with their blocks.
#include "kvstore/sweeper.h"

#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "kvstore/snapshot_files.h"
#include "kvstore/store.h"
#include "kvstore_test_util.h"

namespace deepinfer::kvstore {
namespace {

using namespace test_support;
namespace fs = std::filesystem;

// Sets a block file's times: last use `used_s_ago`, expiry `expires_in_s` from now.
void SetTimes(const std::string& path, int64_t used_s_ago, int64_t expires_in_s) {
  const int64_t now = UnixMillis() / 1000;
  const struct timespec t[2] = {{static_cast<time_t>(now - used_s_ago), 0}, {static_cast<time_t>(now + expires_in_s), 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), t, 0), 0) << path;
}

class SweeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = Store::Open(TestOptions(dir_.path()));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    store_dir_ = std::make_unique<StoreDir>(std::move(StoreDir::Open(dir_.path(), false)).value());
  }
  std::string Path(const TestBlock& b) { return store_dir_->BlockPath(store_->namespace_id(), b.hash); }

  ScratchDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<StoreDir> store_dir_;
};

TEST_F(SweeperTest, ExpiredBlocksGoToTheTrashThenAway) {
  const auto chain = MakeChain(store_->layout(), 30, 4);
  for (const auto& b : chain) PutBlock(*store_, b);
  store_->Flush();
  SetTimes(Path(chain[1]), 100, -1);  // expired a second ago
  SetTimes(Path(chain[3]), 100, -50);
  SweepOptions o;
  o.trash_grace_s = 3600;
  auto r = Sweep(*store_dir_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->blocks, 4u);
  EXPECT_EQ(r->expired, 2u);
  EXPECT_EQ(r->capacity_evicted, 0u);
  EXPECT_EQ(r->namespaces, 1u);
  EXPECT_FALSE(fs::exists(Path(chain[1])));
  EXPECT_TRUE(fs::exists(Path(chain[0])));
  EXPECT_EQ(ReadBlocks(*store_, {&chain[1]})[0].status.code(), StatusCode::kNotFound);
  EXPECT_TRUE(ReadBlocks(*store_, {&chain[2]})[0].status.ok());
  // Within the grace period the trash stays (a reader elsewhere may still hold one open) ...
  EXPECT_EQ(CountFiles(dir_.Sub("trash")), 2u);
  r = Sweep(*store_dir_, o);
  EXPECT_EQ(r->trash_pending, 2u);
  EXPECT_EQ(CountFiles(dir_.Sub("trash")), 2u);
  // ... and goes after it.
  o.trash_grace_s = 0;
  ::usleep(2000);
  r = Sweep(*store_dir_, o);
  EXPECT_EQ(r->trash_unlinked, 2u);
  EXPECT_EQ(CountFiles(dir_.Sub("trash")), 0u);
}

TEST_F(SweeperTest, AboveTheHighWatermarkEvictsLeastRecentlyUsedDownToTheLow) {
  const uint64_t file = kHeaderBytes + 8000;
  const auto chain = MakeChain(store_->layout(), 31, 10);
  for (const auto& b : chain) PutBlock(*store_, b);
  store_->Flush();
  // Last uses 10, 9, ..., 1 minutes ago for blocks 0..9, with block 4 used just now.
  for (int i = 0; i < 10; ++i) SetTimes(Path(chain[i]), (10 - i) * 60, 86400);
  SetTimes(Path(chain[4]), 0, 86400);
  SweepOptions o;
  o.capacity_bytes = 10 * file;  // full: 100% > 90%
  o.high_watermark = 0.9;
  o.low_watermark = 0.5;
  o.trash_grace_s = 3600;
  auto r = Sweep(*store_dir_, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->used_before, 10 * file);
  EXPECT_EQ(r->capacity_evicted, 5u);
  EXPECT_EQ(r->used_after, 5 * file);
  // The five least recently used: 0, 1, 2, 3, 5 (4 was used last).
  for (int i : {0, 1, 2, 3, 5}) EXPECT_FALSE(fs::exists(Path(chain[i]))) << i;
  for (int i : {4, 6, 7, 8, 9}) EXPECT_TRUE(fs::exists(Path(chain[i]))) << i;
  // Below the high watermark nothing more goes, although the trash still counts until it is unlinked.
  r = Sweep(*store_dir_, o);
  EXPECT_EQ(r->capacity_evicted, 0u);
  EXPECT_EQ(r->used_before, 10 * file);  // 5 live + 5 in the trash
  EXPECT_EQ(r->used_after, 5 * file);
}

TEST_F(SweeperTest, DryRunChangesNothingAndAllEmptiesTheStore) {
  const auto chain = MakeChain(store_->layout(), 32, 3);
  for (const auto& b : chain) PutBlock(*store_, b);
  store_->Flush();
  SetTimes(Path(chain[0]), 10, -10);
  SweepOptions o;
  o.dry_run = true;
  auto r = Sweep(*store_dir_, o);
  EXPECT_EQ(r->expired, 1u);
  EXPECT_TRUE(fs::exists(Path(chain[0])));
  o.dry_run = false;
  o.evict_all = true;
  r = Sweep(*store_dir_, o);
  EXPECT_EQ(r->expired, 3u);
  EXPECT_EQ(CountFiles(dir_.Sub("trash")), 0u);
  for (const auto& b : chain) EXPECT_FALSE(fs::exists(Path(b)));
}

TEST_F(SweeperTest, CrashedWritersTemporariesAreCleanedAtOpen) {
  // A child that exits at once leaves a pid that is certainly gone.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  const std::string dead = dir_.Sub("tmp/" + HostTag() + "." + std::to_string(child) + ".0.tmp");
  const std::string live = dir_.Sub("tmp/" + HostTag() + "." + std::to_string(::getppid()) + ".0.tmp");
  const std::string other_host = dir_.Sub("tmp/elsewhere." + std::to_string(child) + ".0.tmp");
  for (const auto& p : {dead, live, other_host}) std::ofstream(p) << "partial";
  store_.reset();
  auto s = Store::Open(TestOptions(dir_.path()));
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));        // its writer may still finish it
  EXPECT_TRUE(fs::exists(other_host));  // another host's: only by age
  EXPECT_EQ((*s)->stats().tmp_cleaned, 1u);
  EXPECT_EQ(CleanTemporaries(*store_dir_, 0, false), 2u);  // age 0: every temporary is stale
}

TEST_F(SweeperTest, ABusyLockSkipsTheSweep) {
  const int fd = ::open(store_dir_->SweepLockPath().c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  // flock locks belong to the open file description: a second open in this process contends like another
  // process would.
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  auto r = Sweep(*store_dir_, SweepOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->lock_busy);
  ::close(fd);
  r = Sweep(*store_dir_, SweepOptions{});
  EXPECT_FALSE(r->lock_busy);
}

TEST_F(SweeperTest, BackgroundSweeperRunsAndCounts) {
  store_.reset();
  StoreOptions o = TestOptions(dir_.path());
  o.sweep_interval_s = 0.05;
  o.sweep.capacity_bytes = uint64_t{1} << 40;
  auto s = Store::Open(o);
  ASSERT_TRUE(s.ok());
  const auto chain = MakeChain((*s)->layout(), 33, 2);
  for (const auto& b : chain) PutBlock(**s, b);
  (*s)->Flush();
  for (int i = 0; i < 200 && (*s)->stats().used_blocks < 2; ++i) ::usleep(10000);
  const StoreStats st = (*s)->stats();
  EXPECT_GE(st.sweeps, 1u);
  EXPECT_EQ(st.used_blocks, 2u);
  EXPECT_EQ(st.used_bytes, 2 * (kHeaderBytes + 8000));
  EXPECT_EQ(st.capacity_bytes, uint64_t{1} << 40);
}

TEST_F(SweeperTest, SnapshotRecordsFollowTheBlocksRulesAndGoWithTheirBlock) {
  const auto chain = MakeChain(store_->layout(), 32, 4);
  for (const auto& b : chain) PutBlock(*store_, b);
  store_->Flush();
  // Records written by the store's own writer, each continuing a block (or none: fewer than 128 tokens).
  SnapshotFiles files(std::move(StoreDir::Open(dir_.path(), false)).value(), store_->namespace_id(), 3600);
  auto record = [&](uint64_t name, const Hash128& block, int64_t full_blocks, size_t bytes) {
    auto s = std::make_shared<kvcache::SequenceSnapshot>();
    s->num_tokens = full_blocks * 128 + 3;
    s->prefix_first = full_blocks;
    s->blocks.assign(bytes, 1);
    files.Write({.prefix = {name, 0}, .last_block = block, .tail = {1, 2, 3}, .snapshot = s});
    return files.PathOf({name, 0});
  };
  const std::string kept = record(1, chain[1].hash, 2, 20000);
  const std::string block_expires = record(2, chain[3].hash, 4, 100);
  const std::string block_never_stored = record(3, Hash128{99, 99}, 1, 100);
  const std::string no_block = record(4, Hash128{}, 0, 100);
  const std::string expired = record(5, chain[0].hash, 1, 100);
  files.Flush();
  ASSERT_EQ(files.writes_done(), 5u);
  const std::string garbage = files.PathOf({6, 0});
  std::ofstream(garbage) << "not a snapshot record";
  SetTimes(garbage, 0, 3600);  // not expired: it goes for what it is
  SetTimes(expired, 100, -1);
  SetTimes(Path(chain[3]), 100, -1);
  SweepOptions o;
  o.trash_grace_s = 3600;
  auto r = Sweep(*store_dir_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->blocks, 4u);
  EXPECT_EQ(r->expired, 1u);
  EXPECT_EQ(r->snapshots, 6u);
  EXPECT_EQ(r->snapshots_evicted, 1u);   // the expired one
  EXPECT_EQ(r->snapshots_orphaned, 3u);  // its block expired in this sweep, never stored, not a record
  EXPECT_EQ(r->errors, 0u);
  for (const std::string& gone : {block_expires, block_never_stored, expired, garbage}) EXPECT_FALSE(fs::exists(gone)) << gone;
  EXPECT_TRUE(fs::exists(kept));
  EXPECT_TRUE(fs::exists(no_block));
  EXPECT_EQ(CountFiles(dir_.Sub("trash")), 5u);

  // Under the watermark records go before blocks, least recently used first: the large one, though used
  // after every block, is evicted first and alone brings the store under the low watermark.
  SetTimes(kept, 10, 3600);
  for (int i = 0; i < 3; ++i) SetTimes(Path(chain[static_cast<size_t>(i)]), 1000, 3600);
  const uint64_t live = r->block_bytes + r->snapshot_bytes - r->evicted_bytes;
  o.capacity_bytes = live * 100 / 95;  // over 90%; without the 20 kB record under 80%
  r = Sweep(*store_dir_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->snapshots, 2u);
  EXPECT_EQ(r->snapshots_evicted, 1u);
  EXPECT_EQ(r->capacity_evicted, 0u);
  EXPECT_FALSE(fs::exists(kept));
  EXPECT_TRUE(fs::exists(no_block));
  // A hit stamps a record's times like a block's: last use now, expiry now + the TTL.
  SetTimes(no_block, 500, 10);
  files.Read({4, 0}, [](std::vector<int32_t>, std::shared_ptr<const kvcache::SequenceSnapshot>) {});
  files.Flush();
  struct stat st {};
  ASSERT_EQ(::stat(no_block.c_str(), &st), 0);
  EXPECT_GT(st.st_mtim.tv_sec, UnixMillis() / 1000 + 3000);
  EXPECT_GT(st.st_atim.tv_sec, UnixMillis() / 1000 - 60);
}

}  // namespace
}  // namespace deepinfer::kvstore
