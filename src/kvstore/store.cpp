#include "kvstore/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>
#include <unordered_set>

#include "core/log.h"
#include "kvstore/store_internal.h"

namespace deepinfer::kvstore {

bool ParseFsyncPolicy(std::string_view text, FsyncPolicy* out) {
  if (text == "none") *out = FsyncPolicy::kNone;
  else if (text == "data") *out = FsyncPolicy::kData;
  else if (text == "full") *out = FsyncPolicy::kFull;
  else return false;
  return true;
}

namespace internal {

void FreeDeleter::operator()(uint8_t* p) const { std::free(p); }

StagingBuffer AllocateStaging(size_t bytes) {
  const size_t rounded = (bytes + kHeaderBytes - 1) / kHeaderBytes * kHeaderBytes;
  return StagingBuffer(static_cast<uint8_t*>(std::aligned_alloc(kHeaderBytes, rounded)));
}

// ---------------------------------------------------------------------------------------------------------
// I/O threads

IoThread::IoThread(std::unique_ptr<IoBackend> backend, int depth, int write_depth)
    : io_(std::move(backend)), depth_(depth), write_depth_(write_depth) {
  thread_ = std::thread([this] { Run(); });
}

IoThread::~IoThread() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  io_->Wake();
  thread_.join();
}

void IoThread::Push(Task* task) {
  {
    MutexLock lock(&mutex_);
    (task->is_write ? writes_ : reads_).push_back(task);
  }
  io_->Wake();
}

std::vector<Task*> IoThread::TakeQueued() {
  MutexLock lock(&mutex_);
  std::vector<Task*> out(reads_.begin(), reads_.end());
  out.insert(out.end(), writes_.begin(), writes_.end());
  reads_.clear();
  writes_.clear();
  return out;
}

void IoThread::Finish(Task* task) {
  --in_flight_;
  if (task->is_write) --writes_in_flight_;
  delete task;
}

void IoThread::Run() {
  std::vector<Task*> starting;
  std::vector<IoOp*> done;
  for (;;) {
    bool queued_left;
    {
      MutexLock lock(&mutex_);
      // Reads first: a request waits on them; writes are behind by design.
      while (in_flight_ < depth_ && !reads_.empty()) {
        starting.push_back(reads_.front());
        reads_.pop_front();
        ++in_flight_;
      }
      while (in_flight_ < depth_ && writes_in_flight_ < write_depth_ && !writes_.empty()) {
        starting.push_back(writes_.front());
        writes_.pop_front();
        ++in_flight_;
        ++writes_in_flight_;
      }
      queued_left = !reads_.empty() || !writes_.empty();
      if (stopping_ && in_flight_ == 0 && starting.empty() && !queued_left) return;
    }
    for (Task* t : starting) {
      if (t->Start(*io_)) Finish(t);
    }
    starting.clear();
    io_->Submit();
    // With nothing in flight, block only when nothing is queued either (a Wake brings new work).
    const bool block = in_flight_ > 0 || !queued_left;
    done.clear();
    io_->Wait(&done, block);
    for (IoOp* op : done) {
      auto* task = static_cast<Task*>(op->owner);
      if (task->OnComplete(op, *io_)) Finish(task);
    }
  }
}

}  // namespace internal

// -----------------------------------------------------------------------------------------------------------
// Store

using internal::IoThread;
using internal::Task;

Store::Impl::Impl(StoreOptions opts, StoreDir d)
    : options(std::move(opts)), dir(std::move(d)), ns(options.layout.Id()), file_bytes(kHeaderBytes + options.layout.payload_bytes()) {}

Store::Impl::~Impl() {
  {
    MutexLock lock(&sweep_mutex);
    sweep_stopping = true;
  }
  sweep_cv.SignalAll();
  if (sweeper.joinable()) sweeper.join();
  FlushFor(options.close_flush_s);
  // What is still queued will not run: reads report kCancelled, writes count as dropped.
  for (auto& t : threads) {
    for (Task* task : t->TakeQueued()) {
      task->Cancel();
      delete task;
    }
  }
  threads.clear();  // joins: in-flight operations complete first
}

void Store::Impl::FlushFor(double seconds) {
  MutexLock lock(&write_mutex);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  while (!pending.empty() && std::chrono::steady_clock::now() < deadline) flushed_cv.WaitUntil(&write_mutex, deadline);
}

