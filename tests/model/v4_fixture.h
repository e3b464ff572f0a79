// Access to the DeepSeek-V4 reference fixtures of tests/model/data (made by tools/model/gen_fixtures.py).
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/safetensors.h"

namespace deepinfer::model::test_support {

inline std::string FixtureDir(const std::string& name) {
  return std::string(DEEPINFER_SOURCE_DIR) + "/tests/model/data/" + name;
}

inline const std::vector<std::string>& FixtureNames() {
  static const std::vector<std::string> names = {"v4_mixed", "v4_hca128"};
  return names;
}

class Reference {
 public:
  explicit Reference(const std::string& name) {
    auto file = SafetensorsFile::Open(FixtureDir(name) + "/reference.safetensors");
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    if (file.ok()) file_ = std::make_unique<SafetensorsFile>(std::move(*file));
  }
  bool ok() const { return file_ != nullptr; }
  bool Has(const std::string& name) const { return file_->Find(name) != nullptr; }

  std::vector<int32_t> Ints(const std::string& name) const {
    const TensorInfo* t = file_->Find(name);
    EXPECT_NE(t, nullptr) << name;
    std::vector<int32_t> out(t ? t->numel() : 0);
    if (t) std::memcpy(out.data(), t->data, out.size() * 4);
    return out;
  }
  std::vector<float> Floats(const std::string& name) const {
    const TensorInfo* t = file_->Find(name);
    EXPECT_NE(t, nullptr) << name;
    std::vector<float> out(t ? t->numel() : 0);
    if (t) std::memcpy(out.data(), t->data, out.size() * 4);
    return out;
  }
  int NumSequences() const {
    int n = 0;
    while (Has("seq" + std::to_string(n) + ".tokens")) ++n;
    return n;
  }

 private:
  std::unique_ptr<SafetensorsFile> file_;
};

}  // namespace deepinfer::model::test_support
