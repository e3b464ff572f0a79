// Block files and directory entries come from a shared directory any host can write: the header decoder,
// the checksum over a scattered payload and the name parsers must take any bytes without crashing,
// reading out of bounds or trusting a size field.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kvstore/block_format.h"
#include "kvstore/store_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer::kvstore;
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  ++data;
  --size;
  if (mode & 1) {
    const std::string_view name(reinterpret_cast<const char*>(data), size);
    std::string host;
    int64_t pid = 0, ms = 0;
    Hash128 h;
    ParseTmpName(name, &host, &pid);
    ParseLeadingMillis(name, &ms);
    ParseBlockName(name, &h);
    ParseHex(name, &h);
    IsNamespaceName(name);
    IsBucketName(name);
    return 0;
  }
  // A header page from the input (zero-padded), the rest as a payload cut into pieces at input-chosen points.
  alignas(64) uint8_t header[kHeaderBytes] = {};
  std::memcpy(header, data, size < kHeaderBytes ? size : kHeaderBytes);
  auto decoded = DecodeHeader(std::span<const uint8_t, kHeaderBytes>(header, kHeaderBytes));
  const uint8_t* rest = data + (size < kHeaderBytes ? size : kHeaderBytes);
  const size_t rest_size = size > kHeaderBytes ? size - kHeaderBytes : 0;
  std::vector<std::span<const uint8_t>> pieces;
  size_t at = 0;
  while (at < rest_size) {
    const size_t n = 1 + (rest[at] % 97);
    const size_t take = n < rest_size - at ? n : rest_size - at;
    pieces.emplace_back(rest + at, take);
    at += take;
  }
  const Hash128 sum = ComputeChecksum(std::span<const uint8_t, kHeaderBytes>(header, kHeaderBytes), pieces);
  if (decoded.ok()) {
    if (decoded->payload_bytes == 0 || decoded->payload_bytes > kMaxPayloadBytes) __builtin_trap();
    // Re-encoding what was decoded gives back the same header (a decoded header has no hidden state).
    alignas(64) uint8_t again[kHeaderBytes];
    EncodeHeader(*decoded, std::span<uint8_t, kHeaderBytes>(again, kHeaderBytes));
    std::memcpy(again + 96, header + 96, 16);  // EncodeHeader leaves the checksum zero
    if (std::memcmp(again, header, kHeaderBytes) != 0) __builtin_trap();
  }
  (void)sum;
  return 0;
}
