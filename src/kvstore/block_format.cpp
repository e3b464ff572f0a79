#include "kvstore/block_format.h"

#include <cstring>


namespace deepinfer::kvstore {
namespace {

constexpr size_t kChecksumOffset = 96;
constexpr size_t kTokensOffset = 112;
constexpr size_t kUsedHeaderBytes = kTokensOffset + 4 * kvcache::kBlockTokens;

void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void Put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutHash(uint8_t* p, const Hash128& h) {
  Put64(p, h.low);
  Put64(p + 8, h.high);
}
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{p[i]} << (8 * i);
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}
Hash128 GetHash(const uint8_t* p) { return {.high = Get64(p + 8), .low = Get64(p)}; }

bool AllZero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

}  // namespace

bool ParseHex(std::string_view text, Hash128* out) {
  if (text.size() != 32) return false;
  uint64_t parts[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    const char c = text[i];
    uint64_t d;
    if (c >= '0' && c <= '9') d = static_cast<uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f') d = static_cast<uint64_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') d = static_cast<uint64_t>(c - 'A' + 10);
    else return false;
    parts[i / 16] = (parts[i / 16] << 4) | d;
  }
  out->high = parts[0];
  out->low = parts[1];
  return true;
}

std::string_view TtlClassName(TtlClass c) {
  switch (c) {
    case TtlClass::kAgent: return "agent";
    case TtlClass::kChat: return "chat";
  }
  return "?";
}

bool ParseTtlClass(std::string_view name, TtlClass* out) {
  if (name == "agent") *out = TtlClass::kAgent;
  else if (name == "chat") *out = TtlClass::kChat;
  else return false;
  return true;
}

uint64_t StoreLayout::payload_bytes() const {
  uint64_t total = 0;
  for (uint64_t b : segment_bytes) total += b;
  return total;
}

Hash128 StoreLayout::Id() const {
  // The id covers the format version too: a future format with the same layout gets its own namespace.
  Hasher128 s;
  uint8_t fixed[8 + 16 + 8];
  std::memcpy(fixed, kBlockMagic.data(), 8);
  PutHash(fixed + 8, model_fingerprint);
  Put64(fixed + 24, (uint64_t{kFormatVersion} << 32) | segment_bytes.size());
  s.Update(fixed, sizeof fixed);
  for (uint64_t b : segment_bytes) s.UpdateInt(b);
  s.Update(description);
  return s.Digest();
}

Status StoreLayout::Validate() const {
  if (segment_bytes.empty()) return Status::InvalidArgument("store layout has no persisted cache group");
  uint64_t total = 0;
  for (uint64_t b : segment_bytes) {
    if (b == 0) return Status::InvalidArgument("store layout has an empty cache group");
    total += b;
    if (total > kMaxPayloadBytes) {
      return Status::InvalidArgument("store layout's block payload exceeds " + std::to_string(kMaxPayloadBytes) +
                                     " bytes");
    }
  }
  if (description.size() > 4096) return Status::InvalidArgument("store layout description longer than 4096 bytes");
  return Status::Ok();
}

void EncodeHeader(const BlockHeader& header, std::span<uint8_t, kHeaderBytes> out) {
  uint8_t* p = out.data();
  std::memset(p, 0, kHeaderBytes);
  std::memcpy(p, kBlockMagic.data(), kBlockMagic.size());
  Put32(p + 8, header.version);
  Put32(p + 12, static_cast<uint32_t>(kHeaderBytes));
  Put64(p + 16, header.payload_bytes);
  Put64(p + 24, static_cast<uint64_t>(header.created_unix_ms));
  PutHash(p + 32, header.namespace_id);
  PutHash(p + 48, header.block_hash);
  PutHash(p + 64, header.parent_hash);
  Put32(p + 80, header.block_index);
  p[84] = static_cast<uint8_t>(header.ttl_class);
  Put32(p + 88, static_cast<uint32_t>(kvcache::kBlockTokens));
  for (int i = 0; i < kvcache::kBlockTokens; ++i)
    Put32(p + kTokensOffset + 4 * i, static_cast<uint32_t>(header.tokens[i]));
}

Hash128 ComputeChecksum(std::span<const uint8_t, kHeaderBytes> header, std::span<const std::span<const uint8_t>> payload) {
  Hasher128 s;
  s.Update(header.data(), kChecksumOffset);
  static constexpr uint8_t kZero[16] = {};
  s.Update(kZero, sizeof kZero);
  s.Update(header.data() + kChecksumOffset + 16, kHeaderBytes - kChecksumOffset - 16);
  for (const auto& piece : payload) s.Update(piece.data(), piece.size());
  return s.Digest();
}

Hash128 SealHeader(std::span<uint8_t, kHeaderBytes> header, std::span<const std::span<const uint8_t>> payload) {
  const Hash128 sum = ComputeChecksum(header, payload);
  PutHash(header.data() + kChecksumOffset, sum);
  return sum;
}

Result<BlockHeader> DecodeHeader(std::span<const uint8_t, kHeaderBytes> bytes) {
  const uint8_t* p = bytes.data();
  if (std::memcmp(p, kBlockMagic.data(), kBlockMagic.size()) != 0) return Status::DataLoss("not a KV block (bad magic)");
  BlockHeader h;
  h.version = Get32(p + 8);
  if (h.version != kFormatVersion) {
    return Status::FailedPrecondition("KV block format version " + std::to_string(h.version) + ", this build reads version " +
                                      std::to_string(kFormatVersion));
  }
  if (Get32(p + 12) != kHeaderBytes) return Status::DataLoss("KV block header size is not 4096");
  h.payload_bytes = Get64(p + 16);
  if (h.payload_bytes == 0 || h.payload_bytes > kMaxPayloadBytes) return Status::DataLoss("KV block payload size out of range");
  h.created_unix_ms = static_cast<int64_t>(Get64(p + 24));
  h.namespace_id = GetHash(p + 32);
  h.block_hash = GetHash(p + 48);
  h.parent_hash = GetHash(p + 64);
  h.block_index = Get32(p + 80);
  if (p[84] >= kNumTtlClasses) return Status::DataLoss("KV block has an unknown TTL class");
  h.ttl_class = static_cast<TtlClass>(p[84]);
  if (!AllZero(p + 85, 3) || !AllZero(p + 92, 4)) return Status::DataLoss("KV block header has non-zero reserved bytes");
  if (Get32(p + 88) != kvcache::kBlockTokens) return Status::DataLoss("KV block token count is not 128");
  h.checksum = GetHash(p + kChecksumOffset);
  for (int i = 0; i < kvcache::kBlockTokens; ++i) h.tokens[i] = static_cast<int32_t>(Get32(p + kTokensOffset + 4 * i));
  if (!AllZero(p + kUsedHeaderBytes, kHeaderBytes - kUsedHeaderBytes)) {
    return Status::DataLoss("KV block header has non-zero padding");
  }
  return h;
}

std::string_view VerifyFailureName(VerifyFailure f) {
  switch (f) {
    case VerifyFailure::kNone: return "none";
    case VerifyFailure::kTruncated: return "truncated";
    case VerifyFailure::kHeader: return "header";
    case VerifyFailure::kVersion: return "version";
    case VerifyFailure::kNamespace: return "namespace";
    case VerifyFailure::kHash: return "hash";
    case VerifyFailure::kTokens: return "tokens";
    case VerifyFailure::kChecksum: return "checksum";
    case VerifyFailure::kIo: return "io";
  }
  return "?";
}

}  // namespace deepinfer::kvstore
