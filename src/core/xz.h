// Decompressing .xz data (liblzma, Debian liblzma-dev): the repository's large data files are stored
// xz-compressed (data/tokenizers/) and embedded that way in the binary.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"

namespace deepinfer {

// The decompressed bytes of a complete .xz stream. The output is bounded by max_bytes and the decoder's
// memory by 256 MiB: a stream that would exceed either (or is truncated, corrupt, or followed by garbage)
// is DataLoss / ResourceExhausted, never an allocation of whatever the stream claims.
Result<std::string> XzDecompress(std::string_view compressed, size_t max_bytes);

// Whether the bytes start with the xz magic (FD 37 7A 58 5A 00).
bool IsXz(std::string_view bytes);

}  // namespace deepinfer
