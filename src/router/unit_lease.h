// A serving unit's lease: the file a `deepinfer serve --unit-dir DIR` process keeps fresh in a shared
// directory, and that `deepinfer router --unit-dir DIR` reads to find the units and their load. A lease is
// one small JSON file per unit, replaced atomically (written beside, then renamed), so a reader sees the old
// or the new one and never half of one. A unit is alive while now < heartbeat + ttl; a unit that stops
// renewing (killed, hung, partitioned) drops out by itself, and one that shuts down cleanly removes it.
//
// Nothing in the directory is trusted: a reader bounds every file's size and the number of files, checks
// every field's type and range, and skips what does not parse (reported, never fatal).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace deepinfer::router {

inline constexpr std::string_view kLeaseFormat = "deepinfer-unit-lease/1";
inline constexpr std::string_view kLeaseSuffix = ".lease";
inline constexpr size_t kMaxLeaseBytes = 64 * 1024;
inline constexpr size_t kMaxLeaseFiles = 4096;
inline constexpr int kStepCostTerms = 5;  // engine::CostModel::kFeatures

// What a unit publishes about its load: enough for the router to predict a new request's time to first
// token and time between tokens there (placement.h).
struct UnitLoad {
  int64_t running = 0;                // sequences decoding
  int64_t waiting = 0;                // requests queued
  int64_t queued_prefill_tokens = 0;  // prompt tokens not computed yet (waiting and running)
  int64_t max_num_seqs = 0;           // 0: unknown
  double kv_usage = 0;                // main pool blocks in use / total, in [0, 1]
  // The engine's calibrated step-cost model (engine/cost_model.h): seconds = intercept + tokens ×
  // c[1] + logit rows × c[2] + context × c[3] + chunks × c[4]. Uncalibrated: `calibrated` false.
  std::array<double, kStepCostTerms> step_cost{};
  bool calibrated = false;
};

// What a unit computes (serve --role): a prefill unit computes prompts and writes their KV blocks to the
// shared store; a decode unit reads them from there and generates; a unit of both does all of it.
enum class UnitRole { kBoth, kPrefill, kDecode };
std::string_view UnitRoleName(UnitRole role);
bool ParseUnitRole(std::string_view text, UnitRole* out);

struct UnitLease {
  std::string unit_id;  // unique among the directory's units; also the file's name
  std::string url;      // http://HOST:PORT
  std::vector<std::string> models;
  std::string version;  // deepinfer's
  int64_t pid = 0;
  int64_t heartbeat_unix_ms = 0;
  int64_t ttl_ms = 0;
  UnitRole role = UnitRole::kBoth;  // a lease without one: both
  // Switching roles (lease_writer.h): the unit takes no new requests until its running ones are done.
  bool draining = false;
  UnitLoad load;

  bool Alive(int64_t now_unix_ms) const { return now_unix_ms < heartbeat_unix_ms + ttl_ms; }
};

int64_t UnixMillisNow();

std::string LeaseToJson(const UnitLease& lease);
// Every field checked: types, ranges, the format tag, a unit id that is a plain file name, an http URL.
Result<UnitLease> ParseLease(std::string_view text);

// A role switch asked of a unit: DIR/<unit_id>.role holds {"role": "prefill"|"decode"|"both"}, written by
// whoever applies the planner's split (`deepinfer router --apply-plan`, an operator); the unit drains, switches
// and removes it (lease_writer.h).
inline constexpr std::string_view kRoleRequestSuffix = ".role";
Status WriteRoleRequest(const std::string& dir, std::string_view unit_id, UnitRole role);
// NotFound when there is none; InvalidArgument when it does not parse (at most 4 KiB are read).
Result<UnitRole> ReadRoleRequest(const std::string& dir, std::string_view unit_id);
Status RemoveRoleRequest(const std::string& dir, std::string_view unit_id);

// Writes DIR/<unit_id>.lease atomically (a temporary file in DIR renamed over it).
Status WriteLease(const std::string& dir, const UnitLease& lease);
Status RemoveLease(const std::string& dir, std::string_view unit_id);

struct LeaseScan {
  std::vector<UnitLease> leases;  // parsed, alive or not
  std::vector<std::string> errors;  // "file: why" for each file skipped
};
// Reads every *.lease file of DIR (at most kMaxLeaseFiles, each at most kMaxLeaseBytes).
Result<LeaseScan> ScanLeases(const std::string& dir);

// An http://HOST:PORT[/] URL split; anything else (another scheme, a path, a bad port) is an error.
struct HostPort {
  std::string host;
  int port = 0;
};
Result<HostPort> ParseUnitUrl(std::string_view url);

}  // namespace deepinfer::router
