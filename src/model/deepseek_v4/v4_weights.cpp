#include "model/deepseek_v4/v4_weights.h"


namespace deepinfer::model {
namespace {

Result<V4CompressorWeights> LoadCompressor(const CheckpointBinder& b, const std::string& p, int64_t ratio, int64_t head_dim,
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

Status LoadBlock(const CheckpointBinder& b, const V4Config& c, const std::string& p, V4AttentionType type, int64_t ratio,
                 V4RouterType router, V4BlockWeights* out) {
  const int64_t d = c.hidden_size, hd = c.head_dim;
  const BlockShape shape = BlockShape::Of(c);
  DI_RETURN_IF_ERROR(BindBlockSites(b, shape, p, out));
  DI_RETURN_IF_ERROR(BindAttentionProjections(b, shape, p, &out->attention));
  V4AttentionWeights& a = out->attention;
  const std::string ap = p + "attn.";
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
  const int64_t e = c.n_routed_experts;
  DI_RETURN_IF_ERROR(BindExpertSet(b, shape, p, e, &m));
  if (router == V4RouterType::kHash) {
    DI_ASSIGN_OR_RETURN(m.tid2eid, b.ExpertTable(fp + "gate.tid2eid", c.vocab_size, c.num_experts_per_tok, e));
  } else {
    DI_ASSIGN_OR_RETURN(m.gate_bias, b.Floats(fp + "gate.bias", {e}));
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<V4Weights>> LoadV4Weights(const Checkpoint& checkpoint, const V4Config& c) {
  CheckpointBinder b(checkpoint, {Fp8BlockShape{128, 128}});
  auto w = std::make_unique<V4Weights>();
  const int64_t d = c.hidden_size, hc = c.hc_mult;
  DI_ASSIGN_OR_RETURN(w->embed, b.Table("embed.weight", c.vocab_size, d));
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

}  // namespace deepinfer::model
