#include "engine/kv_store_tier.h"

#include <memory>
#include <string>
#include <string_view>

namespace deepinfer::engine {

Result<kvstore::StoreLayout> StoreLayoutFor(const model::KvCacheSpec& spec, const model::ModelInfo& info,
                                            model::ComputePrecision compute, model::KvPrecision kv) {
  kvstore::StoreLayout layout;
  layout.model_fingerprint = info.weights_fingerprint;
  layout.description = info.architecture + ";";
  for (const auto& g : spec.groups) {
    if (g.retention != model::CacheRetention::kPrefix) continue;
    layout.segment_bytes.push_back(static_cast<uint64_t>(g.bytes_per_block));
    layout.description += " " + g.name + " " + model::CacheKindName(g.kind) + " r=" + std::to_string(g.ratio) + " " +
                          model::CacheElementName(g.element) + " " + std::to_string(g.bytes_per_block) + "B x" +
                          std::to_string(g.num_layers) + ";";
  }
  layout.description += std::string(" compute=") + (compute == model::ComputePrecision::kExact ? "exact" : "bf16") +
                        " kv=" + (kv == model::KvPrecision::kF32 ? "f32" : "bf16");
  if (layout.segment_bytes.empty()) return Status::FailedPrecondition("the model has no prefix cache group to persist");
  DI_RETURN_IF_ERROR(layout.Validate());
  return layout;
}

KvStoreTier::KvStoreTier(std::unique_ptr<kvstore::Store> store, kvstore::TtlClass default_ttl)
    : store_(std::move(store)), default_ttl_(default_ttl) {}

KvStoreTier::~KvStoreTier() = default;

kvstore::TtlClass KvStoreTier::ClassOf(std::string_view name) const {
  kvstore::TtlClass c = default_ttl_;
  if (!name.empty()) kvstore::ParseTtlClass(name, &c);
  return c;
}

void KvStoreTier::Offer(const kvcache::BlockKey& key, std::span<const std::span<const uint8_t>> group_bytes) {
  kvstore::BlockWrite w;
  w.hash = key.hash;
  w.parent = key.parent;
  w.tokens = key.tokens;
  w.ttl = ClassOf(key.ttl_class);
  w.segments = group_bytes;
  store_->Put(w);  // a dropped write is counted by the store; the block stays in RAM either way
}

void KvStoreTier::Lookup(std::vector<kvcache::BlockKey> keys, std::function<void(size_t)> done) {
  std::vector<kvstore::Hash128> hashes;
  hashes.reserve(keys.size());
  for (const auto& k : keys) hashes.push_back(k.hash);
  store_->Lookup(std::move(hashes), [done = std::move(done)](kvstore::LookupResult r) { done(r.prefix); });
}

void KvStoreTier::Read(std::vector<kvcache::BlockKey> keys, std::vector<std::vector<std::span<uint8_t>>> destinations,
                       std::function<void(size_t)> done) {
  // The keys hold the expected token ids the store compares against: they live with the callback.
  auto owned = std::make_shared<std::vector<kvcache::BlockKey>>(std::move(keys));
  std::vector<kvstore::ReadItem> items;
  items.reserve(owned->size());
  for (size_t i = 0; i < owned->size(); ++i) {
    const kvcache::BlockKey& k = (*owned)[i];
    kvstore::ReadItem item;
    item.hash = k.hash;
    item.parent = k.parent;
    item.tokens = k.tokens;
    item.ttl = ClassOf(k.ttl_class);
    if (i < destinations.size()) item.dest = std::move(destinations[i]);
    items.push_back(std::move(item));
  }
  store_->Read(std::move(items), [owned, done = std::move(done)](std::vector<kvstore::ReadResult> results) {
    size_t leading = 0;
    while (leading < results.size() && results[leading].status.ok()) ++leading;
    done(leading);
  });
}

double KvStoreTier::PredictReadSeconds(int64_t blocks) const {
  return store_->PredictReadSeconds(static_cast<size_t>(blocks < 0 ? 0 : blocks));
}

void AppendTierPrometheus(const EngineStats& stats, std::string* out) {
  auto counter = [out](std::string_view name, std::string_view help, uint64_t value) {
    *out += "# HELP ";
    *out += name;
    *out += ' ';
    *out += help;
    *out += "\n# TYPE ";
    *out += name;
    *out += " counter\n";
    *out += name;
    *out += ' ';
    *out += std::to_string(value);
    *out += '\n';
  };
  counter("deepinfer:kvstore_tier_timeouts_total",
          "Requests that stopped waiting for the KV store after --kv-store-timeout-s and recomputed.",
          stats.lower_tier_timeouts);
  counter("deepinfer:kvstore_tier_skipped_blocks_total",
          "Blocks the KV store held but recomputed, reading them being predicted slower.",
          stats.lower_tier_skipped_blocks);
  counter("deepinfer:kvstore_tier_lookups_total", "Prompts looked up in the KV store after their RAM prefix match.",
          stats.lower_tier_lookups);
  counter("deepinfer:kvstore_tier_lookup_misses_total",
          "Of those lookups, the ones whose first block after the RAM match was not in the store.",
          stats.lower_tier_lookup_misses);
  counter("deepinfer:kvstore_tier_no_room_blocks_total",
          "Blocks the KV store held but recomputed, the RAM pool never having room to read them into.",
          stats.lower_tier_no_room_blocks);
}

}  // namespace deepinfer::engine