void Store::Impl::WriteFinished(const Hash128& hash, uint64_t bytes, bool now_present) {
  {
    MutexLock lock(&write_mutex);
    pending.erase(hash);
    if (now_present) RememberPresentLocked(hash);
  }
  counters.queue_depth.fetch_sub(1);
  counters.queue_bytes.fetch_sub(bytes);
  flushed_cv.SignalAll();
}

void Store::Impl::RememberPresentLocked(const Hash128& hash) {
  // A bounded FIFO of hashes this process knows are on disk, so re-offered blocks cost no I/O.
  constexpr size_t kKnownLimit = 1 << 16;
  if (!known.insert(hash).second) return;
  known_order.push_back(hash);
  if (known_order.size() > kKnownLimit) {
    known.erase(known_order.front());
    known_order.pop_front();
  }
}

void Store::Impl::ForgetPresent(const Hash128& hash) {
  MutexLock lock(&write_mutex);
  known.erase(hash);  // known_order keeps a stale entry; erasing it later is harmless
}

void Store::Impl::NoteWriteOk() {
  if (counters.health.load() == static_cast<uint8_t>(StoreHealth::kOk)) return;
  const auto was = static_cast<StoreHealth>(counters.health.exchange(static_cast<uint8_t>(StoreHealth::kOk)));
  if (was != StoreHealth::kOk) DI_LOG(kInfo, "kvstore: writes resumed").Field("dir", dir.root());
}

void Store::Impl::NoteWriteError(int err, const std::string& path, const char* what) {
  StoreHealth h = StoreHealth::kIoErrors;
  if (err == ENOSPC || err == EDQUOT) {
    h = StoreHealth::kDiskFull;
  } else if (err == EROFS || err == EACCES || err == EPERM) {
    h = StoreHealth::kReadOnly;
  } else if (err == ENOENT || err == ENOTDIR || err == ESTALE) {
    if (!dir.StillThere()) {
      h = StoreHealth::kVanished;
    } else if (err == ENOENT) {
      // Someone removed a subdirectory (tmp/); put it back for the next write.
      ::mkdir(dir.TmpDir().c_str(), 0755);
    }
  }
  const int64_t resume = UnixMillis() + static_cast<int64_t>(options.error_backoff_s * 1e3);
  writes_paused_until_ms.store(resume);
  const auto was = static_cast<StoreHealth>(counters.health.exchange(static_cast<uint8_t>(h)));
  if (was != h) {
    DI_LOG(kWarn, "kvstore: write failed; writes paused, serving goes on from RAM and recompute")
        .Field("state", StoreHealthName(h))
        .Field("op", what)
        .Field("path", path)
        .Field("error", std::strerror(err))
        .Field("pause_s", options.error_backoff_s);
  }
  if (h == StoreHealth::kDiskFull) RequestSweep();
}

void Store::Impl::RequestSweep() {
  {
    MutexLock lock(&sweep_mutex);
    sweep_requested = true;
  }
  sweep_cv.SignalAll();
}

