#include "kvstore/block_format.h"

#include <gtest/gtest.h>

#include <random>

namespace deepinfer::kvstore {
namespace {

TEST(BlockFormat, HexRoundTripAndRejects) {
  const Hash128 h{.high = 0xfedcba9876543210ull, .low = 0x0123456789abcdefull};
  EXPECT_EQ(h.ToHex(), "fedcba98765432100123456789abcdef");  // high first
  Hash128 back;
  ASSERT_TRUE(ParseHex("FEDCBA98765432100123456789ABCDEF", &back));
  EXPECT_EQ(back, h);
  EXPECT_FALSE(ParseHex("fedcba98765432100123456789abcde", &back));    // 31 digits
  EXPECT_FALSE(ParseHex("fedcba98765432100123456789abcdeg", &back));   // not hex
  EXPECT_FALSE(ParseHex("fedcba98765432100123456789abcdef0", &back));  // 33 digits
}

// The checksum of a scattered block equals the one over its bytes laid end to end: the read path verifies
// a block spread over several pool blocks without gathering it.
TEST(BlockFormat, ChecksumIgnoresHowThePayloadIsCut) {
  std::array<uint8_t, kHeaderBytes> header;
  BlockHeader h;
  h.payload_bytes = 10000;
  EncodeHeader(h, header);
  std::mt19937 rng(5);
  std::vector<uint8_t> data(10000);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const std::span<const uint8_t> whole_piece(data);
  const Hash128 whole = ComputeChecksum(header, std::span(&whole_piece, 1));
  // By hand: XXH3-128 of the header (checksum field zero, as EncodeHeader leaves it) then the payload.
  std::vector<uint8_t> all(header.begin(), header.end());
  all.insert(all.end(), data.begin(), data.end());
  EXPECT_EQ(whole, HashBytes(all.data(), all.size()));
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<std::span<const uint8_t>> pieces;
    size_t at = 0;
    while (at < data.size()) {
      const size_t n = std::min<size_t>(data.size() - at, rng() % 3000);
      pieces.push_back(std::span<const uint8_t>(data).subspan(at, n));
      at += n;
    }
    EXPECT_EQ(ComputeChecksum(header, pieces), whole);
  }
}

BlockHeader SampleHeader() {
  BlockHeader h;
  h.payload_bytes = 8000;
  h.created_unix_ms = 1764000000123;
  h.namespace_id = {.high = 2, .low = 1};
  h.block_hash = {.high = 4, .low = 3};
  h.parent_hash = {.high = 6, .low = 5};
  h.block_index = 7;
  h.ttl_class = TtlClass::kAgent;
  for (int i = 0; i < kvcache::kBlockTokens; ++i) h.tokens[i] = i * 1000 - 3;
  return h;
}

TEST(BlockFormat, HeaderRoundTripsAtDocumentedOffsets) {
  const BlockHeader h = SampleHeader();
  std::array<uint8_t, kHeaderBytes> bytes;
  EncodeHeader(h, bytes);
  // Offsets from the table in block_format.h.
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), 8), std::string("DIKVBLK\0", 8));
  EXPECT_EQ(bytes[8], 1);     // version
  EXPECT_EQ(bytes[13], 0x10); // 4096 = 0x1000, little-endian
  EXPECT_EQ(bytes[16], 8000 & 0xFF);
  EXPECT_EQ(bytes[17], 8000 >> 8);
  EXPECT_EQ(bytes[32], 1);  // namespace, low half
  EXPECT_EQ(bytes[40], 2);  // namespace, high half
  EXPECT_EQ(bytes[48], 3);
  EXPECT_EQ(bytes[64], 5);
  EXPECT_EQ(bytes[80], 7);
  EXPECT_EQ(bytes[84], 0);  // agent
  EXPECT_EQ(bytes[88], 128);
  EXPECT_EQ(bytes[112], 0xFD);  // token 0 = -3
  EXPECT_EQ(bytes[115], 0xFF);
  std::vector<uint8_t> payload(8000, 0x5A);
  const std::span<const uint8_t> piece(payload);
  const Hash128 sum = SealHeader(bytes, std::span(&piece, 1));
  auto back = DecodeHeader(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->checksum, sum);
  EXPECT_EQ(back->payload_bytes, h.payload_bytes);
  EXPECT_EQ(back->created_unix_ms, h.created_unix_ms);
  EXPECT_EQ(back->namespace_id, h.namespace_id);
  EXPECT_EQ(back->block_hash, h.block_hash);
  EXPECT_EQ(back->parent_hash, h.parent_hash);
  EXPECT_EQ(back->block_index, h.block_index);
  EXPECT_EQ(back->ttl_class, h.ttl_class);
  EXPECT_EQ(back->tokens, h.tokens);
  EXPECT_EQ(ComputeChecksum(bytes, std::span(&piece, 1)), sum);
}

