// Internal to kvstore: whole reads of a file descriptor at an offset, for the store's synchronous readers
// (verification, snapshot records); the block reads go through io_backend.h.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <span>

namespace deepinfer::kvstore {

// Reads exactly into.size() bytes at offset; false on a short read (end of file) or an error.
inline bool ReadAt(int fd, std::span<uint8_t> into, uint64_t offset) {
  while (!into.empty()) {
    const ssize_t r = ::pread(fd, into.data(), into.size(), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    into = into.subspan(static_cast<size_t>(r));
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

}  // namespace deepinfer::kvstore
