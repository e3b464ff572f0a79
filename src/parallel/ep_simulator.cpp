#include "parallel/ep_simulator.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "model/deepseek_v3/v3_config.h"
#include "model/deepseek_v4/v4_config.h"
#include "model/deepseek_v41/v41_config.h"
#include "parallel/expert_load_recorder.h"

namespace deepinfer::parallel {
namespace {

constexpr double kMxfp4BytesPerParam = 17.0 / 32.0;  // 4 bits a value and an 8-bit scale per 32 values
constexpr int64_t kMaxSimulatedVocab = int64_t{1} << 20;

// The replicated weights of a V4-family model (the sizes of the weights in model/deepseek_v4): per layer
// wq_a, wq_b, wkv, the grouped wo_a and wo_b; the compressor's wkv and wgate (twice the head width for the
// overlapping ratio-4 one); on ratio-4 layers the indexer's wq_b, weights_proj and its own compressor; the
// shared experts and the router; then the head.
struct AttentionCounts {
  int64_t window_only = 0, csa = 0, hca = 0;
};

double V4DenseParams(const model::DeepSeekConfig& c, const AttentionCounts& layers, int64_t shared_experts) {
  const double h = static_cast<double>(c.hidden_size), q = static_cast<double>(c.q_lora_rank);
  const double heads_width = static_cast<double>(c.num_heads * c.head_dim);
  const double head = static_cast<double>(c.head_dim);
  const double attention = h * q + q * heads_width + h * head + heads_width * static_cast<double>(c.o_lora_rank) +
                           static_cast<double>(c.o_groups * c.o_lora_rank) * h;
  const double ffn = 3.0 * h * static_cast<double>(c.moe_intermediate_size) * static_cast<double>(shared_experts) +
                     h * static_cast<double>(c.n_routed_experts);
  const double index_width = static_cast<double>(c.index_n_heads * c.index_head_dim);
  const double csa_extra = 2.0 * h * 2.0 * head + q * index_width + h * static_cast<double>(c.index_n_heads) +
                           2.0 * h * 2.0 * static_cast<double>(c.index_head_dim);
  const double hca_extra = 2.0 * h * head;
  const int64_t all = layers.window_only + layers.csa + layers.hca;
  return static_cast<double>(all) * (attention + ffn) + static_cast<double>(layers.csa) * csa_extra +
         static_cast<double>(layers.hca) * hca_extra + static_cast<double>(c.vocab_size) * h;
}

AttentionCounts CountRatios(const std::vector<int64_t>& ratios, int64_t layers) {
  AttentionCounts counts;
  for (int64_t l = 0; l < layers && l < static_cast<int64_t>(ratios.size()); ++l) {
    if (ratios[l] == 0) ++counts.window_only;
    else if (ratios[l] <= 4) ++counts.csa;
    else ++counts.hca;
  }
  return counts;
}

bool DeclaresFp4Experts(const HfConfig& hf) {
  const nlohmann::json& raw = hf.raw();
  for (const nlohmann::json* node : {&raw, raw.contains("quantization_config") ? &raw["quantization_config"] : nullptr,
                                     raw.contains("text_config") ? &raw["text_config"] : nullptr}) {
    if (node && node->is_object() && node->contains("expert_dtype") && (*node)["expert_dtype"].is_string() &&
        (*node)["expert_dtype"].get<std::string>() == "fp4")
      return true;
  }
  return false;
}

double LogChoose(double n, double k) { return std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1); }

}  // namespace

