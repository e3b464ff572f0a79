// The Engram hash constants: NumPy's default_rng reproduced for the multipliers, the prime layout, and the
// per-position row computation.
#include <algorithm>
#include <set>

#include "model/deepseek_v41/v41_engram.h"

namespace deepinfer::model {
namespace {

__extension__ using u128 = unsigned __int128;  // PCG64 is defined on 128-bit words

// NumPy's SeedSequence (bit_generator.pyx): the integer seed as little-endian 32-bit words, hashed into a
// pool of four words, from which the generator's state words are drawn.
constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875, kInitB = 0x8b51f9dd, kMultB = 0x58f38ded;
constexpr uint32_t kMixMultL = 0xca01f9dd, kMixMultR = 0x4973f715;

uint32_t HashMix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> 16;
  return value;
}

uint32_t Mix(uint32_t x, uint32_t y) {
  uint32_t result = kMixMultL * x - kMixMultR * y;
  result ^= result >> 16;
  return result;
}

std::vector<uint64_t> SeedSequenceState(uint64_t seed, int words64) {
  std::vector<uint32_t> entropy;
  if (seed == 0) entropy.push_back(0);
  for (uint64_t s = seed; s > 0; s >>= 32) entropy.push_back(static_cast<uint32_t>(s));
  uint32_t pool[4];
  uint32_t hash_const = kInitA;
  for (size_t i = 0; i < 4; ++i) pool[i] = HashMix(i < entropy.size() ? entropy[i] : 0, hash_const);
  for (size_t src = 0; src < 4; ++src)
    for (size_t dst = 0; dst < 4; ++dst)
      if (src != dst) pool[dst] = Mix(pool[dst], HashMix(pool[src], hash_const));
  for (size_t src = 4; src < entropy.size(); ++src)
    for (size_t dst = 0; dst < 4; ++dst) pool[dst] = Mix(pool[dst], HashMix(entropy[src], hash_const));
  std::vector<uint32_t> state(static_cast<size_t>(2 * words64));
  uint32_t hb = kInitB;
  for (size_t i = 0; i < state.size(); ++i) {
    uint32_t v = pool[i % 4];
    v ^= hb;
    hb *= kMultB;
    v *= hb;
    v ^= v >> 16;
    state[i] = v;
  }
  std::vector<uint64_t> out(static_cast<size_t>(words64));
  for (int i = 0; i < words64; ++i) out[i] = state[2 * i] | (static_cast<uint64_t>(state[2 * i + 1]) << 32);
  return out;
}

// PCG64 (XSL-RR 128/64) as NumPy seeds and steps it.
class Pcg64 {
 public:
  explicit Pcg64(uint64_t seed) {
    const std::vector<uint64_t> v = SeedSequenceState(seed, 4);
    const u128 initstate = (static_cast<u128>(v[0]) << 64) | v[1];
    const u128 initseq = (static_cast<u128>(v[2]) << 64) | v[3];
    state_ = 0;
    inc_ = (initseq << 1) | 1;
    Step();
    state_ += initstate;
    Step();
  }
  uint64_t Next() {
    Step();
    const uint64_t x = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
    const unsigned rot = static_cast<unsigned>(state_ >> 122);
    return (x >> rot) | (x << ((64 - rot) & 63));
  }

 private:
  void Step() {
    const u128 mult = (static_cast<u128>(0x2360ED051FC65DA4ull) << 64) | 0x4385DF649FCCF645ull;
    state_ = state_ * mult + inc_;
  }
  u128 state_, inc_;
};

uint64_t MulMod(uint64_t a, uint64_t b, uint64_t m) { return static_cast<uint64_t>(static_cast<u128>(a) * b % m); }

uint64_t PowMod(uint64_t a, uint64_t e, uint64_t m) {
  uint64_t r = 1;
  a %= m;
  for (; e; e >>= 1) {
    if (e & 1) r = MulMod(r, a, m);
    a = MulMod(a, a, m);
  }
  return r;
}

}  // namespace

Result<std::vector<int64_t>> NumpyDefaultRngIntegers(uint64_t seed, int64_t high, int64_t count) {
  if (high <= (int64_t{1} << 32) || count < 0)
    return Status::InvalidArgument("NumpyDefaultRngIntegers: only ranges above 2^32 are implemented");
  Pcg64 rng(seed);
  // Lemire's method over [0, high): NumPy's bounded_lemire_uint64 with rng = high − 1.
  const uint64_t range = static_cast<uint64_t>(high);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < count; ++i) {
    u128 m = static_cast<u128>(rng.Next()) * range;
    uint64_t leftover = static_cast<uint64_t>(m);
    if (leftover < range) {
      const uint64_t threshold = (UINT64_MAX - (range - 1)) % range;
      while (leftover < threshold) {
        m = static_cast<u128>(rng.Next()) * range;
        leftover = static_cast<uint64_t>(m);
      }
    }
    out.push_back(static_cast<int64_t>(m >> 64));
  }
  return out;
}

