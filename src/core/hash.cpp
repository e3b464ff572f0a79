#include "core/hash.h"

#include <xxhash.h>

#include <cassert>

namespace deepinfer {

std::string Hash128::ToHex() const {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[15 - i] = kDigits[(high >> (4 * i)) & 0xF];
    out[31 - i] = kDigits[(low >> (4 * i)) & 0xF];
  }
  return out;
}

Hash128 HashBytes(const void* data, size_t size, uint64_t seed) {
  const XXH128_hash_t h = XXH3_128bits_withSeed(data, size, seed);
  return {h.high64, h.low64};
}

// The library's own allocation (its state layout is private unless statically linked).
struct Hasher128::State {
  XXH3_state_t* xxh = XXH3_createState();
  ~State() { XXH3_freeState(xxh); }
};

Hasher128::Hasher128(uint64_t seed) : state_(std::make_unique<State>()) {
  // Fails only for a null state, i.e. when the allocation failed, which operator new would have thrown for.
  [[maybe_unused]] const XXH_errorcode rc = XXH3_128bits_reset_withSeed(state_->xxh, seed);
  assert(rc == XXH_OK);
}

Hasher128::~Hasher128() = default;
Hasher128::Hasher128(Hasher128&&) noexcept = default;
Hasher128& Hasher128::operator=(Hasher128&&) noexcept = default;

Hasher128& Hasher128::Update(const void* data, size_t size) {
  if (size > 0) XXH3_128bits_update(state_->xxh, data, size);
  return *this;
}

Hasher128& Hasher128::UpdateInt(uint64_t value) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  return Update(bytes, sizeof bytes);
}

Hash128 Hasher128::Digest() const {
  const XXH128_hash_t h = XXH3_128bits_digest(state_->xxh);
  return {h.high64, h.low64};
}

}  // namespace deepinfer
