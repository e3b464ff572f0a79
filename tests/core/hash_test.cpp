// XXH3-128 through core/hash.h: the published digests (xxh128sum of "" and "abc"), and the properties the
// engine relies on: streaming equals one-shot however the input is cut, and the seed changes the digest.
#include "core/hash.h"

#include <string>

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

TEST(Hash, KnownDigests) {
  // xxh128sum's output for the empty input and for "abc" (the xxHash project's reference values).
  EXPECT_EQ(HashBytes("").ToHex(), "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(HashBytes("abc").ToHex(), "06b05ab6733a618578af5f94892f3950");
  const Hash128 empty = HashBytes("");
  EXPECT_EQ(empty.high, 0x99aa06d3014798d8ull);
  EXPECT_EQ(empty.low, 0x6001c324468d497full);
}

TEST(Hash, StreamingEqualsOneShotForEveryCut) {
  // Lengths around the algorithm's internal thresholds (16, 128, 240 bytes, the 256-byte stripe buffer).
  std::string data;
  for (int i = 0; i < 1100; ++i) data.push_back(static_cast<char>((i * 131 + 7) & 0xFF));
  for (size_t len : {size_t{0}, size_t{1}, size_t{16}, size_t{17}, size_t{128}, size_t{129}, size_t{240},
                     size_t{241}, size_t{256}, size_t{1024}, size_t{1100}}) {
    const std::string_view whole(data.data(), len);
    const Hash128 want = HashBytes(whole, 5);
    for (size_t piece : {size_t{1}, size_t{3}, size_t{64}, size_t{255}}) {
      Hasher128 h(5);
      for (size_t at = 0; at < len; at += piece) h.Update(whole.substr(at, piece));
      EXPECT_EQ(h.Digest(), want) << "length " << len << " in pieces of " << piece;
    }
  }
}

TEST(Hash, SeedAndContentChangeTheDigest) {
  EXPECT_NE(HashBytes("abc", 0), HashBytes("abc", 1));
  EXPECT_NE(HashBytes("abc"), HashBytes("abd"));
  Hasher128 a, b;
  a.UpdateInt(1).UpdateInt(2);
  b.UpdateInt(2).UpdateInt(1);
  EXPECT_NE(a.Digest(), b.Digest());
  // UpdateInt is the little-endian bytes of the value.
  Hasher128 c;
  c.UpdateInt(0x0102030405060708ull);
  EXPECT_EQ(c.Digest(), HashBytes(std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8)));
}

TEST(Hash, HexIsThirtyTwoLowercaseDigitsHighHalfFirst) {
  EXPECT_EQ((Hash128{0x0123456789abcdefull, 0xfedcba9876543210ull}).ToHex(), "0123456789abcdeffedcba9876543210");
  EXPECT_EQ(Hash128{}.ToHex(), std::string(32, '0'));
}

}  // namespace
}  // namespace deepinfer
