// What `deepinfer kvstore stats|verify` report about a store directory, without a model: every namespace's
// blocks and bytes, and each block file checked on its own (size, header, checksum, namespace, the name
// against the header's hash). Token ids and parents need the engine's chain and are checked on reads.
// Owned by kvstore.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "kvstore/block_format.h"
#include "kvstore/store_dir.h"

namespace deepinfer::kvstore {

struct NamespaceSummary {
  Hash128 id;
  std::string model_fingerprint;  // from NAMESPACE ("?" when it is missing or unreadable)
  std::string description;
  uint64_t payload_bytes = 0;
  uint64_t blocks = 0;
  uint64_t bytes = 0;
  uint64_t expired = 0;           // past their expiry, waiting for a sweep
  int64_t oldest_use_ms = 0;      // least recent last use (0 when empty)
  int64_t newest_use_ms = 0;
};

struct StoreSummary {
  std::vector<NamespaceSummary> namespaces;
  uint64_t tmp_files = 0;
  uint64_t trash_files = 0;
  uint64_t trash_bytes = 0;
  uint64_t quarantine_files = 0;
  uint64_t fs_bytes = 0;       // the filesystem's size ...
  uint64_t fs_free_bytes = 0;  // ... and what is available to unprivileged writers
};

Result<StoreSummary> SummarizeStore(const StoreDir& dir);

struct VerifyReport {
  uint64_t checked = 0;
  uint64_t good = 0;
  std::array<uint64_t, kNumVerifyFailures> failures{};
  std::vector<std::string> bad;  // "reason path", the first 100
  uint64_t quarantined = 0;
};

// Checks one block file named `path` in namespace `ns` against its name's hash; kNone when good.
// `expected_payload` is the namespace's (0: take the header's, bounded by kMaxPayloadBytes).
VerifyFailure VerifyBlockFile(const std::string& path, const Hash128& ns, const Hash128& hash, uint64_t expected_payload);

// Verifies every block of every namespace; with `quarantine`, moves the bad ones to the quarantine.
Result<VerifyReport> VerifyStore(const StoreDir& dir, bool quarantine);

}  // namespace deepinfer::kvstore