// Property: any single changed byte of header or payload is caught, by the header checks or the checksum.
TEST(BlockFormat, EveryByteFlipIsDetected) {
  std::array<uint8_t, kHeaderBytes> bytes;
  EncodeHeader(SampleHeader(), bytes);
  std::vector<uint8_t> payload(8000);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 31);
  std::span<const uint8_t> piece(payload);
  const Hash128 sum = SealHeader(bytes, std::span(&piece, 1));
  auto detected = [&] {
    auto h = DecodeHeader(bytes);
    return !h.ok() || ComputeChecksum(bytes, std::span(&piece, 1)) != h->checksum;
  };
  ASSERT_FALSE(detected());
  for (size_t i = 0; i < kHeaderBytes; ++i) {
    bytes[i] ^= 0x01;
    EXPECT_TRUE(detected()) << "header byte " << i;
    bytes[i] ^= 0x01;
  }
  for (size_t i = 0; i < payload.size(); i += 7) {
    payload[i] ^= 0x80;
    EXPECT_TRUE(detected()) << "payload byte " << i;
    payload[i] ^= 0x80;
  }
  EXPECT_EQ(ComputeChecksum(bytes, std::span(&piece, 1)), sum);
}

TEST(BlockFormat, OtherVersionIsRefusedNotMisread) {
  std::array<uint8_t, kHeaderBytes> bytes;
  EncodeHeader(SampleHeader(), bytes);
  bytes[8] = 2;
  auto h = DecodeHeader(bytes);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(h.status().message().find("version 2"), std::string::npos) << h.status().message();
  bytes[8] = 1;
  bytes[0] = 'X';
  EXPECT_EQ(DecodeHeader(bytes).status().code(), StatusCode::kDataLoss);
}

TEST(BlockFormat, PayloadSizeIsBounded) {
  BlockHeader h = SampleHeader();
  h.payload_bytes = kMaxPayloadBytes + 1;
  std::array<uint8_t, kHeaderBytes> bytes;
  EncodeHeader(h, bytes);
  EXPECT_EQ(DecodeHeader(bytes).status().code(), StatusCode::kDataLoss);
}

TEST(BlockFormat, LayoutIdCoversEveryField) {
  StoreLayout a;
  a.model_fingerprint = {.high = 2, .low = 1};
  a.description = "g0 compressed r=4 f32";
  a.segment_bytes = {100, 200};
  StoreLayout b = a;
  EXPECT_EQ(a.Id(), b.Id());
  b.model_fingerprint.high = 3;
  EXPECT_NE(a.Id(), b.Id());
  b = a;
  b.description += " ";
  EXPECT_NE(a.Id(), b.Id());
  b = a;
  b.segment_bytes = {200, 100};
  EXPECT_NE(a.Id(), b.Id());
  b = a;
  b.segment_bytes = {300};
  EXPECT_NE(a.Id(), b.Id());
  EXPECT_EQ(a.payload_bytes(), 300u);
  EXPECT_TRUE(a.Validate().ok());
  b.segment_bytes = {};
  EXPECT_FALSE(b.Validate().ok());
  b.segment_bytes = {0};
  EXPECT_FALSE(b.Validate().ok());
}

TEST(BlockFormat, TtlClassNames) {
  TtlClass c;
  ASSERT_TRUE(ParseTtlClass("agent", &c));
  EXPECT_EQ(c, TtlClass::kAgent);
  ASSERT_TRUE(ParseTtlClass("chat", &c));
  EXPECT_EQ(TtlClassName(c), "chat");
  EXPECT_FALSE(ParseTtlClass("forever", &c));
}

}  // namespace
}  // namespace deepinfer::kvstore
