// deepinfer kvstore stats|verify|gc DIR: the operator's view of a KV store directory (src/kvstore).
#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "core/utf8.h"
#include "kvstore/inspect.h"
#include "kvstore/store_dir.h"
#include "kvstore/sweeper.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kKvstoreUsage =
    "usage: deepinfer kvstore stats DIR [--json]\n"
    "       deepinfer kvstore verify DIR [--quarantine] [--json]\n"
    "       deepinfer kvstore gc DIR [--all] [--dry-run] [--capacity BYTES] [--high F] [--low F]\n"
    "                                [--trash-grace SECONDS] [--json]\n\n"
    "Operates on a KV store directory (what `deepinfer serve --kv-store DIR` keeps).\n"
    "  stats    namespaces (one per model and KV layout) with their blocks, bytes, expired blocks and last\n"
    "           uses; temporaries, trash and quarantine; the filesystem's size and free space\n"
    "  verify   reads every block file and checks its size, header, checksum, namespace and name; exit 1\n"
    "           when any is bad. --quarantine moves the bad ones to DIR/quarantine (servers skip them anyway)\n"
    "  gc       one sweep, as the servers' background sweeper does: crashed writers' temporaries, trash past\n"
    "           its grace period (--trash-grace, default 30 s), expired blocks, then least-recently-used\n"
    "           blocks while usage is above --high (default 0.9) of the capacity, down to --low (0.8).\n"
    "           The capacity is --capacity bytes of blocks, or else the filesystem's size and used space.\n"
    "           --all evicts every block; --dry-run only counts.\n"
    "  --json   one JSON object instead of the text report\n";