Result<MoeModelShape> PresetModelShape(std::string_view preset) {
  // models.md §2.1 and §2.2: the config.json values of the two releases.
  model::DeepSeekConfig c;
  MoeModelShape s;
  AttentionCounts layers;
  if (preset == "v4-flash") {
    s.name = "DeepSeek-V4-Flash";
    c.hidden_size = 4096;
    c.num_heads = 64;
    c.q_lora_rank = 1024;
    c.o_groups = 8;
    c.n_routed_experts = 256;
    c.moe_intermediate_size = 2048;
    layers = {2, 21, 20};  // ratios 0, 0, then 4 and 128 alternating over layers 2..42
  } else if (preset == "v4-pro") {
    s.name = "DeepSeek-V4-Pro";
    c.hidden_size = 7168;
    c.num_heads = 128;
    c.q_lora_rank = 1536;
    c.o_groups = 16;
    c.n_routed_experts = 384;
    c.moe_intermediate_size = 3072;
    layers = {0, 30, 31};  // ratios 128, 128, then 4 on even and 128 on odd layers 2..60
  } else {
    return Status::InvalidArgument("unknown preset '" + std::string(preset) + "' (v4-flash, v4-pro)");
  }
  c.head_dim = 512;
  c.o_lora_rank = 1024;
  c.num_experts_per_tok = 6;
  c.index_n_heads = 64;
  c.index_head_dim = 128;
  c.vocab_size = 129280;
  s.hidden_size = c.hidden_size;
  s.vocab_size = c.vocab_size;
  s.moe_layers = layers.window_only + layers.csa + layers.hca;
  s.hash_layers = 3;
  s.experts = c.n_routed_experts;
  s.experts_per_token = c.num_experts_per_tok;
  s.expert_params = 3.0 * static_cast<double>(c.hidden_size) * static_cast<double>(c.moe_intermediate_size);
  s.dense_params = V4DenseParams(c, layers, 1);
  s.expert_bytes_per_param = kMxfp4BytesPerParam;
  return s;
}

Result<MoeModelShape> ModelShapeFromConfig(const HfConfig& hf, std::string name) {
  const std::string type = hf.model_type();
  MoeModelShape s;
  s.name = std::move(name);
  if (type == "deepseek_v4") {
    DI_ASSIGN_OR_RETURN(model::V4Config c, model::V4Config::FromHf(hf));
    s.hidden_size = c.hidden_size;
    s.vocab_size = c.vocab_size;
    s.moe_layers = c.num_layers;
    s.hash_layers = std::count(c.router_types.begin(), c.router_types.end(), model::V4RouterType::kHash);
    s.experts = c.n_routed_experts;
    s.experts_per_token = c.num_experts_per_tok;
    s.expert_params = 3.0 * static_cast<double>(c.hidden_size) * static_cast<double>(c.moe_intermediate_size);
    s.dense_params = V4DenseParams(c, CountRatios(c.compress_ratios, c.num_layers), 1);
  } else if (type == "deepseek_v41") {
    DI_ASSIGN_OR_RETURN(model::V41Config c, model::V41Config::FromHf(hf));
    s.hidden_size = c.hidden_size;
    s.vocab_size = c.vocab_size;
    s.moe_layers = c.num_layers;
    const HfConfig* text = &hf;
    HfConfig nested;
    if (hf.raw().contains("text_config") && hf.raw()["text_config"].is_object()) {
      auto parsed = HfConfig::Parse(hf.raw()["text_config"].dump(), hf.source());
      if (parsed.ok()) {
        nested = std::move(*parsed);
        text = &nested;
      }
    }
    s.hash_layers = std::clamp<int64_t>(text->GetInt("num_hash_layers", 0), 0, c.num_layers);
    s.experts = c.n_routed_experts;
    s.experts_per_token = c.num_experts_per_tok;
    s.expert_params = 3.0 * static_cast<double>(c.hidden_size) * static_cast<double>(c.moe_intermediate_size);
    s.dense_params = V4DenseParams(c, CountRatios(c.compress_ratios, c.num_layers), 1);
  } else if (type == "deepseek_v3") {
    DI_ASSIGN_OR_RETURN(model::V3Config c, model::V3Config::FromHf(hf));
    const double h = static_cast<double>(c.hidden_size);
    const double heads = static_cast<double>(c.num_heads);
    const double q_in = c.q_lora_rank > 0 ? h * static_cast<double>(c.q_lora_rank) +
                                                static_cast<double>(c.q_lora_rank) * heads * static_cast<double>(c.head_dim)
                                          : h * heads * static_cast<double>(c.head_dim);
    // MLA: the query path, the latent kv_a, kv_b up to keys and values, the output projection.
    const double attention = q_in + h * static_cast<double>(c.kv_lora_rank + c.rope_dim) +
                             static_cast<double>(c.kv_lora_rank) * heads *
                                 static_cast<double>(c.qk_nope_head_dim + c.v_head_dim) +
                             heads * static_cast<double>(c.v_head_dim) * h;
    const int64_t moe_layers = c.num_layers - c.first_k_dense_replace;
    s.hidden_size = c.hidden_size;
    s.vocab_size = c.vocab_size;
    s.moe_layers = moe_layers;
    s.experts = c.n_routed_experts;
    s.experts_per_token = c.num_experts_per_tok;
    s.expert_groups = c.n_group;
    s.expert_params = 3.0 * h * static_cast<double>(c.moe_intermediate_size);
    s.dense_params = static_cast<double>(c.num_layers) * attention +
                     static_cast<double>(c.first_k_dense_replace) * 3.0 * h * static_cast<double>(c.intermediate_size) +
                     static_cast<double>(moe_layers) *
                         (3.0 * h * static_cast<double>(c.moe_intermediate_size * c.n_shared_experts) +
                          h * static_cast<double>(c.n_routed_experts)) +
                     static_cast<double>(c.vocab_size) * h;
  } else {
    return Status::InvalidArgument(hf.source() + ": model_type '" + type +
                                   "' is not a DeepSeek MoE model (deepseek_v3, deepseek_v4, deepseek_v41)");
  }
  if (s.moe_layers < 1 || s.experts < 1 || s.experts_per_token < 1 || s.experts_per_token > s.experts)
    return Status::InvalidArgument(hf.source() + ": no routed experts to place");
  if (s.experts > EplbLimits::kMaxExperts || s.moe_layers > EplbLimits::kMaxLayers)
    return Status::InvalidArgument(hf.source() + ": more experts or layers than the balancer takes");
  s.expert_bytes_per_param = DeclaresFp4Experts(hf) ? kMxfp4BytesPerParam : 1.0;
  return s;
}

