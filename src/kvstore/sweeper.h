// The store's garbage collection: expired blocks, capacity watermarks, the trash, crashed writers'
// temporaries and old quarantined blocks. One sweep is a scan of the whole directory (every namespace);
// the store runs it in the background and `deepinfer kvstore gc` runs it on demand. Owned by kvstore.
//
// A block's life is kept in its file times, so a sweep needs no block's contents: mtime = when it expires
// (last use + its TTL class's duration, set by the process that last used it), atime = its last use
// (the LRU order under capacity pressure). Snapshot records (snapshot_format.h) follow the same rules, and
// one whose block (the last full block it continues) is gone, or goes in the same sweep, goes too. Evicting renames the block into the trash; only trash older
// than the grace period is unlinked, so a reader on another host that opened the block just before
// finishes reading a whole file (on NFS an unlinked file's handle goes stale). Sweepers on several hosts
// take turns through a lock file; where the filesystem has no locks they may overlap, which is safe:
// a rename that loses the race finds nothing and counts nothing.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "kvstore/store_dir.h"

namespace deepinfer::kvstore {

struct SweepOptions {
  // What the watermarks are fractions of. 0: the filesystem's size, and "used" is the filesystem's used
  // space (so the store keeps a shared disk below the watermark); otherwise used is the store's own bytes.
  uint64_t capacity_bytes = 0;
  double high_watermark = 0.90;  // above this a sweep evicts least-recently-used blocks ...
  double low_watermark = 0.80;   // ... down to this
  double trash_grace_s = 30;
  double tmp_max_age_s = 3600;   // any host's temporaries older than this are a crashed writer's
  double quarantine_max_age_s = 7 * 86400;
  bool expired = true;           // evict blocks past their expiry
  bool evict_all = false;        // gc --all: evict every block (and unlink the trash at once)
  bool dry_run = false;          // count what would go, change nothing
  bool wait_for_lock = false;    // block on the sweep lock instead of skipping when another holds it
};

struct SweepReport {
  bool lock_busy = false;        // another process was sweeping; nothing done
  uint64_t namespaces = 0;
  uint64_t blocks = 0;           // block files found
  uint64_t block_bytes = 0;
  uint64_t expired = 0;          // blocks evicted for expiry
  uint64_t capacity_evicted = 0; // blocks evicted for the watermark
  uint64_t snapshots = 0;        // snapshot records found
  uint64_t snapshot_bytes = 0;
  uint64_t snapshots_evicted = 0;   // for expiry or the watermark
  uint64_t snapshots_orphaned = 0;  // evicted because their block is gone (or they are not records)
  uint64_t evicted_bytes = 0;    // of blocks and snapshot records
  uint64_t trash_unlinked = 0;
  uint64_t trash_pending = 0;    // in the trash, within the grace period
  uint64_t tmp_removed = 0;
  uint64_t quarantine_removed = 0;
  uint64_t capacity = 0;
  uint64_t used_before = 0;
  uint64_t used_after = 0;       // projected: once the trash is unlinked
  uint64_t errors = 0;           // entries that could not be examined or moved
};

Result<SweepReport> Sweep(const StoreDir& dir, const SweepOptions& options);

// Only the temporaries part of a sweep (the store runs it at open, so a restart after a crash cleans up
// at once); returns how many were removed.
uint64_t CleanTemporaries(const StoreDir& dir, double tmp_max_age_s, bool dry_run);

// Whether a temporary named for (host, pid) belongs to a writer that can no longer finish it: a dead
// process on this host. Other hosts' temporaries go by age only.
bool TmpOwnerIsGone(const std::string& host, int64_t pid);

}  // namespace deepinfer::kvstore
