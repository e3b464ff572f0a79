// What `init-model` needs for every architecture's random checkpoint: values reproducible from
// (seed, tensor name) whatever the thread count, the released storage formats that hold them, and the
// safetensors shard they are collected in. Each architecture decides which tensor gets which format.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "core/status.h"

namespace deepinfer::model::seeded_checkpoint {

uint64_t SplitMix(uint64_t x);
uint64_t HashName(const std::string& s);

// n values uniform in [mean - a, mean + a] with a = sqrt(3)·std (variance std²), from (seed, name) alone.
std::vector<float> RandomValues(uint64_t seed, const std::string& name, int64_t n, float mean, float std);

// One shard's tensors, owned until Write.
class Shard {
 public:
  void Add(const std::string& name, DType dtype, std::vector<int64_t> shape, std::string bytes);
  void F32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values);
  void Bf16(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values);
  void I32(const std::string& name, std::vector<int64_t> shape, const std::vector<int32_t>& values);
  // FP8 E4M3 in bo × bi blocks, each with the power-of-two scale that fits its largest magnitude under 448:
  // `prefix.weight` [out, in] and `prefix.scale` [ceil(out/bo), ceil(in/bi)] (E8M0).
  void Fp8(const std::string& prefix, const std::vector<float>& w, int64_t out, int64_t in, int64_t bo, int64_t bi);
  // The same with fp32 scales of amax / 448 as DeepSeek-V3 releases them: `prefix.weight` and
  // `prefix.weight_scale_inv` [ceil(out/bo), ceil(in/bi)] (F32; the weight is the E4M3 value times it).
  void Fp8ScaleInv(const std::string& prefix, const std::vector<float>& w, int64_t out, int64_t in, int64_t bo,
                   int64_t bi);
  // Packed FP4: E2M1 pairs along the input (element 2b in the low nibble), an E8M0 scale per 32 inputs.
  void Fp4(const std::string& prefix, const std::vector<float>& w, int64_t out, int64_t in);
  // Writes the shard to `path`, records each tensor's `file` in weight_map, adds its bytes to total_bytes,
  // and empties the shard.
  Status Write(const std::string& path, std::map<std::string, std::string>* weight_map, const std::string& file,
               uint64_t* total_bytes);

 private:
  struct Owned {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  std::vector<Owned> tensors_;
};

}  // namespace deepinfer::model::seeded_checkpoint
