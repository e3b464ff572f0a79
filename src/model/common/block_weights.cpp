#include "model/common/block_weights.h"

namespace deepinfer::model {

Status BindBlockSites(const CheckpointBinder& b, const BlockShape& s, const std::string& p, BlockSiteWeights* out) {
  const int64_t d = s.hidden, hc = s.hc;
  DI_ASSIGN_OR_RETURN(out->attn_norm, b.Floats(p + "attn_norm.weight", {d}));
  DI_ASSIGN_OR_RETURN(out->ffn_norm, b.Floats(p + "ffn_norm.weight", {d}));
  DI_ASSIGN_OR_RETURN(out->attn_hc, b.HyperConnection(p + "hc_attn", (2 + hc) * hc, hc * d, 3));
  DI_ASSIGN_OR_RETURN(out->ffn_hc, b.HyperConnection(p + "hc_ffn", (2 + hc) * hc, hc * d, 3));
  return Status::Ok();
}

Status BindAttentionProjections(const CheckpointBinder& b, const BlockShape& s, const std::string& p,
                                AttentionProjections* out) {
  const int64_t d = s.hidden, hd = s.head_dim, h = s.heads;
  const std::string ap = p + "attn.";
  DI_ASSIGN_OR_RETURN(out->wq_a, b.Matrix(ap + "wq_a", s.q_lora_rank, d));
  DI_ASSIGN_OR_RETURN(out->q_norm, b.Floats(ap + "q_norm.weight", {s.q_lora_rank}));
  DI_ASSIGN_OR_RETURN(out->wq_b, b.Matrix(ap + "wq_b", h * hd, s.q_lora_rank));
  DI_ASSIGN_OR_RETURN(out->wkv, b.Matrix(ap + "wkv", hd, d));
  DI_ASSIGN_OR_RETURN(out->kv_norm, b.Floats(ap + "kv_norm.weight", {hd}));
  const int64_t group_in = h * hd / s.o_groups;
  DI_ASSIGN_OR_RETURN(kernels::WeightView wo_a, b.Matrix(ap + "wo_a", s.o_groups * s.o_lora_rank, group_in));
  DI_ASSIGN_OR_RETURN(out->wo_b, b.Matrix(ap + "wo_b", d, s.o_groups * s.o_lora_rank));
  DI_ASSIGN_OR_RETURN(out->sink, b.Floats(ap + "attn_sink", {h}));
  DI_ASSIGN_OR_RETURN(out->wo_a_groups, b.RowGroups(ap + "wo_a", wo_a, s.o_groups));
  return Status::Ok();
}

Status BindExpertSet(const CheckpointBinder& b, const BlockShape& s, const std::string& p, int64_t experts,
                     ExpertSetWeights* out) {
  const std::string fp = p + "ffn.";
  const int64_t d = s.hidden, inter = s.moe_intermediate;
  DI_ASSIGN_OR_RETURN(out->gate, b.Matrix(fp + "gate", experts, d));
  for (int64_t i = 0; i < experts; ++i) {
    DI_ASSIGN_OR_RETURN(ExpertWeights x, b.Expert(fp + "experts." + std::to_string(i) + ".", inter, d));
    out->experts.push_back(x);
  }
  DI_ASSIGN_OR_RETURN(out->shared, b.Expert(fp + "shared_experts.", inter, d));
  return Status::Ok();
}

}  // namespace deepinfer::model
