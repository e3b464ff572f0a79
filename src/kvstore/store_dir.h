// The store directory's layout and the names inside it. Owned by kvstore; described in the README's
// "KV store format" section.
//
//   DIR/KVSTORE                       "deepinfer-kvstore 1\n": marks the directory as a store of format 1
//   DIR/<ns>/NAMESPACE                JSON: what the namespace's blocks hold (model fingerprint, layout)
//   DIR/<ns>/<hh>/<hash>.kvb          one block; <ns> and <hash> 32 hex digits, <hh> the hash's first two
//   DIR/<ns>/<hh>/<name>.kvs          a finished sequence's snapshot (snapshot_format.h), replaced by rename
//   DIR/tmp/<host>.<pid>.<seq>.tmp    a block being written (renamed into place when complete)
//   DIR/trash/<ms>.<host>.<pid>.<seq>.kvb   an evicted block, unlinked after a grace period so that a
//                                     reader on another host that opened it before still reads it whole
//   DIR/quarantine/<ms>.<reason>.<hash>.kvb  a block that failed verification, kept for the operator
//   DIR/sweep.lock                    flock'ed by whichever process sweeps, so hosts take turns
// Nothing is ever modified in place: a file appears complete (rename) and leaves by rename, which is what
// makes concurrent readers, writers and sweepers on one directory safe without locks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "kvstore/block_format.h"

namespace deepinfer::kvstore {

inline constexpr std::string_view kManifestName = "KVSTORE";

class StoreDir {
 public:
  // Opens DIR as a store. With `create`, a missing DIR (its parent must exist) or an empty one becomes a
  // store. Refused: a directory that is neither empty nor a store (so no sweep ever touches an operator's
  // other files), and a store of another format version (with a message saying what to do).
  static Result<StoreDir> Open(const std::string& dir, bool create);

  const std::string& root() const { return root_; }
  std::string NamespaceDir(const Hash128& ns) const;
  std::string BucketDir(const Hash128& ns, const Hash128& hash) const;
  std::string BlockPath(const Hash128& ns, const Hash128& hash) const;
  std::string TmpDir() const { return root_ + "/tmp"; }
  std::string TrashDir() const { return root_ + "/trash"; }
  std::string QuarantineDir() const { return root_ + "/quarantine"; }
  std::string ManifestPath() const { return root_ + "/" + std::string(kManifestName); }
  std::string SweepLockPath() const { return root_ + "/sweep.lock"; }

  // Unique names for this process (host, pid, a process-wide counter).
  std::string NewTmpPath() const;
  std::string NewTrashPath(int64_t now_ms) const;
  std::string QuarantinePath(int64_t now_ms, std::string_view reason, const Hash128& hash) const;

  // Creates DIR/<ns>/ and its NAMESPACE file if missing; an existing NAMESPACE must describe `layout`.
  Status EnsureNamespace(const StoreLayout& layout) const;

  // Whether DIR still holds its manifest: false once the directory vanished or was unmounted, in which case
  // the store stops writing rather than recreate it on whatever is underneath.
  bool StillThere() const;

 private:
  explicit StoreDir(std::string root) : root_(std::move(root)) {}
  std::string root_;
};

// This host's name as used in temporary and trash names ([A-Za-z0-9-], at most 32 characters).
const std::string& HostTag();

// Parses "<host>.<pid>.<seq>.tmp"; false for any other name.
bool ParseTmpName(std::string_view name, std::string* host, int64_t* pid);
// Parses the leading "<ms>." of a trash or quarantine name; false for any other name.
bool ParseLeadingMillis(std::string_view name, int64_t* ms);
// Parses "<32 hex>.kvb".
bool ParseBlockName(std::string_view name, Hash128* hash);

int64_t UnixMillis();
int64_t UnixNanos();

// Calls fn(name) for each entry of `dir` but . and ..; false if the directory cannot be listed.
bool ForEachDirEntry(const std::string& dir, const std::function<void(std::string_view name)>& fn);
// A namespace directory's name (32 hex digits) and a bucket's (2 lowercase hex digits).
bool IsNamespaceName(std::string_view name);
bool IsBucketName(std::string_view name);

}  // namespace deepinfer::kvstore
