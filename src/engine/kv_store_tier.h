// The KV store (src/kvstore) as the engine's persistent tier (kvcache::LowerTier): prefix blocks written
// behind to a directory on an SSD or a shared filesystem, looked up and read back verified at admission.
// Owned by the "kvstore" helper; the engine calls it only through LowerTier.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "engine/engine.h"
#include "kvcache/lower_tier.h"
#include "kvstore/store.h"
#include "model/causal_lm.h"
#include "model/kv_cache_spec.h"

namespace deepinfer::engine {

// The store layout of a loaded model: its weights fingerprint and its kPrefix groups (window groups stay
// in RAM), with a description that spells everything that changes a block's bytes (group names, kinds,
// ratios, element formats, sizes, layers, compute and KV precision). Fails for a model without any
// prefix group.
Result<kvstore::StoreLayout> StoreLayoutFor(const model::KvCacheSpec& spec, const model::ModelInfo& info,
                                            model::ComputePrecision compute, model::KvPrecision kv);

// The engine's side of the tier in Prometheus text, beside the store's own metrics on /metrics: waits cut
// short by EngineOptions::lower_tier_timeout_s (a slow or hung filesystem) and blocks recomputed because
// reading them was predicted slower.
void AppendTierPrometheus(const EngineStats& stats, std::string* out);

class KvStoreTier final : public kvcache::LowerTier {
 public:
  // `default_ttl` serves requests whose ttl_class is empty or unknown.
  KvStoreTier(std::unique_ptr<kvstore::Store> store, kvstore::TtlClass default_ttl);
  ~KvStoreTier() override;

  void Offer(const kvcache::BlockKey& key, std::span<const std::span<const uint8_t>> group_bytes) override;
  void Lookup(std::vector<kvcache::BlockKey> keys, std::function<void(size_t leading_present)> done) override;
  void Read(std::vector<kvcache::BlockKey> keys, std::vector<std::vector<std::span<uint8_t>>> destinations,
            std::function<void(size_t leading_ok)> done) override;
  double PredictReadSeconds(int64_t blocks) const override;

  kvstore::Store& store() { return *store_; }
  const kvstore::Store& store() const { return *store_; }

 private:
  kvstore::TtlClass ClassOf(std::string_view name) const;

  std::unique_ptr<kvstore::Store> store_;
  kvstore::TtlClass default_ttl_;
};

}  // namespace deepinfer::engine
