// The on-disk form of a finished sequence's snapshot (token-exact continuation, kvcache/sequence_snapshot.h),
// stored beside the blocks of its namespace as DIR/<ns>/<hh>/<name>.kvs, named by the engine from the chained
// hash of the sequence's full blocks and its cache layout (a later snapshot over the same blocks replaces it). Format version 2; every
// multi-byte field little-endian:
//
//   offset size  field
//        0    8  magic "DIKVSNP\0"
//        8    4  format version (2)
//       12    4  tail token count t (0..127): the tokens after the full blocks (0: a state at a block
//                boundary, num_tokens >= 128)
//       16   16  namespace id (StoreLayout::Id)
//       32   16  the name it is stored under
//       48    8  num_tokens (= 128 · full blocks + t)
//       56   32  prefix_first, prefix_count, window_first, window_count (int64 each)
//       88    8  state bytes S
//       96    8  block bytes B
//      104   16  checksum: XXH3-128 over the whole record with this field zeroed
//      120   16  the name of the sequence's last full block (the chained hash it is stored under; zero when
//                num_tokens < 128): the record is of no use once that block is gone, and a sweep removes it
//      136    8  zero
//      144  4·t  tail token ids (int32)
//        …    S  the model's sequence state
//        …    B  the carried blocks' bytes
// A file is exactly 144 + 4t + S + B bytes. Anything else (magic, version, sizes past their bounds,
// inconsistent counts, non-zero reserved bytes, another namespace or prefix, a checksum mismatch) is
// refused, never misread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/hash.h"
#include "core/status.h"
#include "kvcache/sequence_snapshot.h"

namespace deepinfer::kvstore {

inline constexpr uint32_t kSnapshotFormatVersion = 2;
inline constexpr size_t kSnapshotHeaderBytes = 144;
inline constexpr std::string_view kSnapshotMagic{"DIKVSNP\0", 8};
// Bounds on what a header may declare, far above real snapshots (a V4-Flash one is a few MiB), so that a
// corrupt size never makes a reader allocate or read without bound.
inline constexpr uint64_t kMaxSnapshotStateBytes = uint64_t{1} << 28;
inline constexpr uint64_t kMaxSnapshotBlockBytes = uint64_t{1} << 30;
inline constexpr uint64_t kMaxSnapshotFileBytes =
    kSnapshotHeaderBytes + 4 * 127 + kMaxSnapshotStateBytes + kMaxSnapshotBlockBytes;

struct SnapshotRecord {
  Hash128 prefix;      // the name it is stored under
  Hash128 last_block;  // the name of the last full block it continues (ignored when it continues none)
  std::vector<int32_t> tail;
  std::shared_ptr<const kvcache::SequenceSnapshot> snapshot;
};

// The file's bytes. InvalidArgument for a tail past 127 or counts that do not match num_tokens.
Result<std::vector<uint8_t>> EncodeSnapshotRecord(const Hash128& namespace_id, const SnapshotRecord& record);
// The file's first kSnapshotHeaderBytes + 4·t bytes (the header, its checksum over the whole record, and the
// tail ids); the snapshot's state and blocks follow them. Same errors as EncodeSnapshotRecord.
Result<std::vector<uint8_t>> EncodeSnapshotHead(const Hash128& namespace_id, const SnapshotRecord& record);
// Parses and verifies a file's bytes as a snapshot of `prefix` in namespace `namespace_id`; kDataLoss
// with the reason on any mismatch, kFailedPrecondition for another format version.
Result<SnapshotRecord> DecodeSnapshotRecord(std::span<const uint8_t> bytes, const Hash128& namespace_id,
                                            const Hash128& prefix);
// What a record's header declares: its tail count and the bytes of state and blocks after the tail ids.
struct SnapshotRecordSizes {
  uint32_t tail = 0;
  uint64_t state_bytes = 0, block_bytes = 0;
  uint64_t head_bytes() const { return kSnapshotHeaderBytes + 4 * uint64_t{tail}; }
  uint64_t file_bytes() const { return head_bytes() + state_bytes + block_bytes; }
};
// From a record's first kSnapshotHeaderBytes bytes; the errors of DecodeSnapshotRecord for them.
Result<SnapshotRecordSizes> SnapshotRecordSizesOf(std::span<const uint8_t> header);
// DecodeSnapshotRecord of a file read in three pieces: its head (header and tail ids), its state and its
// blocks, which become the snapshot's own without a copy.
Result<SnapshotRecord> DecodeSnapshotPieces(std::span<const uint8_t> head, std::vector<uint8_t> state,
                                            std::vector<uint8_t> blocks, const Hash128& namespace_id,
                                            const Hash128& prefix);
// From a record's first kSnapshotHeaderBytes bytes alone (a sweep reads no more): the name of the last
// full block its snapshot continues, nullopt when it continues none (fewer than 128 positions). kDataLoss:
// not a snapshot record; kFailedPrecondition: another format version.
Result<std::optional<Hash128>> SnapshotRecordBlock(std::span<const uint8_t> header);

}  // namespace deepinfer::kvstore
