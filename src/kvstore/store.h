// The KV block store: immutable 128-token KV blocks kept as files in a directory on a local SSD or a
// shared filesystem's mount, so that prefixes outlive the process and any server on the directory can hit
// them. Owned by kvstore (depends on core only; the engine plugs it under its block manager).
//
// Threads: Put, Lookup and Read never wait for I/O; they queue work for the store's I/O threads (io_uring,
// or a pwrite/pread fallback) and return. Completion callbacks run on an I/O thread and must not block.
// A background sweeper deletes expired blocks and keeps usage under the high watermark.
//
// Correctness never depends on the directory: every block read is verified (checksum, namespace, hash,
// parent, token ids) before it is reported good, and a block that fails is quarantined and reported as
// failed; full disks, read-only or vanished directories and I/O errors stop writes for a while (logged,
// counted) and are otherwise misses.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "kvstore/block_format.h"
#include "kvstore/io_backend.h"
#include "kvstore/store_stats.h"
#include "kvstore/sweeper.h"

namespace deepinfer::kvstore {

// When a written block reaches stable storage. Reads verify every block, so even kNone never serves a
// block a crash damaged; the policy only decides how much of the store survives a power loss.
enum class FsyncPolicy { kNone, kData, kFull };  // kData: fdatasync before rename; kFull: and the directory
bool ParseFsyncPolicy(std::string_view text, FsyncPolicy* out);

struct StoreOptions {
  std::string dir;
  bool create = true;       // a missing or empty directory becomes a store
  StoreLayout layout;       // what this process's blocks hold; its Id is the namespace
  FsyncPolicy fsync = FsyncPolicy::kNone;
  IoBackendKind backend = IoBackendKind::kAuto;
  int io_threads = 2;
  int queue_depth = 32;     // operations in flight per I/O thread
  int write_depth = 8;      // of which writes at most, so reads always find room
  uint64_t max_queue_bytes = uint64_t{256} << 20;  // staging memory of queued writes; beyond it Put drops
  uint32_t max_queue_writes = 4096;
  // Seconds a block lives after its last use, per TtlClass (agent 3 days, chat 7 days).
  std::array<int64_t, kNumTtlClasses> ttl_seconds = {3 * 86400, 7 * 86400};
  SweepOptions sweep;           // capacity, watermarks, grace periods
  double sweep_interval_s = 60; // <= 0: no background sweeper
  double refresh_interval_s = 60;  // a hit re-stamps a block's last use at most this often
  double error_backoff_s = 5;   // after a full disk, read-only or vanished directory, writes pause this long
  // Read with O_DIRECT, bypassing the page cache: into the destinations when they are page-aligned in
  // address and size, else through a bounce buffer.
  bool direct_io = false;
  double close_flush_s = 10;    // the destructor waits this long for queued writes
};

// One full, immutable block to write behind. The bytes are copied before Put returns.
struct BlockWrite {
  Hash128 hash;
  Hash128 parent;  // zero for a sequence's first block
  uint32_t block_index = 0;
  std::span<const int32_t> tokens;  // the block's 128 token ids
  TtlClass ttl = TtlClass::kChat;
  std::span<const std::span<const uint8_t>> segments;  // one per layout segment, of its size
};

// One block to read into caller memory (fresh pool blocks). The token view and destinations must stay
// valid until the batch's callback has run.
struct ReadItem {
  Hash128 hash;
  Hash128 parent;
  bool check_parent = true;
  std::span<const int32_t> tokens;        // the 128 ids the block must hold
  std::vector<std::span<uint8_t>> dest;   // one per layout segment, of its size
  TtlClass ttl = TtlClass::kChat;         // the reader's class: a hit extends the block's life to it
};

struct ReadResult {
  // OK: dest holds the verified block. kNotFound: not in the store (a miss). kDataLoss: it failed
  // verification (`failure` says how) and was quarantined. Otherwise an I/O error or kCancelled (the
  // store closed). On any non-OK result the destination bytes are unspecified.
  Status status;
  VerifyFailure failure = VerifyFailure::kNone;
};

struct LookupResult {
  std::vector<bool> present;  // per hash asked
  size_t prefix = 0;          // how many leading hashes are present: what a prefix hit can use
};

using ReadDone = std::function<void(std::vector<ReadResult>)>;
using LookupDone = std::function<void(LookupResult)>;

class Store {
 public:
  // Opens (or creates) the store directory and this layout's namespace, removes temporaries this host's
  // crashed writers left, and starts the I/O threads and the sweeper.
  static Result<std::unique_ptr<Store>> Open(StoreOptions options);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Queues a block for writing. Returns false when it was not queued: already known present, already
  // queued, queue full, store not writable, or malformed (wrong segment sizes); each is counted.
  bool Put(const BlockWrite& block);

  // Finds which hashes are in the store (one statx each, all in flight at once). Calls `done` once.
  void Lookup(std::vector<Hash128> hashes, LookupDone done);

  // Reads and verifies blocks into the items' destinations. Calls `done` once, with one result per item in
  // order, when all have finished.
  void Read(std::vector<ReadItem> items, ReadDone done);

  // Waits until no write is queued or in flight.
  void Flush();

  // Runs one sweep on the calling thread.
  Result<SweepReport> SweepNow();

  // Seconds to read `blocks` blocks as measured so far (latency and throughput of recent reads); the engine
  // weighs it against recomputing. A store that has not read yet predicts from a 1 GB/s, 1 ms guess.
  double PredictReadSeconds(size_t blocks) const;

  StoreStats stats() const;
  void AppendPrometheus(std::string* out) const;
  const StoreLayout& layout() const;
  const Hash128& namespace_id() const;
  std::string_view backend_name() const;
  const std::string& dir() const;
  int64_t ttl_seconds(TtlClass ttl) const;  // how long a block of that class lives after its last use

  class Impl;

 private:
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::kvstore
