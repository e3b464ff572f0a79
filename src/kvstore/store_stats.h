// The KV store's counters and latency histograms, and their Prometheus rendering for the server's
// /metrics. Owned by kvstore. Counters only grow; gauges say the state now.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "core/clock.h"
#include "kvstore/block_format.h"

namespace deepinfer::kvstore {

// Why the store is not writing (or not reading), for the state gauge and the log line.
enum class StoreHealth : uint8_t { kOk = 0, kDiskFull, kReadOnly, kVanished, kIoErrors };
std::string_view StoreHealthName(StoreHealth h);

struct StoreCounters {
  std::atomic<uint64_t> lookups{0};            // block hashes looked up
  std::atomic<uint64_t> lookup_present{0};     // ... of them found present
  std::atomic<uint64_t> hit_blocks{0};         // blocks read and verified
  std::atomic<uint64_t> miss_blocks{0};        // blocks asked for that were not there (or vanished)
  std::atomic<uint64_t> direct_reads{0};       // hits read with O_DIRECT ...
  std::atomic<uint64_t> bounced_reads{0};      // ... of them through a bounce buffer (unaligned destination)
  std::atomic<uint64_t> bytes_read{0};
  std::atomic<uint64_t> bytes_written{0};
  std::atomic<uint64_t> writes_queued{0};
  std::atomic<uint64_t> writes_done{0};        // renamed into place
  std::atomic<uint64_t> writes_present{0};     // skipped: the block was already there
  std::atomic<uint64_t> writes_dropped{0};     // refused: queue full, store not writable, no memory
  std::atomic<uint64_t> writes_failed{0};      // an I/O error (full disk, read-only, vanished, ...)
  std::atomic<uint64_t> evicted_expired{0};
  std::atomic<uint64_t> evicted_capacity{0};
  std::atomic<uint64_t> evicted_bytes{0};
  std::atomic<uint64_t> trash_unlinked{0};
  std::atomic<uint64_t> tmp_cleaned{0};        // temporaries of crashed writers removed
  std::atomic<uint64_t> quarantined{0};
  std::atomic<uint64_t> sweeps{0};
  std::array<std::atomic<uint64_t>, kNumVerifyFailures> verify_failures{};
  // Gauges.
  std::atomic<uint64_t> queue_depth{0};        // writes queued or in flight
  std::atomic<uint64_t> queue_bytes{0};        // their staging bytes
  std::atomic<uint64_t> used_bytes{0};         // as of the last sweep: the store's block bytes, all namespaces
  std::atomic<uint64_t> used_blocks{0};
  std::atomic<uint64_t> capacity_bytes{0};     // what the watermarks are fractions of
  std::atomic<uint8_t> health{0};              // StoreHealth
};

struct StoreStats {
  uint64_t lookups = 0, lookup_present = 0, hit_blocks = 0, miss_blocks = 0, direct_reads = 0, bounced_reads = 0;
  uint64_t bytes_read = 0, bytes_written = 0;
  uint64_t writes_queued = 0, writes_done = 0, writes_present = 0, writes_dropped = 0, writes_failed = 0;
  uint64_t evicted_expired = 0, evicted_capacity = 0, evicted_bytes = 0, trash_unlinked = 0, tmp_cleaned = 0;
  uint64_t quarantined = 0, sweeps = 0;
  std::array<uint64_t, kNumVerifyFailures> verify_failures{};
  uint64_t queue_depth = 0, queue_bytes = 0, used_bytes = 0, used_blocks = 0, capacity_bytes = 0;
  StoreHealth health = StoreHealth::kOk;
  // Per block, seconds: read = open to verified; write = dequeued to renamed.
  double read_p50 = 0, read_p99 = 0, write_p50 = 0, write_p99 = 0;
  uint64_t verify_failures_total() const;
};

// Appends the metrics in Prometheus text format (names deepinfer:kvstore_*, as the server's deepinfer:*; latencies as summaries).
void AppendPrometheus(const StoreStats& stats, const LatencyHistogram& read_latency,
                      const LatencyHistogram& write_latency, std::string* out);

}  // namespace deepinfer::kvstore