void Store::Impl::RefreshTimes(const std::string& path, int64_t atime_ns, int64_t mtime_ns, TtlClass ttl) {
  const int64_t now_ns = UnixNanos();
  if (now_ns - atime_ns < static_cast<int64_t>(options.refresh_interval_s * 1e9)) return;
  const int64_t expiry_ns = std::max(mtime_ns, now_ns + options.ttl_seconds[static_cast<int>(ttl)] * 1'000'000'000);
  struct timespec times[2];
  times[0] = {static_cast<time_t>(now_ns / 1'000'000'000), static_cast<long>(now_ns % 1'000'000'000)};
  times[1] = {static_cast<time_t>(expiry_ns / 1'000'000'000), static_cast<long>(expiry_ns % 1'000'000'000)};
  ::utimensat(AT_FDCWD, path.c_str(), times, 0);  // best effort: a read-only store still serves
}

void Store::Impl::Quarantine(const std::string& path, const Hash128& hash, VerifyFailure why) {
  counters.verify_failures[static_cast<int>(why)].fetch_add(1);
  ForgetPresent(hash);
  const std::string to = dir.QuarantinePath(UnixMillis(), VerifyFailureName(why), hash);
  const bool moved = ::rename(path.c_str(), to.c_str()) == 0;
  if (moved) counters.quarantined.fetch_add(1);
  DI_LOG(kWarn, "kvstore: block failed verification; not served, recomputed")
      .Field("reason", VerifyFailureName(why))
      .Field("path", path)
      .Field("quarantined", moved ? to : std::string("no"));
}

void Store::Impl::RecordRead(double seconds, uint64_t bytes) {
  read_latency.Record(seconds);
  counters.bytes_read.fetch_add(bytes);
  MutexLock lock(&speed_mutex);
  constexpr double kAlpha = 0.1;
  ewma_block_seconds = have_speed ? (1 - kAlpha) * ewma_block_seconds + kAlpha * seconds : seconds;
  have_speed = true;
}

void Store::Impl::RecordBatch(double seconds, uint64_t bytes) {
  if (seconds <= 0 || bytes == 0) return;
  MutexLock lock(&speed_mutex);
  constexpr double kAlpha = 0.2;
  const double rate = static_cast<double>(bytes) / seconds;
  ewma_bytes_per_second = have_rate ? (1 - kAlpha) * ewma_bytes_per_second + kAlpha * rate : rate;
  have_rate = true;
}

IoThread& Store::Impl::ThreadFor(uint64_t key) { return *threads[key % threads.size()]; }

void Store::Impl::SweeperLoop() {
  MutexLock lock(&sweep_mutex);
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(options.sweep_interval_s));
  bool first = true;
  while (!sweep_stopping) {
    if (!first) {
      const auto deadline = std::chrono::steady_clock::now() + interval;
      while (!sweep_stopping && !sweep_requested && std::chrono::steady_clock::now() < deadline) {
        sweep_cv.WaitUntil(&sweep_mutex, deadline);
      }
    }
    first = false;
    if (sweep_stopping) break;
    sweep_requested = false;
    sweep_mutex.Unlock();
    auto r = RunSweep();
    if (!r.ok()) DI_LOG(kWarn, "kvstore: sweep failed").Field("error", r.status().message());
    sweep_mutex.Lock();
  }
}

Result<SweepReport> Store::Impl::RunSweep() {
  DI_ASSIGN_OR_RETURN(SweepReport r, Sweep(dir, options.sweep));
  if (r.lock_busy) return r;
  counters.sweeps.fetch_add(1);
  counters.evicted_expired.fetch_add(r.expired);
  counters.evicted_capacity.fetch_add(r.capacity_evicted);
  counters.evicted_bytes.fetch_add(r.evicted_bytes);
  counters.trash_unlinked.fetch_add(r.trash_unlinked);
  counters.tmp_cleaned.fetch_add(r.tmp_removed);
  counters.used_bytes.store(r.block_bytes - std::min(r.block_bytes, r.evicted_bytes));
  counters.used_blocks.store(r.blocks - std::min(r.blocks, r.expired + r.capacity_evicted));
  counters.capacity_bytes.store(r.capacity);
  if (r.capacity_evicted > 0 && options.sweep.capacity_bytes == 0) {
    // Without a capacity of its own the store yields to whatever else fills its filesystem: say so, since
    // an emptied store otherwise looks like a store that never hits.
    DI_LOG(kWarn, "kvstore: the filesystem is above its high watermark; evicted the store's least recently used "
                  "blocks (a capacity of its own: --kv-store-capacity)")
        .Field("blocks", r.capacity_evicted)
        .Field("filesystem_used_bytes", r.used_before)
        .Field("filesystem_bytes", r.capacity);
  }
  if (r.expired + r.capacity_evicted > 0) {
    DI_LOG(kInfo, "kvstore: sweep evicted blocks")
        .Field("expired", r.expired)
        .Field("capacity", r.capacity_evicted)
        .Field("bytes", r.evicted_bytes)
        .Field("used_after", r.used_after)
        .Field("capacity_bytes", r.capacity);
  }
  return r;
}

