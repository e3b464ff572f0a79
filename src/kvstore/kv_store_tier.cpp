#include "kvstore/kv_store_tier.h"

#include <memory>
#include <string>
#include <string_view>

namespace deepinfer::kvstore {

Result<StoreLayout> StoreLayoutFor(const kvcache::KvCacheSpec& spec, const StoreModel& model) {
  StoreLayout layout;
  layout.model_fingerprint = model.weights_fingerprint;
  layout.description = model.architecture + ";";
  for (const auto& g : spec.groups) {
    if (g.retention != kvcache::CacheRetention::kPrefix) continue;
    layout.segment_bytes.push_back(static_cast<uint64_t>(g.bytes_per_block));
    layout.description += " " + g.name + " " + kvcache::CacheKindName(g.kind) + " r=" + std::to_string(g.ratio) +
                          " " + kvcache::CacheElementName(g.element) + " " + std::to_string(g.bytes_per_block) +
                          "B x" + std::to_string(g.num_layers) + ";";
  }
  layout.description += " compute=" + model.compute_precision + " kv=" + model.kv_precision;
  if (layout.segment_bytes.empty()) return Status::FailedPrecondition("the model has no prefix cache group to persist");
  DI_RETURN_IF_ERROR(layout.Validate());
  return layout;
}

KvStoreTier::KvStoreTier(std::unique_ptr<Store> store, TtlClass default_ttl, SnapshotWrites snapshot_writes)
    : store_(std::move(store)), default_ttl_(default_ttl) {
  auto dir = StoreDir::Open(store_->dir(), false);
  if (dir.ok())
    snapshots_ = std::make_unique<SnapshotFiles>(std::move(dir).value(), store_->namespace_id(),
                                                 store_->ttl_seconds(default_ttl_), snapshot_writes);
}

KvStoreTier::~KvStoreTier() = default;

void KvStoreTier::SetSnapshotWrites(SnapshotWrites writes) {
  if (snapshots_) snapshots_->SetWrites(writes);
}

TtlClass KvStoreTier::ClassOf(std::string_view name) const {
  TtlClass c = default_ttl_;
  if (!name.empty()) ParseTtlClass(name, &c);
  return c;
}

void KvStoreTier::Offer(const kvcache::BlockKey& key, std::span<const std::span<const uint8_t>> group_bytes) {
  BlockWrite w;
  w.hash = key.hash;
  w.parent = key.parent;
  w.tokens = key.tokens;
  w.ttl = ClassOf(key.ttl_class);
  w.segments = group_bytes;
  store_->Put(w);  // a dropped write is counted by the store; the block stays in RAM either way
}

void KvStoreTier::Lookup(std::vector<kvcache::BlockKey> keys, std::function<void(size_t)> done) {
  std::vector<Hash128> hashes;
  hashes.reserve(keys.size());
  for (const auto& k : keys) hashes.push_back(k.hash);
  store_->Lookup(std::move(hashes), [done = std::move(done)](LookupResult r) { done(r.prefix); });
}

void KvStoreTier::Read(std::vector<kvcache::BlockKey> keys, std::vector<std::vector<std::span<uint8_t>>> destinations,
                       std::function<void(size_t)> done) {
  // The keys hold the expected token ids the store compares against: they live with the callback.
  auto owned = std::make_shared<std::vector<kvcache::BlockKey>>(std::move(keys));
  std::vector<ReadItem> items;
  items.reserve(owned->size());
  for (size_t i = 0; i < owned->size(); ++i) {
    const kvcache::BlockKey& k = (*owned)[i];
    ReadItem item;
    item.hash = k.hash;
    item.parent = k.parent;
    item.tokens = k.tokens;
    item.ttl = ClassOf(k.ttl_class);
    if (i < destinations.size()) item.dest = std::move(destinations[i]);
    items.push_back(std::move(item));
  }
  store_->Read(std::move(items), [owned, done = std::move(done)](std::vector<ReadResult> results) {
    size_t leading = 0;
    while (leading < results.size() && results[leading].status.ok()) ++leading;
    done(leading);
  });
}

void KvStoreTier::OfferSnapshot(const kvcache::BlockHash& prefix, const kvcache::BlockHash& last_block,
                                std::span<const int32_t> tail, std::shared_ptr<const kvcache::SequenceSnapshot> snapshot) {
  if (!snapshots_) return;
  snapshots_->Write(
      {.prefix = prefix, .last_block = last_block, .tail = {tail.begin(), tail.end()}, .snapshot = std::move(snapshot)});
}

void KvStoreTier::ReadSnapshot(const kvcache::BlockHash& prefix, SnapshotDone done) {
  if (!snapshots_) {
    done({}, nullptr);
    return;
  }
  snapshots_->Read(prefix, std::move(done));
}

void KvStoreTier::Flush() {
  store_->Flush();
  if (snapshots_) snapshots_->Flush();
}

double KvStoreTier::PredictReadSeconds(int64_t blocks) const {
  return store_->PredictReadSeconds(static_cast<size_t>(blocks < 0 ? 0 : blocks));
}

}  // namespace deepinfer::kvstore