const char* WireDtypeName(WireDtype dtype) {
  switch (dtype) {
    case WireDtype::kFp8: return "fp8";
    case WireDtype::kBf16: return "bf16";
    case WireDtype::kF32: return "f32";
  }
  return "?";
}

double RowBytes(int64_t hidden, WireDtype dtype) {
  const double h = static_cast<double>(hidden);
  switch (dtype) {
    case WireDtype::kFp8: return h + 4.0 * std::ceil(h / 128.0);
    case WireDtype::kBf16: return 2.0 * h;
    case WireDtype::kF32: return 4.0 * h;
  }
  return 0;
}

Result<TokenExchange> ExchangePerToken(const MoeModelShape& model, int64_t ranks, const WireFormat& wire) {
  const int64_t e = model.experts, k = model.experts_per_token;
  if (ranks < 1 || ranks > e) return Status::InvalidArgument("EP" + std::to_string(ranks) + ": ranks must be in 1.." +
                                                             std::to_string(e) + " (the routed experts)");
  if (k < 1 || k > e) return Status::InvalidArgument("top-k must be in 1..experts");
  // P(a given rank holds none of the token's k distinct experts) = C(E − E/N, k) / C(E, k).
  const double per_rank = static_cast<double>(e) / static_cast<double>(ranks);
  const double rest = static_cast<double>(e) - per_rank;
  const double miss = rest < static_cast<double>(k) ? 0.0
                                                     : std::exp(LogChoose(rest, static_cast<double>(k)) -
                                                                LogChoose(static_cast<double>(e), static_cast<double>(k)));
  TokenExchange x;
  x.ranks_reached = static_cast<double>(ranks) * (1.0 - miss);
  const double remote_ranks = static_cast<double>(ranks - 1) * (1.0 - miss);
  const double remote_share = static_cast<double>(ranks - 1) / static_cast<double>(ranks);
  const double ids_weights = static_cast<double>(k) * (4.0 + 4.0);
  const double dispatch_row = RowBytes(model.hidden_size, wire.dispatch);
  const double combine_row = RowBytes(model.hidden_size, wire.combine);
  x.dispatch_bytes = x.ranks_reached * dispatch_row + ids_weights;
  x.remote_dispatch_bytes = remote_ranks * dispatch_row + ids_weights * remote_share;
  if (wire.combine_rows == CombineRows::kPerRank) {
    x.combine_bytes = x.ranks_reached * combine_row;
    x.remote_combine_bytes = remote_ranks * combine_row;
  } else {
    x.combine_bytes = static_cast<double>(k) * combine_row;
    x.remote_combine_bytes = static_cast<double>(k) * remote_share * combine_row;
  }
  return x;
}

