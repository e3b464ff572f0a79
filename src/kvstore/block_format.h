// The on-disk format of one KV block object (format version 1), and the store layout it belongs to.
// Owned by kvstore; the README's "KV store format" section is the normative description and must change
// with this file. Every multi-byte field is little-endian.
//
//   offset size  field
//        0    8  magic "DIKVBLK\0"
//        8    4  format version (1)
//       12    4  header bytes (4096: the payload starts page-aligned, so O_DIRECT can read a whole file)
//       16    8  payload bytes
//       24    8  creation time, Unix milliseconds (informative; expiry lives in the file's mtime)
//       32   16  namespace id: XXH3-128 of the model fingerprint and the KV layout (StoreLayout::Id)
//       48   16  block hash (the engine's chained hash; also the file name)
//       64   16  parent block hash (all zero for a sequence's first block)
//       80    4  block index in its sequence (position / 128)
//       84    1  TTL class (TtlClass)
//       85    3  zero
//       88    4  token count (128)
//       92    4  zero
//       96   16  checksum: XXH3-128 over the 4096 header bytes with this field zeroed, then the payload
//      112  512  the block's 128 token ids (int32)
//      624 3472  zero
//     4096    P  payload: the block's bytes for each persisted cache group, in layout order, as in the pool
// A file is exactly 4096 + P bytes. Anything else (other magic, version, sizes, non-zero reserved bytes,
// a checksum mismatch) is refused, never misread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/hash.h"
#include "core/status.h"
#include "kvcache/block_size.h"

namespace deepinfer::kvstore {

inline constexpr uint32_t kFormatVersion = 1;
inline constexpr size_t kHeaderBytes = 4096;
inline constexpr std::string_view kBlockMagic{"DIKVBLK\0", 8};
// Largest payload a header may declare: far above any real block (V4-Flash's is well under 4 MiB), low
// enough that a corrupt size field can never make a reader allocate or read without bound.
inline constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 30;

// 128-bit values (block hashes, fingerprints, checksums) are core's Hash128; in a file, low half first.
using deepinfer::Hash128;
using deepinfer::Hash128Hasher;

// Parses exactly 32 hex digits (either case, high half first, as Hash128::ToHex writes them).
bool ParseHex(std::string_view text, Hash128* out);

// How long a block lives after its last use. The class is a request's (`--kv-ttl-class` or the request's
// extension field); the durations are the store's options.
enum class TtlClass : uint8_t { kAgent = 0, kChat = 1 };
inline constexpr int kNumTtlClasses = 2;
std::string_view TtlClassName(TtlClass c);
bool ParseTtlClass(std::string_view name, TtlClass* out);

// What the blocks of one store namespace hold: the model (weights fingerprint) and the persisted cache
// groups' byte sizes and description (names, kinds, ratios, element formats, KV precision). Two processes
// share blocks exactly when their layouts have the same Id.
struct StoreLayout {
  Hash128 model_fingerprint;
  // Human-readable and canonical: it enters the Id, so it must spell everything that changes the bytes.
  std::string description;
  // Bytes of each persisted group's block, in the order they appear in the payload.
  std::vector<uint64_t> segment_bytes;

  uint64_t payload_bytes() const;
  Hash128 Id() const;
  Status Validate() const;
};

struct BlockHeader {
  uint32_t version = kFormatVersion;
  uint64_t payload_bytes = 0;
  int64_t created_unix_ms = 0;
  Hash128 namespace_id;
  Hash128 block_hash;
  Hash128 parent_hash;
  uint32_t block_index = 0;
  TtlClass ttl_class = TtlClass::kChat;
  std::array<int32_t, kvcache::kBlockTokens> tokens{};
  Hash128 checksum;  // filled by SealHeader / read by DecodeHeader
};

// Writes the header into out[0, kHeaderBytes) with a zero checksum field.
void EncodeHeader(const BlockHeader& header, std::span<uint8_t, kHeaderBytes> out);
// Computes the checksum over the encoded header (checksum field zero) and the payload pieces, and stores
// it in the header bytes.
Hash128 SealHeader(std::span<uint8_t, kHeaderBytes> header, std::span<const std::span<const uint8_t>> payload);
// Parses and structurally checks a header (magic, version, sizes, reserved bytes); kDataLoss with the
// reason on any mismatch, kFailedPrecondition for another format version.
Result<BlockHeader> DecodeHeader(std::span<const uint8_t, kHeaderBytes> bytes);
// The checksum the header bytes and payload actually have (the stored one is ignored).
Hash128 ComputeChecksum(std::span<const uint8_t, kHeaderBytes> header, std::span<const std::span<const uint8_t>> payload);

// Why a block read was refused; each has its own counter.
enum class VerifyFailure : uint8_t {
  kNone = 0,
  kTruncated,     // the file's size is not 4096 + payload (short, long, or empty)
  kHeader,        // bad magic, reserved bytes, sizes or token count
  kVersion,       // another format version
  kNamespace,     // another model's or layout's block (e.g. a file copied or swapped in)
  kHash,          // the header's block hash or parent is not the one the file is named / asked for
  kTokens,        // the token ids differ: a hash collision, forced or real
  kChecksum,      // header or payload bytes changed
  kIo,            // the read itself failed
};
inline constexpr int kNumVerifyFailures = 9;
std::string_view VerifyFailureName(VerifyFailure f);

}  // namespace deepinfer::kvstore
