#include "model/v4_weights.h"

#include <cstring>

#include "kernels/number_formats.h"

namespace deepinfer::model {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

class Binder {
 public:
  explicit Binder(const Checkpoint& checkpoint) : checkpoint_(checkpoint) {}

  Result<const TensorInfo*> Find(const std::string& name) const {
    const TensorInfo* t = checkpoint_.Find(name);
    if (t == nullptr) return Status::NotFound("checkpoint has no tensor '" + name + "'");
    return t;
  }

  Status CheckShape(const TensorInfo& t, const std::vector<int64_t>& want) const {
    if (t.shape != want)
      return Status::InvalidArgument("tensor '" + t.name + "' has shape " + ShapeString(t.shape) + ", expected " +
                                     ShapeString(want));
    return Status::Ok();
  }

  // `prefix`.weight as a [out, in] matrix in its stored format (scales in `prefix`.scale).
  Result<WeightView> Matrix(const std::string& prefix, int64_t out, int64_t in) const {
    DI_ASSIGN_OR_RETURN(const TensorInfo* t, Find(prefix + ".weight"));
    WeightView w;
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
        DI_RETURN_IF_ERROR(CheckShape(*s, {(out + 127) / 128, (in + 127) / 128}));
        if (s->dtype == DType::kF8_E8M0 || s->dtype == DType::kU8) w.scale_format = kernels::ScaleFormat::kUE8M0;
        else if (s->dtype == DType::kF32) w.scale_format = kernels::ScaleFormat::kF32;
        else return Status::InvalidArgument("tensor '" + s->name + "': FP8 scales must be F32 or F8_E8M0");
        w.scales = s->data;
        DI_RETURN_IF_ERROR(kernels::ValidateWeightView(w));
        // Checked once here so that the decode kernels need not watch every byte (a weight that does
        // hold NaN codes keeps the watch and gives NaN outputs where it should).
        w.fp8_nan_free = !kernels::Fp8ContainsNanCodes(w);
        return w;
      }
      case DType::kI8:
      case DType::kU8: {
        w.format = kernels::WeightFormat::kMXFP4;
        DI_RETURN_IF_ERROR(CheckShape(*t, {out, in / 2}));
        DI_ASSIGN_OR_RETURN(const TensorInfo* s, Find(prefix + ".scale"));
        DI_RETURN_IF_ERROR(CheckShape(*s, {out, in / 32}));
        if (s->dtype != DType::kF8_E8M0 && s->dtype != DType::kU8)
          return Status::InvalidArgument("tensor '" + s->name + "': MXFP4 scales must be F8_E8M0");
        w.scales = s->data;
        if (in % 32) return Status::InvalidArgument("tensor '" + t->name + "': MXFP4 needs inputs in multiples of 32");
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

  // A small fp32 parameter (stored F32 or BF16) of the given shape.
  Result<std::vector<float>> Floats(const std::string& name, const std::vector<int64_t>& shape) const {
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

  Result<std::vector<int32_t>> ExpertTable(const std::string& name, int64_t rows, int64_t cols,
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
        return Status::InvalidArgument("tensor '" + name + "' holds expert id " + std::to_string(v) +
                                       " outside [0, " + std::to_string(num_experts) + ")");
      out[i] = static_cast<int32_t>(v);
    }
    return out;
  }

  Result<V4HyperConnectionWeights> HyperConnection(const std::string& prefix, int64_t rows, int64_t width,
                                                   int64_t scales) const {
    V4HyperConnectionWeights w;
    DI_ASSIGN_OR_RETURN(w.fn, Floats(prefix + "_fn", {rows, width}));
    DI_ASSIGN_OR_RETURN(w.base, Floats(prefix + "_base", {rows}));
    DI_ASSIGN_OR_RETURN(w.scale, Floats(prefix + "_scale", {scales}));
    w.fn_view.format = kernels::WeightFormat::kF32;
    w.fn_view.out_features = rows;
    w.fn_view.in_features = width;
    w.fn_view.data = w.fn.data();
    return w;
  }

 private:
  const Checkpoint& checkpoint_;
};

Result<V4CompressorWeights> LoadCompressor(const Binder& b, const std::string& p, int64_t ratio, int64_t head_dim,
                                           bool overlapping, int64_t hidden) {
  V4CompressorWeights w;
  w.ratio = ratio;
  w.head_dim = head_dim;
  w.overlapping = overlapping;
  const int64_t width = (overlapping ? 2 : 1) * head_dim;
  DI_ASSIGN_OR_RETURN(w.wkv, b.Matrix(p + "wkv", width, hidden));
  DI_ASSIGN_OR_RETURN(w.wgate, b.Matrix(p + "wgate", width, hidden));
  DI_ASSIGN_OR_RETURN(w.ape, b.Floats(p + "ape", {ratio, width}));
  DI_ASSIGN_OR_RETURN(w.norm, b.Floats(p + "norm.weight", {head_dim}));
  return w;
}

Status LoadBlock(const Binder& b, const V4Config& c, const std::string& p, V4AttentionType type, int64_t ratio,
                 V4RouterType router, V4BlockWeights* out) {
  const int64_t d = c.hidden_size, hc = c.hc_mult, hd = c.head_dim, h = c.num_heads;
  DI_ASSIGN_OR_RETURN(out->attn_norm, b.Floats(p + "attn_norm.weight", {d}));
  DI_ASSIGN_OR_RETURN(out->ffn_norm, b.Floats(p + "ffn_norm.weight", {d}));
  DI_ASSIGN_OR_RETURN(out->attn_hc, b.HyperConnection(p + "hc_attn", (2 + hc) * hc, hc * d, 3));
  DI_ASSIGN_OR_RETURN(out->ffn_hc, b.HyperConnection(p + "hc_ffn", (2 + hc) * hc, hc * d, 3));

  V4AttentionWeights& a = out->attention;
  const std::string ap = p + "attn.";
  DI_ASSIGN_OR_RETURN(a.wq_a, b.Matrix(ap + "wq_a", c.q_lora_rank, d));
  DI_ASSIGN_OR_RETURN(a.q_norm, b.Floats(ap + "q_norm.weight", {c.q_lora_rank}));
  DI_ASSIGN_OR_RETURN(a.wq_b, b.Matrix(ap + "wq_b", h * hd, c.q_lora_rank));
  DI_ASSIGN_OR_RETURN(a.wkv, b.Matrix(ap + "wkv", hd, d));
  DI_ASSIGN_OR_RETURN(a.kv_norm, b.Floats(ap + "kv_norm.weight", {hd}));
  const int64_t group_in = h * hd / c.o_groups;
  DI_ASSIGN_OR_RETURN(WeightView wo_a, b.Matrix(ap + "wo_a", c.o_groups * c.o_lora_rank, group_in));
  DI_ASSIGN_OR_RETURN(a.wo_b, b.Matrix(ap + "wo_b", d, c.o_groups * c.o_lora_rank));
  DI_ASSIGN_OR_RETURN(a.sink, b.Floats(ap + "attn_sink", {h}));
  // Each group's rows of wo_a as their own matrix (FP8 groups must start on a scale block).
  for (int64_t g = 0; g < c.o_groups; ++g) {
    WeightView v = wo_a;
    v.out_features = c.o_lora_rank;
    const int64_t row0 = g * c.o_lora_rank;
    switch (wo_a.format) {
      case kernels::WeightFormat::kF32: v.data = static_cast<const float*>(wo_a.data) + row0 * group_in; break;
      case kernels::WeightFormat::kBF16: v.data = static_cast<const uint16_t*>(wo_a.data) + row0 * group_in; break;
      case kernels::WeightFormat::kFP8Block: {
        if (row0 % wo_a.block_out)
          return Status::InvalidArgument("tensor '" + ap + "wo_a.weight': o_lora_rank is not a multiple of the "
                                         "FP8 block");
        v.data = static_cast<const uint8_t*>(wo_a.data) + row0 * group_in;
        const int64_t scale_cols = (group_in + wo_a.block_in - 1) / wo_a.block_in;
        const int64_t scale_size = wo_a.scale_format == kernels::ScaleFormat::kF32 ? 4 : 1;
        v.scales = static_cast<const uint8_t*>(wo_a.scales) + (row0 / wo_a.block_out) * scale_cols * scale_size;
        break;
      }
      case kernels::WeightFormat::kMXFP4:
        v.data = static_cast<const uint8_t*>(wo_a.data) + row0 * group_in / 2;
        v.scales = static_cast<const uint8_t*>(wo_a.scales) + row0 * group_in / 32;
        break;
    }
    a.wo_a_groups.push_back(v);
  }
  if (type != V4AttentionType::kSliding) {
    const bool csa = type == V4AttentionType::kCsa;
    DI_ASSIGN_OR_RETURN(V4CompressorWeights cw, LoadCompressor(b, ap + "compressor.", ratio, hd, csa, d));
    a.compressor = std::make_unique<V4CompressorWeights>(std::move(cw));
    if (csa) {
      auto ix = std::make_unique<V4IndexerWeights>();
      const std::string ip = ap + "indexer.";
      DI_ASSIGN_OR_RETURN(ix->wq_b, b.Matrix(ip + "wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank));
      DI_ASSIGN_OR_RETURN(ix->weights_proj, b.Matrix(ip + "weights_proj", c.index_n_heads, d));
      DI_ASSIGN_OR_RETURN(ix->compressor, LoadCompressor(b, ip + "compressor.", ratio, c.index_head_dim, true, d));
      a.indexer = std::move(ix);
    }
  }

  V4MoeWeights& m = out->moe;
  const std::string fp = p + "ffn.";
  const int64_t e = c.n_routed_experts, inter = c.moe_intermediate_size;
  DI_ASSIGN_OR_RETURN(m.gate, b.Matrix(fp + "gate", e, d));
  if (router == V4RouterType::kHash) {
    DI_ASSIGN_OR_RETURN(m.tid2eid, b.ExpertTable(fp + "gate.tid2eid", c.vocab_size, c.num_experts_per_tok, e));
  } else {
    DI_ASSIGN_OR_RETURN(m.gate_bias, b.Floats(fp + "gate.bias", {e}));
  }
  for (int64_t i = 0; i < e; ++i) {
    const std::string ep = fp + "experts." + std::to_string(i) + ".";
    V4ExpertWeights x;
    DI_ASSIGN_OR_RETURN(x.w1, b.Matrix(ep + "w1", inter, d));
    DI_ASSIGN_OR_RETURN(x.w2, b.Matrix(ep + "w2", d, inter));
    DI_ASSIGN_OR_RETURN(x.w3, b.Matrix(ep + "w3", inter, d));
    m.experts.push_back(x);
  }
  DI_ASSIGN_OR_RETURN(m.shared.w1, b.Matrix(fp + "shared_experts.w1", inter, d));
  DI_ASSIGN_OR_RETURN(m.shared.w2, b.Matrix(fp + "shared_experts.w2", d, inter));
  DI_ASSIGN_OR_RETURN(m.shared.w3, b.Matrix(fp + "shared_experts.w3", inter, d));
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<V4Weights>> LoadV4Weights(const Checkpoint& checkpoint, const V4Config& c) {
  Binder b(checkpoint);
  auto w = std::make_unique<V4Weights>();
  const int64_t d = c.hidden_size, hc = c.hc_mult;
  DI_ASSIGN_OR_RETURN(w->embed, b.Find("embed.weight"));
  DI_RETURN_IF_ERROR(b.CheckShape(*w->embed, {c.vocab_size, d}));
  if (w->embed->dtype != DType::kF32 && w->embed->dtype != DType::kBF16)
    return Status::InvalidArgument("tensor 'embed.weight' must be F32 or BF16");
  DI_ASSIGN_OR_RETURN(w->head, b.Matrix("head", c.vocab_size, d));
  DI_ASSIGN_OR_RETURN(w->norm, b.Floats("norm.weight", {d}));
  DI_ASSIGN_OR_RETURN(w->hc_head, b.HyperConnection("hc_head", hc, hc * d, 1));
  w->layers.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    DI_RETURN_IF_ERROR(LoadBlock(b, c, "layers." + std::to_string(i) + ".", c.attention_types[i],
                                 c.compress_ratios[i], c.router_types[i], &w->layers[i]));
  }
  for (int64_t i = 0; i < c.num_mtp_layers; ++i) {
    const std::string p = "mtp." + std::to_string(i) + ".";
    if (checkpoint.Find(p + "e_proj.weight") == nullptr) break;  // checkpoints may leave MTP out
    V4MtpWeights m;
    DI_RETURN_IF_ERROR(LoadBlock(b, c, p, c.mtp_attention_type, c.mtp_compress_ratio, V4RouterType::kScore, &m.block));
    DI_ASSIGN_OR_RETURN(m.e_proj, b.Matrix(p + "e_proj", d, d));
    DI_ASSIGN_OR_RETURN(m.h_proj, b.Matrix(p + "h_proj", d, d));
    DI_ASSIGN_OR_RETURN(m.enorm, b.Floats(p + "enorm.weight", {d}));
    DI_ASSIGN_OR_RETURN(m.hnorm, b.Floats(p + "hnorm.weight", {d}));
    DI_ASSIGN_OR_RETURN(m.norm, b.Floats(p + "norm.weight", {d}));
    DI_ASSIGN_OR_RETURN(m.hc_head, b.HyperConnection(p + "hc_head", hc, hc * d, 1));
    w->mtp.push_back(std::move(m));
  }
  return w;
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
