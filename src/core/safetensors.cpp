#include "core/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/json.h"
#include "core/utf8.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the safetensors library's own limit

uint64_t ReadLe64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

Result<uint64_t> ParseOffset(const Json& value, const std::string& name) {
  if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0))
    return Status::InvalidArgument("tensor '" + name + "': data_offsets must be non-negative integers");
  return value.get<uint64_t>();
}

Result<TensorInfo> ParseTensorEntry(const std::string& name, const Json& entry, uint64_t data_size) {
  if (!entry.is_object()) return Status::InvalidArgument("tensor '" + name + "': entry is not an object");
  auto dtype_it = entry.find("dtype");
  auto shape_it = entry.find("shape");
  auto offsets_it = entry.find("data_offsets");
  if (dtype_it == entry.end() || !dtype_it->is_string())
    return Status::InvalidArgument("tensor '" + name + "': missing or non-string dtype");
  if (shape_it == entry.end() || !shape_it->is_array())
    return Status::InvalidArgument("tensor '" + name + "': missing or non-array shape");
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2)
    return Status::InvalidArgument("tensor '" + name + "': data_offsets must be [begin, end]");

  TensorInfo info;
  info.name = name;
  auto dtype = ParseDType(dtype_it->get<std::string>());
  if (!dtype.ok()) return dtype.status().WithContext("tensor '" + name + "'");
  info.dtype = *dtype;

  uint64_t numel = 1;
  for (const auto& dim : *shape_it) {
    if (!dim.is_number_integer() || dim.get<int64_t>() < 0)
      return Status::InvalidArgument("tensor '" + name + "': shape entries must be non-negative integers");
    const auto d = dim.get<uint64_t>();
    if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / d)
      return Status::InvalidArgument("tensor '" + name + "': shape overflows");
    numel *= d;
    info.shape.push_back(static_cast<int64_t>(d));
  }
  DI_ASSIGN_OR_RETURN(info.data_begin, ParseOffset((*offsets_it)[0], name));
  DI_ASSIGN_OR_RETURN(info.data_end, ParseOffset((*offsets_it)[1], name));
  if (info.data_begin > info.data_end)
    return Status::InvalidArgument("tensor '" + name + "': data_offsets begin " + std::to_string(info.data_begin) +
                                   " > end " + std::to_string(info.data_end));
  if (info.data_end > data_size)
    return Status::OutOfRange("tensor '" + name + "': data_offsets end " + std::to_string(info.data_end) +
                              " is past the data section (" + std::to_string(data_size) + " bytes)");
  const uint64_t elem = DTypeSize(info.dtype);
  if (numel > std::numeric_limits<uint64_t>::max() / elem || numel * elem != info.nbytes())
    return Status::InvalidArgument("tensor '" + name + "': shape needs " + std::to_string(numel) + " x " +
                                   std::to_string(elem) + " bytes but data_offsets span " +
                                   std::to_string(info.nbytes()));
  return info;
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view bytes, uint64_t file_size) {
  if (file_size < 8 || bytes.size() < 8)
    return Status::DataLoss("truncated: " + std::to_string(file_size) + " bytes, no room for the header length");
  const uint64_t header_len = ReadLe64(bytes.data());
  if (header_len > kMaxHeaderBytes)
    return Status::InvalidArgument("header length " + std::to_string(header_len) + " exceeds the 100 MiB limit");
  if (header_len > file_size - 8)
    return Status::DataLoss("header length " + std::to_string(header_len) + " runs past the end of the file (" +
                            std::to_string(file_size) + " bytes)");
  if (bytes.size() < 8 + header_len) return Status::DataLoss("truncated header");
  const std::string_view text = bytes.substr(8, header_len);

  // A header is a flat object of tensor entries (depth 3 with the shape arrays); 16 levels is generous.
  auto parsed = ParseJson(text, JsonLimits{kMaxHeaderBytes, 16});
  if (!parsed.ok()) return Status::InvalidArgument("header is not valid JSON: " + parsed.status().message());
  const Json header = std::move(parsed).value();
  if (!header.is_object()) return Status::InvalidArgument("header is not a JSON object");

  SafetensorsHeader result;
  result.data_offset = 8 + header_len;
  const uint64_t data_size = file_size - result.data_offset;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return Status::InvalidArgument("__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) return Status::InvalidArgument("__metadata__ value '" + m.key() + "' is not a string");
        result.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    DI_ASSIGN_OR_RETURN(TensorInfo info, ParseTensorEntry(it.key(), *it, data_size));
    result.tensors.push_back(std::move(info));
  }

  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : result.tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->data_begin != b->data_begin ? a->data_begin < b->data_begin : a->data_end < b->data_end;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo* prev = by_offset[i - 1];
    const TensorInfo* cur = by_offset[i];
    if (cur->data_begin < prev->data_end && cur->nbytes() > 0 && prev->nbytes() > 0)
      return Status::InvalidArgument("tensors '" + prev->name + "' and '" + cur->name + "' overlap");
  }
  return result;
}

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  SafetensorsFile file;
  DI_ASSIGN_OR_RETURN(file.file_, MappedFile::Open(path));
  auto header = ParseSafetensorsHeader(file.file_.view(), file.file_.size());
  if (!header.ok()) return header.status().WithContext(path);
  file.header_ = std::move(header).value();
  for (size_t i = 0; i < file.header_.tensors.size(); ++i) {
    TensorInfo& t = file.header_.tensors[i];
    t.data = file.file_.data() + file.header_.data_offset + t.data_begin;
    t.file = path;
    file.index_.emplace(t.name, i);
  }
  return file;
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