AllToAllTime AllToAllPerLayer(const TokenExchange& x, int64_t ranks, double tokens_per_rank, const LinkSpec& link,
                              double balance) {
  AllToAllTime t;
  if (ranks <= 1) return t;
  const double bytes_per_us = link.gbit_per_s * 1e9 / 8.0 / 1e6;
  const double n = static_cast<double>(ranks);
  t.counts_us = std::ceil(std::log2(n)) * link.latency_us + n * 8.0 / bytes_per_us;
  t.dispatch_us = (n - 1) * link.latency_us + tokens_per_rank * x.remote_dispatch_bytes * balance / bytes_per_us;
  t.combine_us = (n - 1) * link.latency_us + tokens_per_rank * x.remote_combine_bytes * balance / bytes_per_us;
  return t;
}

StepTime PredictStep(const MoeModelShape& m, int64_t ranks, double tokens_per_rank, const TokenExchange& x,
                     const LinkSpec& link, const RankSpec& rank, double balance) {
  const double bytes_per_s = rank.memory_gb_per_s * 1e9;
  const double flops_per_s = rank.tflops * 1e12;
  auto roofline_ms = [&](double bytes, double flops) { return 1e3 * std::max(bytes / bytes_per_s, flops / flops_per_s); };
  StepTime t;
  t.dense_ms = roofline_ms(m.dense_params * m.dense_bytes_per_param, 2.0 * m.dense_params * tokens_per_rank);
  const double e = static_cast<double>(m.experts), k = static_cast<double>(m.experts_per_token);
  const double local_experts = e / static_cast<double>(ranks);
  const double step_tokens = tokens_per_rank * static_cast<double>(ranks);
  const double touched = local_experts * (1.0 - std::pow(1.0 - k / e, step_tokens));
  const double layer_ms = roofline_ms(touched * m.expert_params * m.expert_bytes_per_param,
                                      2.0 * tokens_per_rank * k * m.expert_params);
  t.experts_ms = static_cast<double>(m.moe_layers) * layer_ms * balance;
  t.exchange_ms = static_cast<double>(m.moe_layers) * AllToAllPerLayer(x, ranks, tokens_per_rank, link, balance).total_us() / 1e3;
  return t;
}

// --- balance

