// The store layout of a cache spec: which groups a block file holds, and the description and namespace id
// that existing store directories were written under (a change here orphans every stored block).
#include "kvstore/kv_store_tier.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace deepinfer::kvstore {
namespace {

kvcache::CacheGroupSpec Group(std::string name, kvcache::CacheKind kind, kvcache::CacheRetention retention,
                              int64_t ratio, int64_t bytes, kvcache::CacheElement element, int64_t layers) {
  kvcache::CacheGroupSpec g;
  g.name = std::move(name);
  g.kind = kind;
  g.retention = retention;
  g.ratio = ratio;
  g.window = kind == kvcache::CacheKind::kSlidingWindow ? 128 : 0;
  g.bytes_per_block = bytes;
  g.element = element;
  g.num_layers = layers;
  return g;
}

kvcache::KvCacheSpec FourGroupSpec() {
  constexpr auto kPrefix = kvcache::CacheRetention::kPrefix;
  kvcache::KvCacheSpec spec;
  spec.groups = {
      Group("csa_kv", kvcache::CacheKind::kCompressed, kPrefix, 4, 65536, kvcache::CacheElement::kF32, 2),
      Group("hca_kv", kvcache::CacheKind::kCompressed, kPrefix, 128, 2048, kvcache::CacheElement::kBF16, 1),
      Group("indexer", kvcache::CacheKind::kIndexerKeys, kPrefix, 4, 9216, kvcache::CacheElement::kFP4E2M1, 2),
      Group("window", kvcache::CacheKind::kSlidingWindow, kvcache::CacheRetention::kWindow, 1, 262144,
            kvcache::CacheElement::kFP8E4M3, 3)};
  return spec;
}

StoreModel V4Model(std::string compute, std::string kv) {
  return {"DeepseekV4ForCausalLM", Hash128{0x0123456789abcdefull, 0xfedcba9876543210ull}, std::move(compute),
          std::move(kv)};
}

TEST(StoreLayoutFor, DescriptionAndNamespaceStayThoseOfExistingStores) {
  const std::string groups =
      "DeepseekV4ForCausalLM; csa_kv compressed r=4 f32 65536B x2; hca_kv compressed r=128 bf16 2048B x1; "
      "indexer indexer_keys r=4 fp4_e2m1 9216B x2;";
  struct Expected {
    const char* compute;
    const char* kv;
    const char* id;
  };
  const Expected cases[] = {{"exact", "f32", "e4429f9341f4b82af6da4c5ab679091e"},
                            {"exact", "bf16", "5aa3d032dff23292c67ad956f950202b"},
                            {"bf16", "f32", "909d871165259f8c4cc4d3bed4f8fdc4"},
                            {"bf16", "bf16", "7aa346f32c0d104a4c24e9058a169574"}};
  for (const Expected& e : cases) {
    auto layout = StoreLayoutFor(FourGroupSpec(), V4Model(e.compute, e.kv));
    ASSERT_TRUE(layout.ok()) << layout.status().ToString();
    EXPECT_EQ(layout->description, groups + " compute=" + e.compute + " kv=" + e.kv);
    EXPECT_EQ(layout->Id().ToHex(), e.id) << e.compute << " " << e.kv;
  }
}

TEST(StoreLayoutFor, HoldsThePrefixGroupsInSpecOrder) {
  auto layout = StoreLayoutFor(FourGroupSpec(), V4Model("exact", "f32"));
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->segment_bytes, (std::vector<uint64_t>{65536, 2048, 9216}));
  EXPECT_EQ(layout->payload_bytes(), 65536u + 2048u + 9216u);
  EXPECT_EQ(layout->model_fingerprint, (Hash128{0x0123456789abcdefull, 0xfedcba9876543210ull}));
  EXPECT_EQ(layout->description.find("window"), std::string::npos) << "window groups stay in RAM";
}

TEST(StoreLayoutFor, RefusesASpecWithoutPrefixGroups) {
  kvcache::KvCacheSpec spec = FourGroupSpec();
  spec.groups.erase(spec.groups.begin(), spec.groups.begin() + 3);
  EXPECT_EQ(StoreLayoutFor(spec, V4Model("exact", "f32")).status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace deepinfer::kvstore
