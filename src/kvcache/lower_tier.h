// The interface of a persistent tier under the RAM prefix cache (the KV store on an SSD or a shared
// filesystem, src/kvstore). The block manager offers it every prefix block that became full and
// immutable (write-behind), and at admission, after the RAM match ends, asks it for the next blocks of a
// prompt; the request waits in a loading state meanwhile and the step loop serves others. Only prefix
// groups are persisted: window (sliding-window) state stays in RAM.
//
// Threads. Offer, Lookup and Read are called from the engine's step thread and must return at once; their
// work happens on the tier's own threads, and `done` callbacks may run on any thread (the engine hands
// them back to its step thread).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvcache/block_hash.h"
#include "kvcache/sequence_snapshot.h"

namespace deepinfer::kvcache {

// What names a prefix block and what a reader verifies before serving it.
struct BlockKey {
  BlockHash hash;
  BlockHash parent;  // the previous block's hash (the chain root for block 0)
  std::array<int32_t, kBlockTokens> tokens{};
  std::string ttl_class;  // the request's class ("agent", "chat"; empty: the tier's default)
};

class LowerTier {
 public:
  virtual ~LowerTier() = default;

  // A prefix block became full and immutable: `group_bytes` holds its bytes in each persisted group (the
  // model's kPrefix groups, in spec order). Copy what is needed before returning: the block may be reused
  // right after. Never blocks; under pressure the write is dropped (and counted).
  virtual void Offer(const BlockKey& key, std::span<const std::span<const uint8_t>> group_bytes) = 0;

  // How many leading blocks of `keys` the tier holds (asynchronously).
  virtual void Lookup(std::vector<BlockKey> keys, std::function<void(size_t leading_present)> done) = 0;

  // Reads the blocks into the destinations (destinations[i][g]: group g's bytes of block i, sized as the
  // pools' blocks), verifying each (checksum, hash, token ids, fingerprint); done(n) reports the leading
  // blocks verified and filled. The destinations stay valid and untouched by the engine until done runs;
  // blocks after the first failure are recomputed by the engine.
  virtual void Read(std::vector<BlockKey> keys, std::vector<std::vector<std::span<uint8_t>>> destinations,
                    std::function<void(size_t leading_ok)> done) = 0;

  // Token-exact continuation: a finished sequence's snapshot, named `prefix` by the caller from the chained
  // hash of its full blocks (`last_block`: that of the last one, which the tier keeps it beside and without
  // which it is of no use; ignored when the snapshot has no full block), whose tokens after them are
  // `tail`. Stored beside the blocks, one per name (a later one replaces it). Never blocks; the default
  // keeps nothing.
  virtual void OfferSnapshot(const BlockHash& prefix, const BlockHash& last_block, std::span<const int32_t> tail,
                             std::shared_ptr<const SequenceSnapshot> snapshot) {
    (void)prefix, (void)last_block, (void)tail, (void)snapshot;
  }
  // The snapshot stored under `prefix`, verified, with its tail (asynchronously); done({}, nullptr) when
  // there is none or it fails verification.
  using SnapshotDone = std::function<void(std::vector<int32_t> tail, std::shared_ptr<const SequenceSnapshot>)>;
  virtual void ReadSnapshot(const BlockHash& prefix, SnapshotDone done) {
    (void)prefix;
    done({}, nullptr);
  }

  // Predicted seconds to read `blocks` blocks, from measured read speed: the engine loads only where this
  // beats recomputing them.
  virtual double PredictReadSeconds(int64_t blocks) const = 0;
};

}  // namespace deepinfer::kvcache
