// The KV store as the engine's persistent tier (kvcache::LowerTier): prefix blocks written behind to a
// directory on an SSD or a shared filesystem, looked up and read back verified at admission. The engine
// calls it only through LowerTier; the CLI opens the store and hands the tier to the engine.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/hash.h"
#include "core/status.h"
#include "kvcache/kv_cache_spec.h"
#include "kvcache/lower_tier.h"
#include "kvstore/snapshot_files.h"
#include "kvstore/store.h"

namespace deepinfer::kvstore {

// What names the bytes of a model's blocks besides its cache spec. The strings enter the layout's
// description verbatim, so a given model must always spell them alike.
struct StoreModel {
  std::string architecture;        // the model's architecture name (ModelInfo::architecture)
  Hash128 weights_fingerprint;     // of the loaded weights
  std::string compute_precision;   // "exact" or "bf16"
  std::string kv_precision;        // "f32" or "bf16"
};

// The store layout of a loaded model: its weights fingerprint and its kPrefix groups (window groups stay
// in RAM), with a description that spells everything that changes a block's bytes (group names, kinds,
// ratios, element formats, sizes, layers, compute and KV precision). Fails for a model without any
// prefix group.
Result<StoreLayout> StoreLayoutFor(const kvcache::KvCacheSpec& spec, const StoreModel& model);

class KvStoreTier final : public kvcache::LowerTier {
 public:
  // `default_ttl` serves requests whose ttl_class is empty or unknown; `snapshot_writes`: where the snapshot
  // files are written (snapshot_files.h: kBackground where no request waits for a write).
  KvStoreTier(std::unique_ptr<Store> store, TtlClass default_ttl,
              SnapshotWrites snapshot_writes = SnapshotWrites::kWithReads);
  ~KvStoreTier() override;

  void Offer(const kvcache::BlockKey& key, std::span<const std::span<const uint8_t>> group_bytes) override;
  void Lookup(std::vector<kvcache::BlockKey> keys, std::function<void(size_t leading_present)> done) override;
  void Read(std::vector<kvcache::BlockKey> keys, std::vector<std::vector<std::span<uint8_t>>> destinations,
            std::function<void(size_t leading_ok)> done) override;
  double PredictReadSeconds(int64_t blocks) const override;
  // Snapshots are files beside the blocks (snapshot_format.h), written and read on threads of their own.
  void OfferSnapshot(const kvcache::BlockHash& prefix, const kvcache::BlockHash& last_block, std::span<const int32_t> tail,
                     std::shared_ptr<const kvcache::SequenceSnapshot> snapshot) override;
  void ReadSnapshot(const kvcache::BlockHash& prefix, SnapshotDone done) override;

  // Where snapshot files offered from now on are written (a unit whose role changes).
  void SetSnapshotWrites(SnapshotWrites writes);

  // Waits until every block and snapshot offered so far is written (what another unit or a restart finds).
  void Flush();

  Store& store() { return *store_; }
  SnapshotFiles* snapshot_files() { return snapshots_.get(); }  // null when the directory could not be opened
  const Store& store() const { return *store_; }

 private:
  TtlClass ClassOf(std::string_view name) const;

  std::unique_ptr<Store> store_;
  TtlClass default_ttl_;
  std::unique_ptr<SnapshotFiles> snapshots_;
};

}  // namespace deepinfer::kvstore