namespace {

struct Placements {
  ExpertPlacement unbalanced;
  ExpertPlacement balanced;
  bool hierarchical = false;
};

Result<Placements> PlanPlacements(const ExpertLoads& window, int64_t expert_groups, const BalanceOptions& o) {
  if (o.ranks < 1 || o.redundant_experts < 0 || o.ranks_per_node < 1)
    return Status::InvalidArgument("ranks, redundant experts and ranks per node must be positive");
  if (window.experts % o.ranks != 0)
    return Status::InvalidArgument("EP" + std::to_string(o.ranks) + ": " + std::to_string(window.experts) +
                                   " experts do not divide over the ranks");
  EplbShape shape;
  shape.replicas = window.experts + o.redundant_experts;
  shape.ranks = o.ranks;
  shape.nodes = std::max<int64_t>(1, o.ranks / o.ranks_per_node);
  shape.groups = expert_groups;
  if (shape.replicas % o.ranks != 0)
    return Status::InvalidArgument("EP" + std::to_string(o.ranks) + ": " + std::to_string(shape.replicas) +
                                   " replicas (experts + " + std::to_string(o.redundant_experts) +
                                   " redundant) are not a multiple of the ranks");
  Placements p;
  DI_ASSIGN_OR_RETURN(p.unbalanced, IdentityPlacement(window.layers, window.experts, o.ranks));
  DI_ASSIGN_OR_RETURN(p.balanced, RebalanceExperts(window, shape));
  p.hierarchical = shape.hierarchical();
  return p;
}

struct Accumulator {
  double sum = 0, max = 0;
  int64_t n = 0;
  void Add(double v) {
    sum += v;
    max = std::max(max, v);
    ++n;
  }
  double mean() const { return n ? sum / static_cast<double>(n) : 1.0; }
};

void Measure(const ExpertPlacement& p, const ExpertLoads& step, Accumulator* acc) {
  for (int64_t l = 0; l < step.layers; ++l) acc->Add(BalanceRatio(RankLoads(p, l, step.row(l))));
}

BalanceFigures Evaluate(const Placements& p, const ExpertLoads& window, const std::vector<ExpertLoads>& eval) {
  Accumulator unbalanced, balanced, planned;
  for (const ExpertLoads& step : eval) {
    Measure(p.unbalanced, step, &unbalanced);
    Measure(p.balanced, step, &balanced);
  }
  Measure(p.balanced, window, &planned);
  BalanceFigures f;
  f.unbalanced_mean = unbalanced.mean();
  f.unbalanced_max = unbalanced.max;
  f.balanced_mean = balanced.mean();
  f.balanced_max = balanced.max;
  f.planned_mean = planned.mean();
  f.replicas = p.balanced.replicas;
  f.hierarchical = p.hierarchical;
  f.evaluated_steps = static_cast<int64_t>(eval.size());
  return f;
}

// Zipf weights 1 / i^s over a random order of n items, as cumulative sums.
std::vector<double> ZipfCumulative(int64_t n, double zipf, std::mt19937_64& rng) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<double> weight(n);
  for (int64_t i = 0; i < n; ++i) weight[order[i]] = 1.0 / std::pow(static_cast<double>(i + 1), zipf);
  std::vector<double> cumulative(n);
  std::partial_sum(weight.begin(), weight.end(), cumulative.begin());
  return cumulative;
}

int64_t Draw(const std::vector<double>& cumulative, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(0.0, cumulative.back());
  const auto it = std::upper_bound(cumulative.begin(), cumulative.end(), uniform(rng));
  return std::min<int64_t>(it - cumulative.begin(), static_cast<int64_t>(cumulative.size()) - 1);
}

// One synthetic layer's routing. A score-routed layer draws each token's k distinct experts from Zipf
// weights over the experts: repeated draws, skipping experts already chosen (sampling without replacement
// in proportion to the weights). A hash-routed layer draws a token id from Zipf frequencies over the
// vocabulary and sends it to the k distinct experts a fixed random table gives that id, as the model's
// token-to-expert table does: its load follows token frequencies.
class LayerRouter {
 public:
  LayerRouter(const MoeModelShape& m, bool hashed, double zipf, double token_zipf, std::mt19937_64& rng)
      : k_(m.experts_per_token) {
    if (!hashed) {
      cumulative_ = ZipfCumulative(m.experts, zipf, rng);
      return;
    }
    cumulative_ = ZipfCumulative(m.vocab_size, token_zipf, rng);
    table_.reserve(static_cast<size_t>(m.vocab_size * k_));
    std::vector<int32_t> experts(m.experts);
    std::iota(experts.begin(), experts.end(), 0);
    for (int64_t t = 0; t < m.vocab_size; ++t) {
      for (int64_t j = 0; j < k_; ++j) {  // a partial Fisher-Yates shuffle: k distinct experts
        std::uniform_int_distribution<int64_t> pick(j, m.experts - 1);
        std::swap(experts[j], experts[pick(rng)]);
        table_.push_back(experts[j]);
      }
    }
  }

