// Reading (memory-mapped) and writing safetensors checkpoints, single-file and sharded
// (model.safetensors.index.json). Tensors are used in place from the mapping: no copies.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/status.h"

namespace deepinfer {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t data_begin = 0;  // offsets inside the file's data section
  uint64_t data_end = 0;
  const uint8_t* data = nullptr;  // into the mapping; null only for headers parsed without a file
  std::string file;               // the file the tensor lives in

  uint64_t nbytes() const { return data_end - data_begin; }
  int64_t numel() const;
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // in the header's order
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // where the data section starts in the file (8 + header length)
};

// Validates a safetensors header against the file's total size. `bytes` may be the whole file or just its
// beginning; it must hold at least the 8-byte length and the JSON. Errors name the problem (not the file).
Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view bytes, uint64_t file_size);

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> Open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const TensorInfo* Find(std::string_view name) const;

 private:
  MappedFile file_;
  SafetensorsHeader header_;
  std::unordered_map<std::string, size_t> index_;
};

// A checkpoint: one safetensors file, or the shards named by model.safetensors.index.json, or (with no
// index) every *.safetensors file in the directory.
class Checkpoint {
 public:
  // `path` is a directory or a single .safetensors file.
  static Result<Checkpoint> Open(const std::string& path);

  const std::vector<const TensorInfo*>& tensors() const { return ordered_; }  // sorted by name
  const TensorInfo* Find(std::string_view name) const;
  size_t num_files() const { return files_.size(); }
  uint64_t total_bytes() const;
  int64_t total_params() const;

 private:
  Status AddFile(const std::string& path);
  void Finish();

  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string, const TensorInfo*> by_name_;
  std::vector<const TensorInfo*> ordered_;
};

// Writing, for tests and `deepinfer init-model`.
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::string_view bytes;  // numel * DTypeSize(dtype) bytes
};
Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

}  // namespace deepinfer
