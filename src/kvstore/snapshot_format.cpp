#include "kvstore/snapshot_format.h"

#include <cstring>
#include <string>

#include "kvcache/block_size.h"

namespace deepinfer::kvstore {
namespace {

constexpr size_t kSnapshotChecksumOffset = 104;

void SnapPut64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t SnapGet64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
void SnapPut32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t SnapGet32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}
void SnapPutHash(uint8_t* p, const Hash128& h) {
  SnapPut64(p, h.low);
  SnapPut64(p + 8, h.high);
}
Hash128 SnapGetHash(const uint8_t* p) { return {.high = SnapGet64(p + 8), .low = SnapGet64(p)}; }

Hash128 SnapshotChecksum(std::span<const uint8_t> bytes) {
  Hasher128 s;
  s.Update(bytes.data(), kSnapshotChecksumOffset);
  static constexpr uint8_t kZero[16] = {};
  s.Update(kZero, sizeof kZero);
  s.Update(bytes.data() + kSnapshotChecksumOffset + 16, bytes.size() - kSnapshotChecksumOffset - 16);
  return s.Digest();
}

// Counts a snapshot of num_tokens positions can carry: the partial prefix block (at most one) right after
// the full ones, and window blocks ending at the partial one.
bool CountsFit(int64_t num_tokens, int64_t prefix_first, int64_t prefix_count, int64_t window_first,
               int64_t window_count) {
  const int64_t full = num_tokens / kvcache::kBlockTokens;
  const int64_t extent = (num_tokens + kvcache::kBlockTokens - 1) / kvcache::kBlockTokens;
  return num_tokens > 0 && num_tokens < (int64_t{1} << 40) && prefix_first == full && prefix_count >= 0 && prefix_count <= 1 && window_count >= 0 &&
         window_first >= 0 && window_first <= extent && window_count <= extent - window_first;
}

}  // namespace

Result<std::vector<uint8_t>> EncodeSnapshotRecord(const Hash128& namespace_id, const SnapshotRecord& record) {
  const kvcache::SequenceSnapshot* s = record.snapshot.get();
  if (s == nullptr) return Status::InvalidArgument("snapshot record: no snapshot");
  const auto t = static_cast<int64_t>(record.tail.size());
  if (t < 1 || t >= kvcache::kBlockTokens || s->num_tokens % kvcache::kBlockTokens != t ||
      !CountsFit(s->num_tokens, s->prefix_first, s->prefix_count, s->window_first, s->window_count) ||
      s->state.size() > kMaxSnapshotStateBytes || s->blocks.size() > kMaxSnapshotBlockBytes)
    return Status::InvalidArgument("snapshot record: its tail, counts or sizes are out of range");
  std::vector<uint8_t> out(kSnapshotHeaderBytes + 4 * record.tail.size() + s->state.size() + s->blocks.size());
  uint8_t* p = out.data();
  std::memcpy(p, kSnapshotMagic.data(), kSnapshotMagic.size());
  SnapPut32(p + 8, kSnapshotFormatVersion);
  SnapPut32(p + 12, static_cast<uint32_t>(t));
  SnapPutHash(p + 16, namespace_id);
  SnapPutHash(p + 32, record.prefix);
  int64_t fields[] = {s->num_tokens, s->prefix_first, s->prefix_count, s->window_first, s->window_count};
  for (size_t i = 0; i < 5; ++i) SnapPut64(p + 48 + 8 * i, static_cast<uint64_t>(fields[i]));
  SnapPut64(p + 88, s->state.size());
  SnapPut64(p + 96, s->blocks.size());
  if (s->num_tokens >= kvcache::kBlockTokens) SnapPutHash(p + 120, record.last_block);
  uint8_t* q = p + kSnapshotHeaderBytes;
  for (int32_t token : record.tail) {
    SnapPut32(q, static_cast<uint32_t>(token));
    q += 4;
  }
  if (!s->state.empty()) std::memcpy(q, s->state.data(), s->state.size());
  q += s->state.size();
  if (!s->blocks.empty()) std::memcpy(q, s->blocks.data(), s->blocks.size());
  SnapPutHash(p + kSnapshotChecksumOffset, SnapshotChecksum(out));
  return out;
}

