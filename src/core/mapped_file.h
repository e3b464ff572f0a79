// MappedFile: a read-only memory mapping of a whole file. Weights are used in place from the mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace deepinfer {

class MappedFile {
 public:
  static Result<MappedFile> Open(const std::string& path);

  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }

 private:
  void Reset();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// The default bound on a file or stream read whole into memory (requests, tokenizer.json, config.json,
// text to tokenize): larger inputs are an error, not an allocation of whatever size the input claims.
inline constexpr size_t kMaxReadBytes = size_t{1} << 30;

// Reads a whole file into a string. A directory is InvalidArgument ("is a directory"); a file (or FIFO, or
// device such as /dev/zero) longer than max_bytes is InvalidArgument, found without reading past the bound.
Result<std::string> ReadFileToString(const std::string& path, size_t max_bytes = kMaxReadBytes);

// Reads standard input to its end, with the same bound ("standard input" in messages).
Result<std::string> ReadStdinToString(size_t max_bytes = kMaxReadBytes);

}  // namespace deepinfer
