// Access to the DeepSeek-V4.1 oracle fixtures of tests/model/data (tiny random checkpoints with what
// transformers' deepseek_v41 computed on them; see tests/model/data/README.md).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/safetensors.h"

namespace deepinfer::model::test_support {

inline std::string V41FixtureDir(const std::string& name) {
  return std::string(DEEPINFER_SOURCE_DIR) + "/tests/model/data/" + name;
}

inline const std::vector<std::string>& V41FixtureNames() {
  static const std::vector<std::string> names = {"v41_tiny_a_bf16", "v41_tiny_b_fp8"};
  return names;
}

class V41Reference {
 public:
  explicit V41Reference(const std::string& name) {
    auto file = SafetensorsFile::Open(V41FixtureDir(name) + "/reference.safetensors");
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    if (file.ok()) file_ = std::make_unique<SafetensorsFile>(std::move(*file));
  }
  bool ok() const { return file_ != nullptr; }
  bool Has(const std::string& name) const { return file_->Find(name) != nullptr; }
  std::vector<int64_t> Shape(const std::string& name) const {
    const TensorInfo* t = file_->Find(name);
    return t ? t->shape : std::vector<int64_t>{};
  }

  // int64 tensors (token ids, positions, hash ids) as int64.
  std::vector<int64_t> Int64s(const std::string& name) const {
    const TensorInfo* t = file_->Find(name);
    EXPECT_NE(t, nullptr) << name;
    std::vector<int64_t> out(t ? t->numel() : 0);
    if (t) std::memcpy(out.data(), t->data, out.size() * 8);
    return out;
  }
  std::vector<int32_t> Tokens(const std::string& name) const {
    std::vector<int64_t> wide = Int64s(name);
    return std::vector<int32_t>(wide.begin(), wide.end());
  }
  std::vector<float> Floats(const std::string& name) const {
    const TensorInfo* t = file_->Find(name);
    EXPECT_NE(t, nullptr) << name;
    std::vector<float> out(t ? t->numel() : 0);
    if (t) std::memcpy(out.data(), t->data, out.size() * 4);
    return out;
  }

 private:
  std::unique_ptr<SafetensorsFile> file_;
};

}  // namespace deepinfer::model::test_support