  void Route(std::mt19937_64& rng, std::vector<int32_t>* out) const {
    if (!table_.empty()) {
      const int64_t token = Draw(cumulative_, rng);
      out->insert(out->end(), table_.begin() + token * k_, table_.begin() + (token + 1) * k_);
      return;
    }
    const size_t first = out->size();
    while (static_cast<int64_t>(out->size() - first) < k_) {
      const int32_t e = static_cast<int32_t>(Draw(cumulative_, rng));
      if (std::find(out->begin() + static_cast<std::ptrdiff_t>(first), out->end(), e) == out->end()) out->push_back(e);
    }
  }

 private:
  int64_t k_;
  std::vector<double> cumulative_;
  std::vector<int32_t> table_;  // [vocab][k] for a hash-routed layer
};

}  // namespace

Result<BalanceFigures> SimulateBalance(const MoeModelShape& model, const SyntheticRouting& r,
                                       const BalanceOptions& options) {
  if (r.layers < 1 || r.layers > EplbLimits::kMaxLayers || r.tokens_per_step < 1 || r.window_steps < 1 ||
      r.eval_steps < 1 || !(r.zipf >= 0) || r.zipf > 10 || !(r.token_zipf >= 0) || r.token_zipf > 10)
    return Status::InvalidArgument("synthetic routing: layers, tokens, steps must be positive and the skews in "
                                   "[0, 10]");
  if (r.hash_layers < 0 || r.hash_layers > r.layers)
    return Status::InvalidArgument("synthetic routing: hash-routed layers must be in 0..layers");
  if (r.hash_layers > 0 && (model.vocab_size < 1 || model.vocab_size > kMaxSimulatedVocab))
    return Status::InvalidArgument("synthetic routing: hash routing needs a vocabulary of 1.." +
                                   std::to_string(kMaxSimulatedVocab) + " tokens");
  std::mt19937_64 rng(r.seed);
  std::vector<LayerRouter> routers;
  for (int64_t l = 0; l < r.layers; ++l) routers.emplace_back(model, l < r.hash_layers, r.zipf, r.token_zipf, rng);
  DI_ASSIGN_OR_RETURN(auto recorder, ExpertLoadRecorder::Create(r.layers, model.experts, r.window_steps, r.window_steps));
  std::vector<int32_t> ids;
  auto record_step = [&]() -> Status {
    for (int64_t l = 0; l < r.layers; ++l) {
      ids.clear();
      for (int64_t t = 0; t < r.tokens_per_step; ++t) routers[l].Route(rng, &ids);
      DI_RETURN_IF_ERROR(recorder->RecordRouting(l, ids));
    }
    recorder->EndStep();
    return Status::Ok();
  };
  for (int64_t s = 0; s < r.window_steps; ++s) DI_RETURN_IF_ERROR(record_step());
  const ExpertLoads window = recorder->WindowLoads();
  DI_ASSIGN_OR_RETURN(Placements placements, PlanPlacements(window, model.expert_groups, options));
  std::vector<ExpertLoads> eval;
  for (int64_t s = 0; s < r.eval_steps; ++s) {
    DI_RETURN_IF_ERROR(record_step());
    eval.push_back(recorder->LastStepLoads());
  }
  return Evaluate(placements, window, eval);
}

Result<BalanceFigures> TraceBalance(const std::vector<ExpertLoads>& steps, int64_t expert_groups,
                                    const BalanceOptions& options) {
  if (steps.empty()) return Status::InvalidArgument("the routing trace has no steps");
  const size_t plan_steps = std::max<size_t>(1, steps.size() / 2);
  ExpertLoads window = steps[0];
  for (size_t s = 1; s < plan_steps; ++s)
    for (size_t i = 0; i < window.values.size(); ++i) window.values[i] += steps[s].values[i];
  DI_ASSIGN_OR_RETURN(Placements placements, PlanPlacements(window, expert_groups, options));
  const std::vector<ExpertLoads> eval(steps.begin() + static_cast<std::ptrdiff_t>(steps.size() == 1 ? 0 : plan_steps),
                                      steps.end());
  return Evaluate(placements, window, eval);
}

}  // namespace deepinfer::parallel
