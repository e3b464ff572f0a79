#include "kvstore/store_stats.h"

#include <cstdio>

namespace deepinfer::kvstore {
namespace {

void Line(std::string* out, const char* name, const char* type, const char* help) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += help;
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

void Value(std::string* out, const std::string& name_and_labels, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  *out += name_and_labels;
  *out += ' ';
  *out += buf;
  *out += '\n';
}

void Counter(std::string* out, const char* name, const char* help, uint64_t v) {
  Line(out, name, "counter", help);
  Value(out, name, static_cast<double>(v));
}

void Gauge(std::string* out, const char* name, const char* help, double v) {
  Line(out, name, "gauge", help);
  Value(out, name, v);
}

void Summary(std::string* out, const char* name, const char* help, const LatencyHistogram& h) {
  Line(out, name, "summary", help);
  for (double q : {0.5, 0.9, 0.99}) {
    char label[32];
    std::snprintf(label, sizeof(label), "{quantile=\"%g\"}", q);
    Value(out, std::string(name) + label, h.Percentile(q));
  }
  Value(out, std::string(name) + "_sum", h.sum());
  Value(out, std::string(name) + "_count", static_cast<double>(h.count()));
}

}  // namespace

std::string_view StoreHealthName(StoreHealth h) {
  switch (h) {
    case StoreHealth::kOk: return "ok";
    case StoreHealth::kDiskFull: return "disk_full";
    case StoreHealth::kReadOnly: return "read_only";
    case StoreHealth::kVanished: return "vanished";
    case StoreHealth::kIoErrors: return "io_errors";
  }
  return "?";
}

uint64_t StoreStats::verify_failures_total() const {
  uint64_t total = 0;
  for (uint64_t v : verify_failures) total += v;
  return total;
}

void AppendPrometheus(const StoreStats& s, const LatencyHistogram& read_latency, const LatencyHistogram& write_latency,
                      std::string* out) {
  Counter(out, "deepinfer:kvstore_lookups_total", "Block hashes looked up in the KV store.", s.lookups);
  Counter(out, "deepinfer:kvstore_lookup_present_total", "Looked-up block hashes found present.", s.lookup_present);
  Counter(out, "deepinfer:kvstore_hit_blocks_total", "Blocks read from the KV store and verified.", s.hit_blocks);
  Counter(out, "deepinfer:kvstore_hit_tokens_total", "Tokens of blocks read and verified.",
          s.hit_blocks * kvcache::kBlockTokens);
  Counter(out, "deepinfer:kvstore_miss_blocks_total", "Blocks asked for that the KV store did not hold.", s.miss_blocks);
  Counter(out, "deepinfer:kvstore_miss_tokens_total", "Tokens of blocks the KV store did not hold.",
          s.miss_blocks * kvcache::kBlockTokens);
  Counter(out, "deepinfer:kvstore_read_bytes_total", "Bytes read from the KV store.", s.bytes_read);
  Counter(out, "deepinfer:kvstore_direct_reads_total", "Blocks read with O_DIRECT.", s.direct_reads);
  Counter(out, "deepinfer:kvstore_bounced_reads_total",
          "Blocks read with O_DIRECT through a bounce buffer (a destination not page-aligned).", s.bounced_reads);
  Counter(out, "deepinfer:kvstore_written_bytes_total", "Bytes written to the KV store.", s.bytes_written);
  Counter(out, "deepinfer:kvstore_writes_queued_total", "Blocks queued for writing.", s.writes_queued);
  Counter(out, "deepinfer:kvstore_writes_total", "Blocks written.", s.writes_done);
  Counter(out, "deepinfer:kvstore_writes_present_total", "Block writes skipped: already in the store.", s.writes_present);
  Counter(out, "deepinfer:kvstore_writes_dropped_total", "Block writes dropped: queue full or store not writable.",
          s.writes_dropped);
  Counter(out, "deepinfer:kvstore_writes_failed_total", "Block writes that failed with an I/O error.", s.writes_failed);
  Line(out, "deepinfer:kvstore_evictions_total", "counter", "Blocks evicted, by reason.");
  Value(out, "deepinfer:kvstore_evictions_total{reason=\"expired\"}", static_cast<double>(s.evicted_expired));
  Value(out, "deepinfer:kvstore_evictions_total{reason=\"capacity\"}", static_cast<double>(s.evicted_capacity));
  Counter(out, "deepinfer:kvstore_evicted_bytes_total", "Bytes of evicted blocks.", s.evicted_bytes);
  Counter(out, "deepinfer:kvstore_tmp_cleaned_total", "Temporaries of crashed writers removed.", s.tmp_cleaned);
  Line(out, "deepinfer:kvstore_verify_failures_total", "counter",
       "Blocks that failed verification (never served; quarantined), by reason.");
  for (int i = 1; i < kNumVerifyFailures; ++i) {
    Value(out,
          std::string("deepinfer:kvstore_verify_failures_total{reason=\"") +
              std::string(VerifyFailureName(static_cast<VerifyFailure>(i))) + "\"}",
          static_cast<double>(s.verify_failures[i]));
  }
  Counter(out, "deepinfer:kvstore_quarantined_total", "Blocks moved to the quarantine.", s.quarantined);
  Counter(out, "deepinfer:kvstore_sweeps_total", "Sweeps run by this process.", s.sweeps);
  Gauge(out, "deepinfer:kvstore_queue_depth", "Block writes queued or in flight.", static_cast<double>(s.queue_depth));
  Gauge(out, "deepinfer:kvstore_queue_bytes", "Staging bytes of queued block writes.", static_cast<double>(s.queue_bytes));
  Gauge(out, "deepinfer:kvstore_used_bytes", "Bytes of blocks in the store (all namespaces), as of the last sweep.",
        static_cast<double>(s.used_bytes));
  Gauge(out, "deepinfer:kvstore_used_blocks", "Blocks in the store (all namespaces), as of the last sweep.",
        static_cast<double>(s.used_blocks));
  Gauge(out, "deepinfer:kvstore_capacity_bytes", "What the store's watermarks are fractions of.",
        static_cast<double>(s.capacity_bytes));
  Line(out, "deepinfer:kvstore_health", "gauge", "1 for the store's current state (writes pause in any but ok).");
  for (int h = 0; h <= static_cast<int>(StoreHealth::kIoErrors); ++h) {
    Value(out,
          std::string("deepinfer:kvstore_health{state=\"") + std::string(StoreHealthName(static_cast<StoreHealth>(h))) + "\"}",
          s.health == static_cast<StoreHealth>(h) ? 1.0 : 0.0);
  }
  Summary(out, "deepinfer:kvstore_read_seconds", "Per-block read latency (open to verified).", read_latency);
  Summary(out, "deepinfer:kvstore_write_seconds", "Per-block write latency (dequeued to renamed).", write_latency);
}

}  // namespace deepinfer::kvstore
