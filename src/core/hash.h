// 128-bit content hashes (XXH3-128 from Debian's libxxhash): the one hash every component uses to name
// content — the engine's chained prefix-block hashes, the model's weights fingerprint, the KV store's
// checksums. Not cryptographic: collisions are improbable (2^-64 after ~4·10^9 blocks), not impossible to
// forge, so where a tenant could craft inputs against another one, mix a secret salt into the seed data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace deepinfer {

struct Hash128 {
  uint64_t high = 0;
  uint64_t low = 0;

  // The canonical spelling (as xxh128sum prints it): 32 lowercase hex digits, high half first.
  std::string ToHex() const;
  friend bool operator==(const Hash128&, const Hash128&) = default;
  friend auto operator<=>(const Hash128&, const Hash128&) = default;
};

// XXH3-128 of the bytes with the given seed (seed 0 is the standard xxh128sum digest).
Hash128 HashBytes(const void* data, size_t size, uint64_t seed = 0);
inline Hash128 HashBytes(std::string_view bytes, uint64_t seed = 0) {
  return HashBytes(bytes.data(), bytes.size(), seed);
}

// Incremental XXH3-128: Update with pieces, Digest at any point; the digest equals HashBytes of all the
// pieces concatenated, however they were cut. Move-only.
class Hasher128 {
 public:
  explicit Hasher128(uint64_t seed = 0);
  ~Hasher128();
  Hasher128(Hasher128&&) noexcept;
  Hasher128& operator=(Hasher128&&) noexcept;

  Hasher128& Update(const void* data, size_t size);
  Hasher128& Update(std::string_view bytes) { return Update(bytes.data(), bytes.size()); }
  // A fixed-width integer in little-endian byte order (the same bytes on every host).
  Hasher128& UpdateInt(uint64_t value);
  Hash128 Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Hash128 as a key of unordered containers (the low half; the hash is already uniform).
struct Hash128Hasher {
  size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.low); }
};

}  // namespace deepinfer
