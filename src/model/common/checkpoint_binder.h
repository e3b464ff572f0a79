// Binding a DeepSeek checkpoint's tensors in place: looking them up by name, checking shapes and dtypes,
// viewing matrices in their stored format (F32, BF16, FP8 E4M3 with block scales, packed FP4 with a UE8M0
// scale per 32 inputs) and copying small parameters to fp32. Each family's loader walks its own tensor
// names through one CheckpointBinder; a missing, mis-typed or mis-shaped tensor is an error naming it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "core/status.h"
#include "kernels/linear.h"
#include "model/common/hyper_connection.h"
#include "model/common/moe.h"

namespace deepinfer::model {

// The rows and columns one FP8 scale covers.
struct Fp8BlockShape {
  int64_t out = 128, in = 128;
};

class CheckpointBinder {
 public:
  // `fp8_blocks`: the block shapes an FP8 matrix's scale tensor may describe, the first reported when none
  // fits. The binder refers to `checkpoint`, which must outlive it and every view it makes.
  CheckpointBinder(const Checkpoint& checkpoint, std::vector<Fp8BlockShape> fp8_blocks);

  Result<const TensorInfo*> Find(const std::string& name) const;
  Status CheckShape(const TensorInfo& t, const std::vector<int64_t>& want) const;
  // `prefix`.weight as an [out, in] matrix in its stored format (scales in `prefix`.scale).
  Result<kernels::WeightView> Matrix(const std::string& prefix, int64_t out, int64_t in) const;
  // The matrix's rows cut into `groups` views of rows / groups rows each (FP8 groups must start on a block).
  Result<std::vector<kernels::WeightView>> RowGroups(const std::string& prefix, const kernels::WeightView& matrix,
                                                     int64_t groups) const;
  // A small fp32 parameter (stored F32 or BF16) of the given shape.
  Result<std::vector<float>> Floats(const std::string& name, const std::vector<int64_t>& shape) const;
  // An embedding-like table [rows, cols] read in place, F32 or BF16.
  Result<const TensorInfo*> Table(const std::string& name, int64_t rows, int64_t cols) const;
  // An [rows, cols] table of expert ids (I32 or I64), each in [0, num_experts).
  Result<std::vector<int32_t>> ExpertTable(const std::string& name, int64_t rows, int64_t cols,
                                           int64_t num_experts) const;
  // An mHC site: `prefix`_fn [rows, width], `prefix`_base [rows], `prefix`_scale [scales].
  Result<HyperConnectionWeights> HyperConnection(const std::string& prefix, int64_t rows, int64_t width,
                                                 int64_t scales) const;
  // A SwiGLU expert under `prefix` (w1, w2, w3) with `inter` intermediate and `hidden` outer features.
  Result<ExpertWeights> Expert(const std::string& prefix, int64_t inter, int64_t hidden) const;

 private:
  const Checkpoint& checkpoint_;
  std::vector<Fp8BlockShape> fp8_blocks_;
};

// The embedding row of `token` (an F32 or BF16 table) as fp32.
void EmbeddingRow(const TensorInfo& embed, int64_t token, int64_t hidden, float* out);

}  // namespace deepinfer::model
