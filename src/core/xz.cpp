#include "core/xz.h"

#include <lzma.h>

#include <algorithm>

namespace deepinfer {

bool IsXz(std::string_view bytes) { return bytes.size() >= 6 && bytes.substr(0, 6) == std::string_view("\xFD" "7zXZ\0", 6); }

Result<std::string> XzDecompress(std::string_view compressed, size_t max_bytes) {
  lzma_stream stream = LZMA_STREAM_INIT;
  constexpr uint64_t kMemoryLimit = uint64_t{256} << 20;
  if (lzma_stream_decoder(&stream, kMemoryLimit, LZMA_CONCATENATED) != LZMA_OK) {
    return Status::Internal("cannot start the xz decoder");
  }
  // The buffer grows to at most max_bytes + 1: one byte of room past the bound tells "exactly max_bytes"
  // (the stream then ends) from "more than max_bytes".
  const size_t cap = max_bytes + 1;
  std::string out;
  out.resize(std::min<size_t>(cap, std::max<size_t>(compressed.size() * 4, 1 << 16)));
  stream.next_in = reinterpret_cast<const uint8_t*>(compressed.data());
  stream.avail_in = compressed.size();
  stream.next_out = reinterpret_cast<uint8_t*>(out.data());
  stream.avail_out = out.size();
  Status status = Status::Ok();
  while (true) {
    const lzma_ret ret = lzma_code(&stream, stream.avail_in == 0 ? LZMA_FINISH : LZMA_RUN);
    if (ret == LZMA_STREAM_END) break;
    if (ret == LZMA_OK || ret == LZMA_BUF_ERROR) {
      if (stream.avail_out == 0) {
        const size_t used = out.size();
        if (used >= cap) {
          status = Status::ResourceExhausted("xz data decompresses to more than " + std::to_string(max_bytes) + " bytes");
          break;
        }
        out.resize(std::min(cap, used * 2));
        stream.next_out = reinterpret_cast<uint8_t*>(out.data()) + used;
        stream.avail_out = out.size() - used;
        continue;
      }
      if (ret == LZMA_BUF_ERROR) {
        status = Status::DataLoss("xz data is truncated");
        break;
      }
      continue;
    }
    status = ret == LZMA_MEMLIMIT_ERROR || ret == LZMA_MEM_ERROR
                 ? Status::ResourceExhausted("xz data needs more than 256 MiB to decompress")
                 : Status::DataLoss("xz data is corrupt (liblzma error " + std::to_string(static_cast<int>(ret)) + ")");
    break;
  }
  const size_t produced = out.size() - stream.avail_out;
  lzma_end(&stream);
  if (!status.ok()) return status;
  if (produced > max_bytes) {
    return Status::ResourceExhausted("xz data decompresses to more than " + std::to_string(max_bytes) + " bytes");
  }
  out.resize(produced);
  return out;
}

}  // namespace deepinfer
