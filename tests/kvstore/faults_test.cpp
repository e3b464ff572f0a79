// Bad conditions on a real filesystem: a full disk (a small tmpfs made by the test), a read-only remount,
// a directory that vanishes (unmounted under the store). In each, writes fail without blocking, are
// counted and logged, reads of what is there keep verifying, and nothing is written where the store was.
// Mounting needs CAP_SYS_ADMIN (CI runs as root); elsewhere these tests skip and say why.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "kvstore/store.h"
#include "kvstore_test_util.h"

namespace deepinfer::kvstore {
namespace {

using namespace test_support;
namespace fs = std::filesystem;

class TmpfsTest : public ::testing::TestWithParam<IoBackendKind> {
 protected:
  void SetUp() override {
    mount_point_ = scratch_.Sub("mnt");
    fs::create_directory(mount_point_);
    if (::mount("tmpfs", mount_point_.c_str(), "tmpfs", 0, "size=256k,mode=0755") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno) << "); needs CAP_SYS_ADMIN";
    }
    mounted_ = true;
    dir_ = mount_point_ + "/store";
  }
  void TearDown() override {
    store_.reset();
    if (mounted_) ::umount2(mount_point_.c_str(), MNT_DETACH);
  }
  StoreOptions Options() {
    StoreOptions o = TestOptions(dir_, GetParam());
    o.error_backoff_s = 0.05;
    return o;
  }
  void Open(StoreOptions o) {
    auto s = Store::Open(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  void WaitBackoff() { ::usleep(80'000); }

  ScratchDir scratch_;
  std::string mount_point_;
  std::string dir_;
  bool mounted_ = false;
  std::unique_ptr<Store> store_;
};

TEST_P(TmpfsTest, FullDiskFailsWritesGracefullyAndTheSweeperMakesRoom) {
  StoreOptions o = Options();
  o.sweep.trash_grace_s = 0;
  Open(o);
  // 12 KiB blocks into 256 KiB: the disk fills within ~20 blocks.
  const auto chain = MakeChain(store_->layout(), 40, 40);
  int written = 0;
  for (const auto& b : chain) {
    PutBlock(*store_, b);
    store_->Flush();
    if (store_->stats().writes_failed > 0) break;
    ++written;
  }
  const StoreStats st = store_->stats();
  ASSERT_GE(st.writes_failed, 1u);
  EXPECT_EQ(st.health, StoreHealth::kDiskFull);
  EXPECT_GT(written, 3);
  EXPECT_TRUE(fs::is_empty(dir_ + "/tmp")) << "a failed write left its temporary";
  // During the pause writes are dropped at once, never queued behind a full disk.
  EXPECT_FALSE(PutBlock(*store_, chain[39]));
  EXPECT_GE(store_->stats().writes_dropped, 1u);
  // What was written still reads back verified.
  std::vector<std::vector<uint8_t>> got;
  auto r = ReadBlocks(*store_, {&chain[0], &chain[written - 1]}, &got);
  ASSERT_TRUE(r[0].status.ok() && r[1].status.ok());
  EXPECT_EQ(got[0], Concat(chain[0]));
  // A sweep (the filesystem is above 90%) evicts least-recently-used blocks; writes then resume.
  auto sweep = store_->SweepNow();
  ASSERT_TRUE(sweep.ok()) << sweep.status().ToString();
  EXPECT_GT(sweep->capacity_evicted, 0u);
  ASSERT_TRUE(store_->SweepNow().ok());  // grace 0: this one unlinks the trash
  WaitBackoff();
  EXPECT_TRUE(PutBlock(*store_, chain[38]));
  store_->Flush();
  EXPECT_EQ(store_->stats().health, StoreHealth::kOk)
      << "failed " << store_->stats().writes_failed << " dropped " << store_->stats().writes_dropped << " evicted "
      << sweep->capacity_evicted << " used " << sweep->used_before << " -> " << sweep->used_after << " of "
      << sweep->capacity;
  EXPECT_TRUE(ReadBlocks(*store_, {&chain[38]})[0].status.ok());
}

TEST_P(TmpfsTest, ReadOnlyDirectoryStillServesReads) {
  Open(Options());
  const auto chain = MakeChain(store_->layout(), 41, 3);
  PutBlock(*store_, chain[0]);
  PutBlock(*store_, chain[1]);
  store_->Flush();
  ASSERT_EQ(::mount(nullptr, mount_point_.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr), 0) << std::strerror(errno);
  EXPECT_TRUE(PutBlock(*store_, chain[2]));  // queued; the I/O thread finds the filesystem read-only
  store_->Flush();
  EXPECT_EQ(store_->stats().writes_failed, 1u);
  EXPECT_EQ(store_->stats().health, StoreHealth::kReadOnly);
  std::vector<std::vector<uint8_t>> got;
  auto r = ReadBlocks(*store_, {&chain[0], &chain[1], &chain[2]}, &got);
  EXPECT_TRUE(r[0].status.ok());
  EXPECT_TRUE(r[1].status.ok());
  EXPECT_EQ(got[1], Concat(chain[1]));
  EXPECT_EQ(r[2].status.code(), StatusCode::kNotFound);
  ASSERT_EQ(::mount(nullptr, mount_point_.c_str(), nullptr, MS_REMOUNT, nullptr), 0);
  WaitBackoff();
  EXPECT_TRUE(PutBlock(*store_, chain[2]));
  store_->Flush();
  EXPECT_EQ(store_->stats().health, StoreHealth::kOk);
}

TEST_P(TmpfsTest, VanishedDirectoryIsNotRecreated) {
  Open(Options());
  const auto chain = MakeChain(store_->layout(), 42, 3);
  PutBlock(*store_, chain[0]);
  store_->Flush();
  // The filesystem goes away under the store (an unmount; on a network filesystem, a lost mount).
  ASSERT_EQ(::umount2(mount_point_.c_str(), MNT_DETACH), 0);
  mounted_ = false;
  EXPECT_TRUE(PutBlock(*store_, chain[1]));
  store_->Flush();
  EXPECT_EQ(store_->stats().writes_failed, 1u);
  EXPECT_EQ(store_->stats().health, StoreHealth::kVanished);
  // Reads are misses, not errors; nothing appeared in the directory underneath.
  EXPECT_EQ(ReadBlocks(*store_, {&chain[0]})[0].status.code(), StatusCode::kNotFound);
  EXPECT_EQ(LookupBlocks(*store_, {chain[0].hash}).prefix, 0u);
  WaitBackoff();
  PutBlock(*store_, chain[2]);
  store_->Flush();
  EXPECT_TRUE(fs::is_empty(mount_point_));
  EXPECT_FALSE(store_->SweepNow().ok());
}

std::string BackendName(const ::testing::TestParamInfo<IoBackendKind>& p) {
  return p.param == IoBackendKind::kUring ? "uring" : "posix";
}
INSTANTIATE_TEST_SUITE_P(Backends, TmpfsTest, ::testing::Values(IoBackendKind::kUring, IoBackendKind::kPosix), BackendName);

}  // namespace
}  // namespace deepinfer::kvstore