Result<std::unique_ptr<Store>> Store::Open(StoreOptions options) {
  DI_RETURN_IF_ERROR(options.layout.Validate());
  if (options.io_threads < 1 || options.io_threads > 64) return Status::InvalidArgument("kvstore: io_threads must be 1..64");
  if (options.queue_depth < 1 || options.queue_depth > 1024) {
    return Status::InvalidArgument("kvstore: queue_depth must be 1..1024");
  }
  options.write_depth = std::clamp(options.write_depth, 1, options.queue_depth);
  for (int64_t t : options.ttl_seconds) {
    if (t <= 0 || t > int64_t{3650} * 86400) return Status::InvalidArgument("kvstore: a TTL must be 1 s .. 10 years");
  }
  const SweepOptions& sw = options.sweep;
  if (!(sw.low_watermark > 0 && sw.low_watermark <= sw.high_watermark && sw.high_watermark <= 1)) {
    return Status::InvalidArgument("kvstore: watermarks must satisfy 0 < low <= high <= 1");
  }
  DI_ASSIGN_OR_RETURN(StoreDir dir, StoreDir::Open(options.dir, options.create));
  DI_RETURN_IF_ERROR(dir.EnsureNamespace(options.layout));
  auto impl = std::make_unique<Impl>(std::move(options), std::move(dir));
  impl->counters.tmp_cleaned.fetch_add(CleanTemporaries(impl->dir, impl->options.sweep.tmp_max_age_s, false));
  std::string why;
  for (int i = 0; i < impl->options.io_threads; ++i) {
    auto backend = MakeIoBackend(impl->options.backend, impl->options.queue_depth, &why);
    if (impl->options.backend == IoBackendKind::kUring && backend->name() != "io_uring") {
      return Status::Unavailable("kvstore: io_uring requested but unavailable: " + why);
    }
    impl->backend_name = std::string(backend->name());
    impl->threads.push_back(std::make_unique<IoThread>(std::move(backend), impl->options.queue_depth,
                                                       impl->options.write_depth));
  }
  if (!why.empty()) DI_LOG(kInfo, "kvstore: io_uring unavailable, using pread/pwrite").Field("why", why);
  if (impl->options.sweep_interval_s > 0) impl->sweeper = std::thread([p = impl.get()] { p->SweeperLoop(); });
  DI_LOG(kInfo, "kvstore: opened")
      .Field("dir", impl->dir.root())
      .Field("namespace", impl->ns.ToHex())
      .Field("block_bytes", impl->file_bytes)
      .Field("io", impl->backend_name);
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;

bool Store::Put(const BlockWrite& block) {
  Impl& s = *impl_;
  const auto& seg_bytes = s.options.layout.segment_bytes;
  bool well_formed = block.tokens.size() == kvcache::kBlockTokens && block.segments.size() == seg_bytes.size();
  for (size_t i = 0; well_formed && i < seg_bytes.size(); ++i) well_formed = block.segments[i].size() == seg_bytes[i];
  if (!well_formed || UnixMillis() < s.writes_paused_until_ms.load()) {
    s.counters.writes_dropped.fetch_add(1);
    return false;
  }
  const uint64_t bytes = s.file_bytes;
  {
    MutexLock lock(&s.write_mutex);
    if (s.known.contains(block.hash) || s.pending.contains(block.hash)) {
      s.counters.writes_present.fetch_add(1);
      return false;
    }
    if (s.counters.queue_depth.load() >= s.options.max_queue_writes ||
        s.counters.queue_bytes.load() + bytes > s.options.max_queue_bytes) {
      s.counters.writes_dropped.fetch_add(1);
      return false;
    }
    s.pending.insert(block.hash);
    s.counters.queue_depth.fetch_add(1);
    s.counters.queue_bytes.fetch_add(bytes);
  }
  internal::StagingBuffer buffer = internal::AllocateStaging(bytes);
  if (buffer == nullptr) {
    s.WriteFinished(block.hash, bytes, false);
    s.counters.writes_dropped.fetch_add(1);
    return false;
  }
  BlockHeader header;
  header.payload_bytes = s.options.layout.payload_bytes();
  header.created_unix_ms = UnixMillis();
  header.namespace_id = s.ns;
  header.block_hash = block.hash;
  header.parent_hash = block.parent;
  header.block_index = block.block_index;
  header.ttl_class = block.ttl;
  std::copy(block.tokens.begin(), block.tokens.end(), header.tokens.begin());
  EncodeHeader(header, std::span<uint8_t, kHeaderBytes>(buffer.get(), kHeaderBytes));
  uint8_t* p = buffer.get() + kHeaderBytes;
  for (const auto& seg : block.segments) {
    std::memcpy(p, seg.data(), seg.size());
    p += seg.size();
  }
  s.counters.writes_queued.fetch_add(1);
  s.ThreadFor(block.hash.low).Push(internal::MakeWriteTask(&s, block.hash, block.ttl, std::move(buffer), bytes));
  return true;
}

void Store::Lookup(std::vector<Hash128> hashes, LookupDone done) {
  Impl& s = *impl_;
  const uint32_t n = s.next_thread.fetch_add(1);
  s.ThreadFor(n).Push(internal::MakeLookupTask(&s, std::move(hashes), std::move(done)));
}

void Store::Read(std::vector<ReadItem> items, ReadDone done) {
  Impl& s = *impl_;
  auto batch = std::make_shared<internal::ReadBatch>();
  batch->items = std::move(items);
  batch->results.resize(batch->items.size());
  batch->remaining.store(batch->items.size());
  batch->done = std::move(done);
  batch->start_ns = NowNanos();
  if (batch->items.empty()) {
    batch->done({});
    return;
  }
  // Spread the batch over the I/O threads so its reads overlap.
  const uint32_t first = s.next_thread.fetch_add(1);
  for (size_t i = 0; i < batch->items.size(); ++i) {
    s.ThreadFor(first + i).Push(internal::MakeReadTask(&s, batch, i));
  }
}

void Store::Flush() {
  MutexLock lock(&impl_->write_mutex);
  while (!impl_->pending.empty()) impl_->flushed_cv.Wait(&impl_->write_mutex);
}

Result<SweepReport> Store::SweepNow() { return impl_->RunSweep(); }

double Store::PredictReadSeconds(size_t blocks) const {
  const Impl& s = *impl_;
  MutexLock lock(&s.speed_mutex);
  const double latency = s.have_speed ? s.ewma_block_seconds : 1e-3;
  const double rate = s.have_rate ? s.ewma_bytes_per_second : 1e9;
  return std::max(latency, static_cast<double>(blocks) * static_cast<double>(s.file_bytes) / rate);
}

StoreStats Store::stats() const {
  const StoreCounters& c = impl_->counters;
  StoreStats s;
  s.lookups = c.lookups.load();
  s.lookup_present = c.lookup_present.load();
  s.hit_blocks = c.hit_blocks.load();
  s.miss_blocks = c.miss_blocks.load();
  s.direct_reads = c.direct_reads.load();
  s.bounced_reads = c.bounced_reads.load();
  s.bytes_read = c.bytes_read.load();
  s.bytes_written = c.bytes_written.load();
  s.writes_queued = c.writes_queued.load();
  s.writes_done = c.writes_done.load();
  s.writes_present = c.writes_present.load();
  s.writes_dropped = c.writes_dropped.load();
  s.writes_failed = c.writes_failed.load();
  s.evicted_expired = c.evicted_expired.load();
  s.evicted_capacity = c.evicted_capacity.load();
  s.evicted_bytes = c.evicted_bytes.load();
  s.trash_unlinked = c.trash_unlinked.load();
  s.tmp_cleaned = c.tmp_cleaned.load();
  s.quarantined = c.quarantined.load();
  s.sweeps = c.sweeps.load();
  for (int i = 0; i < kNumVerifyFailures; ++i) s.verify_failures[i] = c.verify_failures[i].load();
  s.queue_depth = c.queue_depth.load();
  s.queue_bytes = c.queue_bytes.load();
  s.used_bytes = c.used_bytes.load();
  s.used_blocks = c.used_blocks.load();
  s.capacity_bytes = c.capacity_bytes.load();
  s.health = static_cast<StoreHealth>(c.health.load());
  s.read_p50 = impl_->read_latency.Percentile(0.5);
  s.read_p99 = impl_->read_latency.Percentile(0.99);
  s.write_p50 = impl_->write_latency.Percentile(0.5);
  s.write_p99 = impl_->write_latency.Percentile(0.99);
  return s;
}

void Store::AppendPrometheus(std::string* out) const {
  kvstore::AppendPrometheus(stats(), impl_->read_latency, impl_->write_latency, out);
}

const StoreLayout& Store::layout() const { return impl_->options.layout; }
const Hash128& Store::namespace_id() const { return impl_->ns; }
std::string_view Store::backend_name() const { return impl_->backend_name; }
const std::string& Store::dir() const { return impl_->dir.root(); }
int64_t Store::ttl_seconds(TtlClass ttl) const { return impl_->options.ttl_seconds[static_cast<int>(ttl)]; }

}  // namespace deepinfer::kvstore
