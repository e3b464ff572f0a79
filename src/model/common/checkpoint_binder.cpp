#include "model/common/checkpoint_binder.h"

#include <cstring>

#include "kernels/number_formats.h"

namespace deepinfer::model {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

CheckpointBinder::CheckpointBinder(const Checkpoint& checkpoint, std::vector<Fp8BlockShape> fp8_blocks)
    : checkpoint_(checkpoint), fp8_blocks_(std::move(fp8_blocks)) {
  if (fp8_blocks_.empty()) fp8_blocks_.push_back({});
}

Result<const TensorInfo*> CheckpointBinder::Find(const std::string& name) const {
  const TensorInfo* t = checkpoint_.Find(name);
  if (t == nullptr) return Status::NotFound("checkpoint has no tensor '" + name + "'");
  return t;
}

Status CheckpointBinder::CheckShape(const TensorInfo& t, const std::vector<int64_t>& want) const {
  if (t.shape != want)
    return Status::InvalidArgument("tensor '" + t.name + "' has shape " + ShapeString(t.shape) + ", expected " +
                                   ShapeString(want));
  return Status::Ok();
}

Result<kernels::WeightView> CheckpointBinder::Matrix(const std::string& prefix, int64_t out, int64_t in) const {
  DI_ASSIGN_OR_RETURN(const TensorInfo* t, Find(prefix + ".weight"));
  kernels::WeightView w;
  w.out_features = out;
  w.in_features = in;
  w.data = t->data;
  switch (t->dtype) {
    case DType::kF32: w.format = kernels::WeightFormat::kF32; break;
    case DType::kBF16: w.format = kernels::WeightFormat::kBF16; break;
    case DType::kF8_E4M3: {
      w.format = kernels::WeightFormat::kFP8Block;
      DI_RETURN_IF_ERROR(CheckShape(*t, {out, in}));
      const TensorInfo* s = checkpoint_.Find(prefix + ".scale");
      if (s == nullptr) s = checkpoint_.Find(prefix + ".weight_scale_inv");
      if (s == nullptr) return Status::NotFound("checkpoint has no tensor '" + prefix + ".scale' (FP8 block scales)");
      bool matched = false;
      for (const Fp8BlockShape& b : fp8_blocks_) {
        if (s->shape == std::vector<int64_t>{(out + b.out - 1) / b.out, (in + b.in - 1) / b.in}) {
          w.block_out = b.out;
          w.block_in = b.in;
          matched = true;
          break;
        }
      }
      if (!matched) {
        const Fp8BlockShape& b = fp8_blocks_.front();
        return Status::InvalidArgument("tensor '" + s->name + "' has shape " + ShapeString(s->shape) + ", expected " +
                                       ShapeString({(out + b.out - 1) / b.out, (in + b.in - 1) / b.in}) + " (" +
                                       std::to_string(b.out) + "x" + std::to_string(b.in) + " FP8 blocks)");
      }
      if (s->dtype == DType::kF8_E8M0 || s->dtype == DType::kU8) w.scale_format = kernels::ScaleFormat::kUE8M0;
      else if (s->dtype == DType::kF32) w.scale_format = kernels::ScaleFormat::kF32;
      else return Status::InvalidArgument("tensor '" + s->name + "': FP8 scales must be F32 or F8_E8M0");
      w.scales = s->data;
      DI_RETURN_IF_ERROR(kernels::ValidateWeightView(w));
      // Checked once here so that the decode kernels need not watch every byte (a weight that does hold
      // NaN codes keeps the watch and gives NaN outputs where it should).
      w.fp8_nan_free = !kernels::Fp8ContainsNanCodes(w);
      return w;
    }
    case DType::kI8:
    case DType::kU8: {
      w.format = kernels::WeightFormat::kMXFP4;
      if (in % 32) return Status::InvalidArgument("tensor '" + t->name + "': packed FP4 needs inputs in multiples of 32");
      DI_RETURN_IF_ERROR(CheckShape(*t, {out, in / 2}));
      DI_ASSIGN_OR_RETURN(const TensorInfo* s, Find(prefix + ".scale"));
      DI_RETURN_IF_ERROR(CheckShape(*s, {out, in / 32}));
      if (s->dtype != DType::kF8_E8M0 && s->dtype != DType::kU8)
        return Status::InvalidArgument("tensor '" + s->name + "': FP4 scales must be F8_E8M0");
      w.scales = s->data;
      DI_RETURN_IF_ERROR(kernels::ValidateWeightView(w));
      return w;
    }
    default:
      return Status::InvalidArgument("tensor '" + t->name + "' has unsupported dtype " +
                                     std::string(DTypeName(t->dtype)) + " for a matrix");
  }
  DI_RETURN_IF_ERROR(CheckShape(*t, {out, in}));
  DI_RETURN_IF_ERROR(kernels::ValidateWeightView(w));
  return w;
}

Result<std::vector<kernels::WeightView>> CheckpointBinder::RowGroups(const std::string& prefix,
                                                                     const kernels::WeightView& matrix,
                                                                     int64_t groups) const {
  std::vector<kernels::WeightView> out;
  const int64_t rows = matrix.out_features / groups;
  for (int64_t g = 0; g < groups; ++g) {
    auto view = kernels::SliceRows(matrix, g * rows, rows);
    if (!view.ok())
      return Status::InvalidArgument("tensor '" + prefix + ".weight': its groups of " + std::to_string(rows) +
                                     " rows do not start on FP8 blocks (" + view.status().message() + ")");
    out.push_back(*view);
  }
  return out;
}

Result<std::vector<float>> CheckpointBinder::Floats(const std::string& name, const std::vector<int64_t>& shape) const {
  DI_ASSIGN_OR_RETURN(const TensorInfo* t, Find(name));
  DI_RETURN_IF_ERROR(CheckShape(*t, shape));
  std::vector<float> out(static_cast<size_t>(t->numel()));
  if (t->dtype == DType::kF32) {
    std::memcpy(out.data(), t->data, out.size() * sizeof(float));
  } else if (t->dtype == DType::kBF16) {
    std::vector<uint16_t> bits(out.size());
    std::memcpy(bits.data(), t->data, bits.size() * sizeof(uint16_t));
    kernels::Bf16ToFloat(bits.data(), out.data(), static_cast<int64_t>(out.size()));
  } else {
    return Status::InvalidArgument("tensor '" + name + "' has dtype " + std::string(DTypeName(t->dtype)) +
                                   ", expected F32 or BF16");
  }
  return out;
}

Result<const TensorInfo*> CheckpointBinder::Table(const std::string& name, int64_t rows, int64_t cols) const {
  DI_ASSIGN_OR_RETURN(const TensorInfo* t, Find(name));
  DI_RETURN_IF_ERROR(CheckShape(*t, {rows, cols}));
  if (t->dtype != DType::kF32 && t->dtype != DType::kBF16)
    return Status::InvalidArgument("tensor '" + name + "' must be F32 or BF16");
  return t;
}

Result<std::vector<int32_t>> CheckpointBinder::ExpertTable(const std::string& name, int64_t rows, int64_t cols,
                                                           int64_t num_experts) const {
  DI_ASSIGN_OR_RETURN(const TensorInfo* t, Find(name));
  DI_RETURN_IF_ERROR(CheckShape(*t, {rows, cols}));
  std::vector<int32_t> out(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t v;
    if (t->dtype == DType::kI32) {
      int32_t x;
      std::memcpy(&x, t->data + i * 4, 4);
      v = x;
    } else if (t->dtype == DType::kI64) {
      std::memcpy(&v, t->data + i * 8, 8);
    } else {
      return Status::InvalidArgument("tensor '" + name + "' must be I32 or I64");
    }
    if (v < 0 || v >= num_experts)
      return Status::InvalidArgument("tensor '" + name + "' holds expert id " + std::to_string(v) + " outside [0, " +
                                     std::to_string(num_experts) + ")");
    out[i] = static_cast<int32_t>(v);
  }
  return out;
}

Result<HyperConnectionWeights> CheckpointBinder::HyperConnection(const std::string& prefix, int64_t rows,
                                                                 int64_t width, int64_t scales) const {
  HyperConnectionWeights w;
  DI_ASSIGN_OR_RETURN(w.fn, Floats(prefix + "_fn", {rows, width}));
  DI_ASSIGN_OR_RETURN(w.base, Floats(prefix + "_base", {rows}));
  DI_ASSIGN_OR_RETURN(w.scale, Floats(prefix + "_scale", {scales}));
  w.fn_view.format = kernels::WeightFormat::kF32;
  w.fn_view.out_features = rows;
  w.fn_view.in_features = width;
  w.fn_view.data = w.fn.data();
  return w;
}

Result<ExpertWeights> CheckpointBinder::Expert(const std::string& prefix, int64_t inter, int64_t hidden) const {
  ExpertWeights x;
  DI_ASSIGN_OR_RETURN(x.w1, Matrix(prefix + "w1", inter, hidden));
  DI_ASSIGN_OR_RETURN(x.w2, Matrix(prefix + "w2", hidden, inter));
  DI_ASSIGN_OR_RETURN(x.w3, Matrix(prefix + "w3", inter, hidden));
  return x;
}

void EmbeddingRow(const TensorInfo& embed, int64_t token, int64_t hidden, float* out) {
  if (embed.dtype == DType::kF32) {
    std::memcpy(out, embed.data + token * hidden * 4, hidden * sizeof(float));
  } else {
    std::vector<uint16_t> bits(hidden);
    std::memcpy(bits.data(), embed.data + token * hidden * 2, hidden * sizeof(uint16_t));
    kernels::Bf16ToFloat(bits.data(), out, hidden);
  }
}

}  // namespace deepinfer::model