Result<std::optional<Hash128>> SnapshotRecordBlock(std::span<const uint8_t> header) {
  if (header.size() < kSnapshotHeaderBytes) return Status::DataLoss("snapshot record: truncated header");
  const uint8_t* p = header.data();
  if (std::memcmp(p, kSnapshotMagic.data(), kSnapshotMagic.size()) != 0)
    return Status::DataLoss("snapshot record: bad magic");
  if (const uint32_t version = SnapGet32(p + 8); version != kSnapshotFormatVersion)
    return Status::FailedPrecondition("snapshot record format version " + std::to_string(version));
  if (static_cast<int64_t>(SnapGet64(p + 48)) < kvcache::kBlockTokens) return std::optional<Hash128>();
  return std::optional<Hash128>(SnapGetHash(p + 120));
}

Result<SnapshotRecord> DecodeSnapshotRecord(std::span<const uint8_t> bytes, const Hash128& namespace_id,
                                            const Hash128& prefix) {
  if (bytes.size() < kSnapshotHeaderBytes) return Status::DataLoss("snapshot record: truncated header");
  const uint8_t* p = bytes.data();
  if (std::memcmp(p, kSnapshotMagic.data(), kSnapshotMagic.size()) != 0)
    return Status::DataLoss("snapshot record: bad magic");
  if (const uint32_t version = SnapGet32(p + 8); version != kSnapshotFormatVersion)
    return Status::FailedPrecondition("snapshot record format version " + std::to_string(version) +
                                      ", this build reads version " + std::to_string(kSnapshotFormatVersion));
  const uint32_t t = SnapGet32(p + 12);
  const uint64_t state_bytes = SnapGet64(p + 88), block_bytes = SnapGet64(p + 96);
  if (t < 1 || t >= kvcache::kBlockTokens || state_bytes > kMaxSnapshotStateBytes || block_bytes > kMaxSnapshotBlockBytes)
    return Status::DataLoss("snapshot record: sizes out of range");
  if (bytes.size() != kSnapshotHeaderBytes + 4 * uint64_t{t} + state_bytes + block_bytes)
    return Status::DataLoss("snapshot record: the file's size does not match its header");
  if (SnapGet64(p + 136) != 0) return Status::DataLoss("snapshot record: reserved bytes are not zero");
  if (!(SnapGetHash(p + kSnapshotChecksumOffset) == SnapshotChecksum(bytes)))
    return Status::DataLoss("snapshot record: checksum mismatch");
  if (!(SnapGetHash(p + 16) == namespace_id)) return Status::DataLoss("snapshot record: another namespace's");
  if (!(SnapGetHash(p + 32) == prefix)) return Status::DataLoss("snapshot record: another prefix's");
  auto s = std::make_shared<kvcache::SequenceSnapshot>();
  int64_t* fields[] = {&s->num_tokens, &s->prefix_first, &s->prefix_count, &s->window_first, &s->window_count};
  for (size_t i = 0; i < 5; ++i) *fields[i] = static_cast<int64_t>(SnapGet64(p + 48 + 8 * i));
  if (s->num_tokens % kvcache::kBlockTokens != t ||
      !CountsFit(s->num_tokens, s->prefix_first, s->prefix_count, s->window_first, s->window_count))
    return Status::DataLoss("snapshot record: inconsistent counts");
  SnapshotRecord record;
  record.prefix = prefix;
  record.last_block = SnapGetHash(p + 120);
  const uint8_t* q = p + kSnapshotHeaderBytes;
  record.tail.resize(t);
  for (uint32_t i = 0; i < t; ++i, q += 4) record.tail[i] = static_cast<int32_t>(SnapGet32(q));
  s->state.assign(q, q + state_bytes);
  q += state_bytes;
  s->blocks.assign(q, q + block_bytes);
  record.snapshot = std::move(s);
  return record;
}

}  // namespace deepinfer::kvstore