Status Checkpoint::AddFile(const std::string& path) {
  auto file = SafetensorsFile::Open(path);
  if (!file.ok()) return file.status();
  auto owned = std::make_unique<SafetensorsFile>(std::move(file).value());
  for (const auto& t : owned->tensors()) {
    auto [it, inserted] = by_name_.emplace(t.name, &t);
    if (!inserted)
      return Status::InvalidArgument(path + ": tensor '" + t.name + "' also appears in " + it->second->file);
  }
  files_.push_back(std::move(owned));
  return Status::Ok();
}

void Checkpoint::Finish() {
  ordered_.clear();
  for (const auto& [name, info] : by_name_) ordered_.push_back(info);
  std::sort(ordered_.begin(), ordered_.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->name < b->name; });
}

Result<Checkpoint> Checkpoint::Open(const std::string& path) {
  Checkpoint ckpt;
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::NotFound(path + ": no such file or directory");
  if (!fs::is_directory(path, ec)) {
    DI_RETURN_IF_ERROR(ckpt.AddFile(path));
    ckpt.Finish();
    return ckpt;
  }
  const fs::path dir(path);
  const fs::path index_path = dir / "model.safetensors.index.json";
  if (fs::exists(index_path, ec)) {
    DI_ASSIGN_OR_RETURN(std::string text, ReadFileToString(index_path.string()));
    auto parsed = ParseJson(text, JsonLimits{kMaxHeaderBytes, 16});
    if (!parsed.ok()) return Status::InvalidArgument(index_path.string() + ": " + parsed.status().message());
    const Json index = std::move(parsed).value();
    if (!index.is_object()) return Status::InvalidArgument(index_path.string() + ": not a JSON object");
    auto map_it = index.find("weight_map");
    if (map_it == index.end() || !map_it->is_object())
      return Status::InvalidArgument(index_path.string() + ": missing weight_map object");
    std::vector<std::string> shards;
    for (auto it = map_it->begin(); it != map_it->end(); ++it) {
      if (!it->is_string())
        return Status::InvalidArgument(index_path.string() + ": weight_map['" + it.key() + "'] is not a string");
      const std::string shard = it->get<std::string>();
      if (shard.find('/') != std::string::npos || shard == "..")
        return Status::InvalidArgument(index_path.string() + ": shard name '" + shard + "' is not a plain file name");
      if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
    }
    std::sort(shards.begin(), shards.end());
    for (const auto& shard : shards) {
      const fs::path shard_path = dir / shard;
      if (!fs::exists(shard_path, ec))
        return Status::NotFound(index_path.string() + ": shard '" + shard + "' is missing");
      DI_RETURN_IF_ERROR(ckpt.AddFile(shard_path.string()));
    }
    for (auto it = map_it->begin(); it != map_it->end(); ++it) {
      auto found = ckpt.by_name_.find(it.key());
      if (found == ckpt.by_name_.end())
        return Status::NotFound(index_path.string() + ": tensor '" + it.key() + "' is not in shard '" +
                                it->get<std::string>() + "'");
      if (fs::path(found->second->file).filename() != it->get<std::string>())
        return Status::InvalidArgument(index_path.string() + ": tensor '" + it.key() + "' is listed in '" +
                                       it->get<std::string>() + "' but stored in " + found->second->file);
    }
  } else {
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.path().extension() == ".safetensors") files.push_back(entry.path().string());
    if (files.empty()) return Status::NotFound(path + ": no .safetensors files and no model.safetensors.index.json");
    std::sort(files.begin(), files.end());
    for (const auto& f : files) DI_RETURN_IF_ERROR(ckpt.AddFile(f));
  }
  ckpt.Finish();
  return ckpt;
}

const TensorInfo* Checkpoint::Find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : it->second;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t total = 0;
  for (const auto* t : ordered_) total += t->nbytes();
  return total;
}

int64_t Checkpoint::total_params() const {
  int64_t total = 0;
  for (const auto* t : ordered_) total += t->numel();
  return total;
}

Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
    if (numel * DTypeSize(t.dtype) != t.bytes.size())
      return Status::InvalidArgument(path + ": tensor '" + t.name + "' has " + std::to_string(t.bytes.size()) +
                                     " bytes, shape needs " + std::to_string(numel * DTypeSize(t.dtype)));
    header[t.name] = {{"dtype", DTypeName(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::IoError(path + ": cannot open for writing");
  char len[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out.write(len, 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : tensors) out.write(t.bytes.data(), static_cast<std::streamsize>(t.bytes.size()));
  out.close();
  if (!out) return Status::IoError(path + ": write failed");
  return Status::Ok();
}

}  // namespace deepinfer
