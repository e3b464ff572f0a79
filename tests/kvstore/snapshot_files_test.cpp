// Snapshot files on disk: a record offered again with the same bytes (a decode unit finishing the prompt its
// prefill unit already stored) is kept as it is, not written a second time; one with any other byte is
// written; a read gives back every field and byte, and refuses a file cut short.
#include "kvstore/snapshot_files.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "kvstore/store.h"
#include "kvstore_test_util.h"

namespace deepinfer::kvstore {
namespace {

using test_support::ScratchDir;
using test_support::TestOptions;

SnapshotRecord Record(uint8_t state_byte) {
  auto s = std::make_shared<kvcache::SequenceSnapshot>();
  s->num_tokens = 2 * 128 + 3;  // two full blocks, then the 3 tail tokens
  s->prefix_first = 2;
  s->prefix_count = 1;
  s->window_first = 1;
  s->window_count = 2;
  s->state = {1, 2, 3, 4, state_byte};
  s->blocks.assign(3000, 7);
  return {.prefix = {11, 12}, .last_block = {21, 22}, .tail = {40, 41, 42}, .snapshot = s};
}

struct ReadBack {
  std::vector<int32_t> tail;
  std::shared_ptr<const kvcache::SequenceSnapshot> snapshot;
};

ReadBack Read(SnapshotFiles& files, const Hash128& prefix) {
  std::promise<ReadBack> got;
  files.Read(prefix, [&](std::vector<int32_t> tail, std::shared_ptr<const kvcache::SequenceSnapshot> s) {
    got.set_value({std::move(tail), std::move(s)});
  });
  return got.get_future().get();
}

ino_t Inode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

TEST(SnapshotFiles, TheSameRecordIsKeptAndAnotherIsWritten) {
  ScratchDir dir;
  auto store = Store::Open(TestOptions(dir.path()));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  SnapshotFiles files(std::move(StoreDir::Open(dir.path(), false)).value(), (*store)->namespace_id(), 3600);
  const SnapshotRecord first = Record(5);
  const std::string path = files.PathOf(first.prefix);

  files.Write(first);
  files.Flush();
  ASSERT_EQ(files.writes_done(), 1u);
  const ino_t written = Inode(path);
  ASSERT_NE(written, 0u);
  // Header, 3 tail ids, 5 state bytes, 3000 block bytes.
  EXPECT_EQ(std::filesystem::file_size(path), kSnapshotHeaderBytes + 3 * 4 + 5 + 3000);

  files.Write(Record(5));  // equal bytes: kept (a rewrite renames a new file, with another inode, into place)
  files.Flush();
  EXPECT_EQ(files.writes_done(), 1u);
  EXPECT_EQ(files.writes_present(), 1u);
  EXPECT_EQ(Inode(path), written);

  files.Write(Record(6));  // same sizes and tail, one state byte differs: written
  files.Flush();
  EXPECT_EQ(files.writes_done(), 2u);
  EXPECT_EQ(files.writes_present(), 1u);
  EXPECT_NE(Inode(path), written);

  ReadBack back = Read(files, first.prefix);
  ASSERT_NE(back.snapshot, nullptr);
  EXPECT_EQ(back.tail, first.tail);
  EXPECT_EQ(back.snapshot->num_tokens, 259);
  EXPECT_EQ(back.snapshot->prefix_count, 1);
  EXPECT_EQ(back.snapshot->window_first, 1);
  EXPECT_EQ(back.snapshot->window_count, 2);
  EXPECT_EQ(back.snapshot->state, (std::vector<uint8_t>{1, 2, 3, 4, 6}));
  EXPECT_EQ(back.snapshot->blocks, first.snapshot->blocks);

  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(std::filesystem::file_size(path) - 1)), 0);
  EXPECT_EQ(Read(files, first.prefix).snapshot, nullptr);
  EXPECT_EQ(Read(files, Hash128{99, 99}).snapshot, nullptr);  // none stored
}

// The threads of this process named `name` (/proc/self/task/*/comm).
std::vector<pid_t> ThreadsNamed(const std::string& name) {
  std::vector<pid_t> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) out.push_back(static_cast<pid_t>(std::stoi(task.path().filename().string())));
  }
  return out;
}

// Where nothing waits for a write (kBackground: a decode unit's finished sequences), writes run on a thread
// of their own at background priority (core/sched.h: SCHED_BATCH, nice 19) while reads keep the caller's
// priority: a write completes while a read holds the reads' thread. With kWithReads (a prefill unit, whose
// hand-off waits for its write) a write queues behind that read.
TEST(SnapshotFiles, BackgroundWritesRunBesideReadsAtBackgroundPriority) {
  EXPECT_EQ(SnapshotWritesFor(/*prefill_role=*/true), SnapshotWrites::kWithReads);
  EXPECT_EQ(SnapshotWritesFor(/*prefill_role=*/false), SnapshotWrites::kBackground);
  ScratchDir dir;
  auto store = Store::Open(TestOptions(dir.path()));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  SnapshotFiles files(std::move(StoreDir::Open(dir.path(), false)).value(), (*store)->namespace_id(), 3600,
                      SnapshotWrites::kBackground);
  const int test_nice = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<int> read_nice;
  files.Read(Hash128{99, 99}, [&](std::vector<int32_t>, std::shared_ptr<const kvcache::SequenceSnapshot>) {
    read_nice.set_value(getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())));
    released.wait();  // holds the reads' thread
  });
  EXPECT_EQ(read_nice.get_future().get(), test_nice);

  const SnapshotRecord first = Record(5);
  files.Write(first);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (files.writes_done() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(files.writes_done(), 1u);  // beside the read, which still runs
  EXPECT_TRUE(std::filesystem::exists(files.PathOf(first.prefix)));
  const std::vector<pid_t> writers = ThreadsNamed("di-kvs-snap-w");
  EXPECT_EQ(writers.size(), 1u);
  for (pid_t writer : writers) {  // no early return: the read holds its thread until released below
    EXPECT_EQ(sched_getscheduler(writer), SCHED_BATCH);
    EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(writer)), 19);
  }

  files.SetWrites(SnapshotWrites::kWithReads);
  files.Write(Record(6));  // another state byte: written, once the read ends
  EXPECT_EQ(files.writes_done(), 1u);  // queued behind the read: it cannot have run
  release.set_value();
  files.Flush();
  EXPECT_EQ(files.writes_done(), 2u);
  ReadBack back = Read(files, first.prefix);
  ASSERT_NE(back.snapshot, nullptr);
  EXPECT_EQ(back.snapshot->state, (std::vector<uint8_t>{1, 2, 3, 4, 6}));
}

}  // namespace
}  // namespace deepinfer::kvstore
