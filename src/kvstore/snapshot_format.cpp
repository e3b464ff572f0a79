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

// XXH3-128 over the record as the file holds it (its head, then the state, then the blocks), with the
// checksum field taken as zero.
Hash128 RecordChecksum(std::span<const uint8_t> head, std::span<const uint8_t> state, std::span<const uint8_t> blocks) {
  Hasher128 h;
  h.Update(head.data(), kSnapshotChecksumOffset);
  static constexpr uint8_t kZero[16] = {};
  h.Update(kZero, sizeof kZero);
  h.Update(head.data() + kSnapshotChecksumOffset + 16, head.size() - kSnapshotChecksumOffset - 16);
  if (!state.empty()) h.Update(state.data(), state.size());
  if (!blocks.empty()) h.Update(blocks.data(), blocks.size());
  return h.Digest();
}

// Counts a snapshot of num_tokens positions can carry: the partial prefix block (at most one) right after
// the full ones (none at a block boundary), and window blocks ending at the partial one.
bool CountsFit(int64_t num_tokens, int64_t prefix_first, int64_t prefix_count, int64_t window_first,
               int64_t window_count) {
  const int64_t full = num_tokens / kvcache::kBlockTokens;
  const int64_t extent = (num_tokens + kvcache::kBlockTokens - 1) / kvcache::kBlockTokens;
  return num_tokens > 0 && num_tokens < (int64_t{1} << 40) && prefix_first == full && prefix_count >= 0 &&
         prefix_count <= (num_tokens % kvcache::kBlockTokens != 0 ? 1 : 0) && window_count >= 0 &&
         window_first >= 0 && window_first <= extent && window_count <= extent - window_first;
}

}  // namespace

Result<std::vector<uint8_t>> EncodeSnapshotHead(const Hash128& namespace_id, const SnapshotRecord& record) {
  const kvcache::SequenceSnapshot* s = record.snapshot.get();
  if (s == nullptr) return Status::InvalidArgument("snapshot record: no snapshot");
  const auto t = static_cast<int64_t>(record.tail.size());
  if (t >= kvcache::kBlockTokens || s->num_tokens % kvcache::kBlockTokens != t ||
      !CountsFit(s->num_tokens, s->prefix_first, s->prefix_count, s->window_first, s->window_count) ||
      s->state.size() > kMaxSnapshotStateBytes || s->blocks.size() > kMaxSnapshotBlockBytes)
    return Status::InvalidArgument("snapshot record: its tail, counts or sizes are out of range");
  std::vector<uint8_t> out(kSnapshotHeaderBytes + 4 * record.tail.size());
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
  SnapPutHash(p + kSnapshotChecksumOffset, RecordChecksum(out, s->state, s->blocks));
  return out;
}

Result<std::vector<uint8_t>> EncodeSnapshotRecord(const Hash128& namespace_id, const SnapshotRecord& record) {
  DI_ASSIGN_OR_RETURN(std::vector<uint8_t> out, EncodeSnapshotHead(namespace_id, record));
  const kvcache::SequenceSnapshot& s = *record.snapshot;
  out.insert(out.end(), s.state.begin(), s.state.end());
  out.insert(out.end(), s.blocks.begin(), s.blocks.end());
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

Result<SnapshotRecordSizes> SnapshotRecordSizesOf(std::span<const uint8_t> header) {
  if (header.size() < kSnapshotHeaderBytes) return Status::DataLoss("snapshot record: truncated header");
  const uint8_t* p = header.data();
  if (std::memcmp(p, kSnapshotMagic.data(), kSnapshotMagic.size()) != 0)
    return Status::DataLoss("snapshot record: bad magic");
  if (const uint32_t version = SnapGet32(p + 8); version != kSnapshotFormatVersion)
    return Status::FailedPrecondition("snapshot record format version " + std::to_string(version) +
                                      ", this build reads version " + std::to_string(kSnapshotFormatVersion));
  SnapshotRecordSizes sizes;
  sizes.tail = SnapGet32(p + 12);
  sizes.state_bytes = SnapGet64(p + 88);
  sizes.block_bytes = SnapGet64(p + 96);
  if (sizes.tail >= kvcache::kBlockTokens || sizes.state_bytes > kMaxSnapshotStateBytes ||
      sizes.block_bytes > kMaxSnapshotBlockBytes)
    return Status::DataLoss("snapshot record: sizes out of range");
  return sizes;
}

Result<SnapshotRecord> DecodeSnapshotPieces(std::span<const uint8_t> head, std::vector<uint8_t> state,
                                            std::vector<uint8_t> blocks, const Hash128& namespace_id,
                                            const Hash128& prefix) {
  DI_ASSIGN_OR_RETURN(const SnapshotRecordSizes sizes, SnapshotRecordSizesOf(head));
  if (head.size() != kSnapshotHeaderBytes + 4 * uint64_t{sizes.tail} || state.size() != sizes.state_bytes ||
      blocks.size() != sizes.block_bytes)
    return Status::DataLoss("snapshot record: the file's size does not match its header");
  const uint8_t* p = head.data();
  if (SnapGet64(p + 136) != 0) return Status::DataLoss("snapshot record: reserved bytes are not zero");
  if (!(SnapGetHash(p + kSnapshotChecksumOffset) == RecordChecksum(head, state, blocks)))
    return Status::DataLoss("snapshot record: checksum mismatch");
  if (!(SnapGetHash(p + 16) == namespace_id)) return Status::DataLoss("snapshot record: another namespace's");
  if (!(SnapGetHash(p + 32) == prefix)) return Status::DataLoss("snapshot record: another prefix's");
  auto s = std::make_shared<kvcache::SequenceSnapshot>();
  int64_t* fields[] = {&s->num_tokens, &s->prefix_first, &s->prefix_count, &s->window_first, &s->window_count};
  for (size_t i = 0; i < 5; ++i) *fields[i] = static_cast<int64_t>(SnapGet64(p + 48 + 8 * i));
  if (s->num_tokens % kvcache::kBlockTokens != sizes.tail ||
      !CountsFit(s->num_tokens, s->prefix_first, s->prefix_count, s->window_first, s->window_count))
    return Status::DataLoss("snapshot record: inconsistent counts");
  SnapshotRecord record;
  record.prefix = prefix;
  record.last_block = SnapGetHash(p + 120);
  const uint8_t* q = p + kSnapshotHeaderBytes;
  record.tail.resize(sizes.tail);
  for (uint32_t i = 0; i < sizes.tail; ++i, q += 4) record.tail[i] = static_cast<int32_t>(SnapGet32(q));
  s->state = std::move(state);
  s->blocks = std::move(blocks);
  record.snapshot = std::move(s);
  return record;
}

Result<SnapshotRecord> DecodeSnapshotRecord(std::span<const uint8_t> bytes, const Hash128& namespace_id,
                                            const Hash128& prefix) {
  DI_ASSIGN_OR_RETURN(const SnapshotRecordSizes sizes, SnapshotRecordSizesOf(bytes));
  if (bytes.size() != sizes.file_bytes())
    return Status::DataLoss("snapshot record: the file's size does not match its header");
  const size_t head = kSnapshotHeaderBytes + 4 * size_t{sizes.tail};
  const uint8_t* state = bytes.data() + head;
  const uint8_t* blocks = state + sizes.state_bytes;
  return DecodeSnapshotPieces(bytes.first(head), std::vector<uint8_t>(state, blocks),
                              std::vector<uint8_t>(blocks, blocks + sizes.block_bytes), namespace_id, prefix);
}

}  // namespace deepinfer::kvstore