bool IsPrime(uint64_t n) {
  if (n < 2) return false;
  for (uint64_t p : {2ull, 3ull, 5ull, 7ull, 11ull, 13ull, 17ull, 19ull, 23ull, 29ull, 31ull, 37ull}) {
    if (n % p == 0) return n == p;
  }
  uint64_t d = n - 1;
  int s = 0;
  while ((d & 1) == 0) {
    d >>= 1;
    ++s;
  }
  // These bases decide every n < 2^64.
  for (uint64_t a : {2ull, 3ull, 5ull, 7ull, 11ull, 13ull, 17ull, 19ull, 23ull, 29ull, 31ull, 37ull}) {
    uint64_t x = PowMod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int r = 1; r < s; ++r) {
      x = MulMod(x, x, n);
      if (x == n - 1) {
        composite = false;
        break;
      }
    }
    if (composite) return false;
  }
  return true;
}

std::vector<int64_t> EngramPrimes(const V41EngramConfig& c) {
  // Successive primes from engram_vocab_size upward, never reused (transformers EngramLayout.from_config:
  // each n-gram size restarts its search at engram_vocab_size and skips the primes already taken).
  std::vector<int64_t> primes;
  std::set<int64_t> seen;
  for (size_t l = 0; l < c.layer_ids.size(); ++l) {
    for (int64_t g = 0; g + 1 < c.max_ngram_size; ++g) {
      int64_t current = c.vocab_size - 1;
      for (int64_t head = 0; head < c.n_heads; ++head) {
        int64_t candidate = current + 1;
        while (!IsPrime(static_cast<uint64_t>(candidate)) || seen.count(candidate)) ++candidate;
        current = candidate;
        seen.insert(current);
        primes.push_back(current);
      }
    }
  }
  return primes;
}

std::vector<int64_t> EngramTableRows(const V41EngramConfig& c) {
  const std::vector<int64_t> primes = EngramPrimes(c);
  const size_t per_layer = static_cast<size_t>((c.max_ngram_size - 1) * c.n_heads);
  std::vector<int64_t> rows(c.layer_ids.size(), 0);
  for (size_t i = 0; i < primes.size(); ++i) rows[i / per_layer] += primes[i];
  return rows;
}

Result<V41EngramHashing> V41EngramHashing::Create(const V41EngramConfig& c, std::vector<int32_t> token_map,
                                                  int64_t classes) {
  if (classes != c.compressed_vocab_size)
    return Status::InvalidArgument("the tokenizer gives " + std::to_string(classes) +
                                   " Engram compressed token classes but the config's engram_compressed_vocab_size is " +
                                   std::to_string(c.compressed_vocab_size) +
                                   " (the tokenizer does not match the model: every n-gram hash would differ)");
  V41EngramHashing h;
  h.num_layers = static_cast<int64_t>(c.layer_ids.size());
  h.max_ngram = c.max_ngram_size;
  h.heads = c.n_heads;
  if (c.pad_id < 0 || c.pad_id >= static_cast<int64_t>(token_map.size()))
    return Status::InvalidArgument("engram_pad_id " + std::to_string(c.pad_id) + " is outside the token map");
  h.pad_slot = token_map[c.pad_id];
  h.token_map = std::move(token_map);

  h.primes = EngramPrimes(c);
  int64_t at = 0;
  for (int64_t l = 0; l < h.num_layers; ++l) {
    int64_t total = 0;
    for (int64_t k = 0; k < h.columns(); ++k) {
      h.offsets.push_back(total);
      total += h.primes[at++];
    }
    if (total != c.num_embeddings[l])
      return Status::InvalidArgument("engram_num_embeddings[" + std::to_string(l) + "] is " +
                                     std::to_string(c.num_embeddings[l]) + " but the hash layout of layer " +
                                     std::to_string(c.layer_ids[l]) + " has " + std::to_string(total) + " rows");
  }

  // Multipliers 2r + 1, r < ((2^63 − 1) // classes) // 2, from default_rng(10007 · layer_id).
  const int64_t bound = std::max<int64_t>(1, (INT64_MAX / classes) / 2);
  for (int64_t l = 0; l < h.num_layers; ++l) {
    DI_ASSIGN_OR_RETURN(std::vector<int64_t> r,
                        NumpyDefaultRngIntegers(static_cast<uint64_t>(10007 * c.layer_ids[l]), bound, h.max_ngram));
    for (int64_t v : r) h.multipliers.push_back(2 * v + 1);
  }
  return h;
}

void V41EngramHashing::Rows(int64_t layer, const int64_t* slots, int64_t* rows) const {
  const int64_t* mult = multipliers.data() + layer * max_ngram;
  const int64_t* layer_primes = primes.data() + layer * columns();
  const int64_t* layer_offsets = offsets.data() + layer * columns();
  int64_t rolling = slots[0] * mult[0];
  for (int64_t i = 1; i < max_ngram; ++i) {
    rolling ^= slots[i] * mult[i];
    for (int64_t head = 0; head < heads; ++head) {
      const int64_t col = (i - 1) * heads + head;
      rows[col] = rolling % layer_primes[col] + layer_offsets[col];
    }
  }
}

}  // namespace deepinfer::model
