// DeepSeek-V4.1 Engram hashing against transformers' deepseek_v41: the compressed token map built from the
// fixtures' tokenizer, NumPy's default_rng multipliers, the prime layout and every position's table rows of
// the fixtures' sequences (reference.safetensors `*.engram_hash_ids`), and the released model's constants.
#include "model/deepseek_v41/v41_engram.h"

#include <gtest/gtest.h>

#include <numeric>

#include "core/hf_config.h"
#include "model/deepseek_v41/v41_config.h"
#include "v41_fixture.h"

namespace deepinfer::model {
namespace {

using test_support::V41FixtureDir;
using test_support::V41FixtureNames;
using test_support::V41Reference;

TEST(V41EngramTest, NumpyDefaultRngMatchesKnownDraws) {
  // The released model's multipliers (transformers compute_hash_multipliers on the released config:
  // default_rng(10007 · layer).integers(0, 46539438283891, 4) · 2 + 1 for layers 1 and 14; from the
  // fixtures' release_engram_constants.json).
  const int64_t bound = (INT64_MAX / 99092) / 2;
  ASSERT_EQ(bound, 46539438283891);
  const std::vector<std::vector<int64_t>> expected = {
      {76632096046245, 4839876093313, 35959672319349, 73987337458391},
      {67716810739261, 51510806800915, 30921347202721, 82619226485591}};
  const int64_t layers[] = {1, 14};
  for (int i = 0; i < 2; ++i) {
    auto r = NumpyDefaultRngIntegers(static_cast<uint64_t>(10007 * layers[i]), bound, 4);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (int k = 0; k < 4; ++k) EXPECT_EQ(2 * (*r)[k] + 1, expected[i][k]) << layers[i] << " " << k;
  }
  EXPECT_FALSE(NumpyDefaultRngIntegers(1, 1000, 4).ok());  // NumPy draws 32-bit ranges differently
}

TEST(V41EngramTest, ReleasedLayout) {
  V41EngramConfig c;
  c.layer_ids = {1, 14};
  c.num_embeddings = {384006168, 384016682};
  c.vocab_size = 16000000;
  c.max_ngram_size = 4;
  c.n_heads = 8;
  c.head_dim = 256;
  c.pad_id = 2;
  c.compressed_vocab_size = 99092;
  std::vector<int32_t> identity(99092);
  std::iota(identity.begin(), identity.end(), 0);
  auto h = V41EngramHashing::Create(c, identity, 99092);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  // The first primes above 16,000,000 and the last of the second layer; offsets are running sums.
  EXPECT_EQ(h->primes[0], 16000057);
  EXPECT_EQ(h->primes[1], 16000079);
  EXPECT_EQ(h->primes[23], 16000463);
  EXPECT_EQ(h->primes[24], 16000477);
  EXPECT_EQ(h->primes[47], 16000889);
  EXPECT_EQ(h->offsets[1], 16000057);
  EXPECT_EQ(h->offsets[23], 368005705);
  EXPECT_EQ(h->offsets[24 + 23], 368015793);
  EXPECT_EQ(h->pad_slot, 2);
  // A table size that disagrees with the primes is an error naming the layer.
  c.num_embeddings[1] += 1;
  auto bad = V41EngramHashing::Create(c, identity, 99092);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("layer 14"), std::string::npos) << bad.status().message();
  // So is a tokenizer whose class count differs from engram_compressed_vocab_size.
  c.num_embeddings[1] -= 1;
  auto wrong = V41EngramHashing::Create(c, identity, 98627);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("98627"), std::string::npos);
}

TEST(V41EngramTest, PrimesAgreeWithTrialDivision) {
  for (uint64_t n = 0; n < 20000; ++n) {
    bool prime = n >= 2;
    for (uint64_t d = 2; d * d <= n && prime; ++d) prime = n % d != 0;
    EXPECT_EQ(IsPrime(n), prime) << n;
  }
  EXPECT_TRUE(IsPrime(18446744073709551557ull));   // the largest 64-bit prime
  EXPECT_FALSE(IsPrime(3215031751ull));            // a strong pseudoprime to bases 2, 3, 5, 7
}

class V41EngramFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(V41EngramFixtureTest, TokenMapAndHashRowsMatchTheReference) {
  const std::string dir = V41FixtureDir(GetParam());
  V41Reference ref(GetParam());
  ASSERT_TRUE(ref.ok());
  auto hf = HfConfig::Load(dir);
  ASSERT_TRUE(hf.ok());
  auto config = V41Config::FromHf(*hf);
  ASSERT_TRUE(config.ok()) << config.status().ToString();

  int64_t classes = 0;
  auto map = BuildEngramTokenMap(dir + "/tokenizer.json", config->vocab_size, &classes);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(classes, 418);
  const std::vector<int64_t> want_map = ref.Int64s("engram.token_map");
  ASSERT_EQ(map->size(), want_map.size());
  for (size_t i = 0; i < want_map.size(); ++i) EXPECT_EQ((*map)[i], want_map[i]) << "token " << i;

  auto h = V41EngramHashing::Create(config->engram, *map, classes);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->multipliers, ref.Int64s("engram.multipliers"));
  EXPECT_EQ(h->primes, ref.Int64s("engram.primes"));
  EXPECT_EQ(h->offsets, ref.Int64s("engram.offsets"));

  for (const char* seq : {"seq_len5", "seq_len150", "seq_len400"}) {
    const std::vector<int64_t> ids = ref.Int64s(std::string(seq) + ".input_ids");
    const std::vector<int64_t> want = ref.Int64s(std::string(seq) + ".engram_hash_ids");
    const int64_t layers = h->num_layers, cols = h->columns();
    ASSERT_EQ(static_cast<int64_t>(want.size()), static_cast<int64_t>(ids.size()) * layers * cols);
    std::vector<int64_t> slots(static_cast<size_t>(h->max_ngram)), rows(static_cast<size_t>(cols));
    for (int64_t p = 0; p < static_cast<int64_t>(ids.size()); ++p) {
      for (int64_t k = 0; k < h->max_ngram; ++k) slots[k] = p - k >= 0 ? h->token_map[ids[p - k]] : h->pad_slot;
      for (int64_t l = 0; l < layers; ++l) {
        h->Rows(l, slots.data(), rows.data());
        for (int64_t c = 0; c < cols; ++c)
          ASSERT_EQ(rows[c], want[(p * layers + l) * cols + c]) << seq << " position " << p << " layer " << l;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, V41EngramFixtureTest, ::testing::ValuesIn(V41FixtureNames()));

}  // namespace
}  // namespace deepinfer::model