std::string IsoTime(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  const time_t t = static_cast<time_t>(unix_ms / 1000);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Result<kvstore::StoreDir> OpenExisting(const std::string& dir) { return kvstore::StoreDir::Open(dir, /*create=*/false); }

int RunStats(const std::vector<std::string>& args) {
  std::vector<std::string> dirs;
  bool json = false;
  Flags flags("kvstore stats");
  flags.Switch("--json", &json);
  flags.Positionals("DIR", &dirs, 1, 1);
  if (int rc = flags.Parse(args)) return rc;
  auto dir = OpenExisting(dirs[0]);
  if (!dir.ok()) return Fail("kvstore stats", dir.status().message());
  auto s = kvstore::SummarizeStore(*dir);
  if (!s.ok()) return Fail("kvstore stats", s.status().message());
  if (json) {
    nlohmann::ordered_json j;
    j["dir"] = dir->root();
    j["namespaces"] = nlohmann::ordered_json::array();
    for (const auto& ns : s->namespaces) {
      j["namespaces"].push_back({{"id", ns.id.ToHex()},
                                 {"model_fingerprint", ns.model_fingerprint},
                                 {"description", ns.description},
                                 {"payload_bytes", ns.payload_bytes},
                                 {"blocks", ns.blocks},
                                 {"bytes", ns.bytes},
                                 {"expired", ns.expired},
                                 {"oldest_use_ms", ns.oldest_use_ms},
                                 {"newest_use_ms", ns.newest_use_ms}});
    }
    j["tmp_files"] = s->tmp_files;
    j["trash_files"] = s->trash_files;
    j["trash_bytes"] = s->trash_bytes;
    j["quarantine_files"] = s->quarantine_files;
    j["fs_bytes"] = s->fs_bytes;
    j["fs_free_bytes"] = s->fs_free_bytes;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  uint64_t blocks = 0, bytes = 0;
  std::printf("KV store %s\n", dir->root().c_str());
  for (const auto& ns : s->namespaces) {
    blocks += ns.blocks;
    bytes += ns.bytes;
    std::printf("namespace %s  model %s\n  %s\n", ns.id.ToHex().c_str(), ns.model_fingerprint.c_str(),
                ns.description.c_str());
    std::printf("  %llu blocks, %s (payload %s each), %llu expired; last uses %s .. %s\n",
                static_cast<unsigned long long>(ns.blocks), HumanBytes(ns.bytes).c_str(),
                HumanBytes(ns.payload_bytes).c_str(), static_cast<unsigned long long>(ns.expired),
                IsoTime(ns.oldest_use_ms).c_str(), IsoTime(ns.newest_use_ms).c_str());
  }
  std::printf("total: %llu blocks, %s in %zu namespace(s)\n", static_cast<unsigned long long>(blocks),
              HumanBytes(bytes).c_str(), s->namespaces.size());
  std::printf("tmp %llu, trash %llu (%s), quarantine %llu\n", static_cast<unsigned long long>(s->tmp_files),
              static_cast<unsigned long long>(s->trash_files), HumanBytes(s->trash_bytes).c_str(),
              static_cast<unsigned long long>(s->quarantine_files));
  std::printf("filesystem: %s, %s free\n", HumanBytes(s->fs_bytes).c_str(), HumanBytes(s->fs_free_bytes).c_str());
  return 0;
}

int RunVerify(const std::vector<std::string>& args) {
  std::vector<std::string> dirs;
  bool json = false, quarantine = false;
  Flags flags("kvstore verify");
  flags.Switch("--json", &json);
  flags.Switch("--quarantine", &quarantine);
  flags.Positionals("DIR", &dirs, 1, 1);
  if (int rc = flags.Parse(args)) return rc;
  auto dir = OpenExisting(dirs[0]);
  if (!dir.ok()) return Fail("kvstore verify", dir.status().message());
  auto r = kvstore::VerifyStore(*dir, quarantine);
  if (!r.ok()) return Fail("kvstore verify", r.status().message());
  const uint64_t bad = r->checked - r->good;
  if (json) {
    nlohmann::ordered_json j;
    j["checked"] = r->checked;
    j["good"] = r->good;
    j["bad"] = bad;
    nlohmann::ordered_json reasons = nlohmann::ordered_json::object();
    for (int i = 1; i < kvstore::kNumVerifyFailures; ++i) {
      if (r->failures[i] > 0) reasons[std::string(kvstore::VerifyFailureName(static_cast<kvstore::VerifyFailure>(i)))] = r->failures[i];
    }
    j["reasons"] = reasons;
    j["files"] = r->bad;
    j["quarantined"] = r->quarantined;
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("checked %llu blocks: %llu good, %llu bad\n", static_cast<unsigned long long>(r->checked),
                static_cast<unsigned long long>(r->good), static_cast<unsigned long long>(bad));
    for (const auto& line : r->bad) std::printf("  %s\n", line.c_str());
    if (quarantine) std::printf("quarantined %llu\n", static_cast<unsigned long long>(r->quarantined));
  }
  return bad == 0 ? 0 : 1;
}

int RunGc(const std::vector<std::string>& args) {
  std::vector<std::string> dirs;
  bool json = false;
  kvstore::SweepOptions o;
  o.wait_for_lock = true;
  Flags flags("kvstore gc");
  flags.Switch("--json", &json);
  flags.Switch("--all", &o.evict_all);
  flags.Switch("--dry-run", &o.dry_run);
  flags.Int("--capacity", &o.capacity_bytes, uint64_t{1}, uint64_t{1} << 62);
  flags.Double("--high", &o.high_watermark, 0.01, 1.0);
  flags.Double("--low", &o.low_watermark, 0.01, 1.0);
  flags.Double("--trash-grace", &o.trash_grace_s, 0.0, 86400.0 * 365);
  flags.Positionals("DIR", &dirs, 1, 1);
  if (int rc = flags.Parse(args)) return rc;
  if (o.low_watermark > o.high_watermark) return UsageError("kvstore gc", "--low must not exceed --high");
  auto dir = OpenExisting(dirs[0]);
  if (!dir.ok()) return Fail("kvstore gc", dir.status().message());
  auto r = kvstore::Sweep(*dir, o);
  if (!r.ok()) return Fail("kvstore gc", r.status().message());
  if (json) {
    nlohmann::ordered_json j;
    j["dry_run"] = o.dry_run;
    j["blocks"] = r->blocks;
    j["block_bytes"] = r->block_bytes;
    j["expired"] = r->expired;
    j["capacity_evicted"] = r->capacity_evicted;
    j["snapshots"] = r->snapshots;
    j["snapshot_bytes"] = r->snapshot_bytes;
    j["snapshots_evicted"] = r->snapshots_evicted;
    j["snapshots_orphaned"] = r->snapshots_orphaned;
    j["evicted_bytes"] = r->evicted_bytes;
    j["trash_unlinked"] = r->trash_unlinked;
    j["trash_pending"] = r->trash_pending;
    j["tmp_removed"] = r->tmp_removed;
    j["quarantine_removed"] = r->quarantine_removed;
    j["capacity"] = r->capacity;
    j["used_before"] = r->used_before;
    j["used_after"] = r->used_after;
    j["errors"] = r->errors;
    std::cout << j.dump(2) << "\n";
  } else {
    const char* verb = o.dry_run ? "would evict" : "evicted";
    std::printf("%llu blocks (%s); %s %llu expired + %llu over the watermark (%s)\n",
                static_cast<unsigned long long>(r->blocks), HumanBytes(r->block_bytes).c_str(), verb,
                static_cast<unsigned long long>(r->expired), static_cast<unsigned long long>(r->capacity_evicted),
                HumanBytes(r->evicted_bytes).c_str());
    std::printf("%llu snapshot records (%s); %s %llu expired or over the watermark + %llu whose block is gone\n",
                static_cast<unsigned long long>(r->snapshots), HumanBytes(r->snapshot_bytes).c_str(), verb,
                static_cast<unsigned long long>(r->snapshots_evicted),
                static_cast<unsigned long long>(r->snapshots_orphaned));
    std::printf("trash: %llu unlinked, %llu in grace; temporaries removed %llu; old quarantine removed %llu\n",
                static_cast<unsigned long long>(r->trash_unlinked), static_cast<unsigned long long>(r->trash_pending),
                static_cast<unsigned long long>(r->tmp_removed), static_cast<unsigned long long>(r->quarantine_removed));
    if (r->capacity > 0) {
      std::printf("usage: %s -> %s of %s (%.1f%% -> %.1f%%)\n", HumanBytes(r->used_before).c_str(),
                  HumanBytes(r->used_after).c_str(), HumanBytes(r->capacity).c_str(),
                  100.0 * static_cast<double>(r->used_before) / static_cast<double>(r->capacity),
                  100.0 * static_cast<double>(r->used_after) / static_cast<double>(r->capacity));
    }
  }
  return r->errors == 0 ? 0 : 1;
}

int RunKvstore(const std::vector<std::string>& args) {
  if (args.empty()) return UsageError("kvstore", "an action is required: stats, verify or gc");
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "stats") return RunStats(rest);
  if (args[0] == "verify") return RunVerify(rest);
  if (args[0] == "gc") return RunGc(rest);
  return UsageError("kvstore", "unknown action '" + utf8::ToValidLossy(args[0]) + "' (stats, verify or gc)");
}

const CommandRegistration kKvstoreRegistration(
    {"kvstore", "inspect, verify and sweep a KV store directory", kKvstoreUsage, RunKvstore});

}  // namespace
}  // namespace deepinfer::cli
