#include "model/causal_lm.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "core/clock.h"
#include "core/hf_config.h"
#include "model/deepseek_v3/v3_model.h"
#include "model/deepseek_v4/v4_model.h"
#include "model/deepseek_v41/v41_model.h"

namespace deepinfer::model {

const char* ComputePrecisionName(ComputePrecision precision) {
  return precision == ComputePrecision::kExact ? "exact" : "bf16";
}

const char* KvPrecisionName(KvPrecision precision) { return precision == KvPrecision::kF32 ? "f32" : "bf16"; }

Result<std::unique_ptr<CausalLM>> LoadCausalLM(const std::string& dir, const LoadOptions& options) {
  DI_ASSIGN_OR_RETURN(HfConfig hf, HfConfig::Load(dir));
  const std::string type = hf.model_type();
  if (type == "deepseek_v3" || type == "deepseek_v32") {
    DI_ASSIGN_OR_RETURN(std::unique_ptr<V3Model> model, V3Model::Load(dir, options));
    return std::unique_ptr<CausalLM>(std::move(model));
  }
  if (type == "deepseek_v4") {
    DI_ASSIGN_OR_RETURN(std::unique_ptr<V4Model> model, V4Model::Load(dir, options));
    return std::unique_ptr<CausalLM>(std::move(model));
  }
  if (type == "deepseek_v41" || type == "deepseek_v41_text") {
    DI_ASSIGN_OR_RETURN(std::unique_ptr<V41Model> model, V41Model::Load(dir, options));
    return std::unique_ptr<CausalLM>(std::move(model));
  }
  return Status::Unimplemented(hf.source() + ": model_type '" + type +
                               "' is not supported (deepseek_v3, deepseek_v32, deepseek_v4, deepseek_v41)");
}

std::function<void(int64_t, int64_t)> TerminalProgressBar(std::string label) {
  if (!isatty(STDERR_FILENO)) return {};
  struct Bar {
    std::string label;
    Stopwatch watch;
    int last_percent = -1;
  };
  auto bar = std::make_shared<Bar>();
  bar->label = std::move(label);
  return [bar](int64_t done, int64_t total) {
    const int percent = total > 0 ? static_cast<int>(100 * done / total) : 100;
    if (percent == bar->last_percent) return;
    bar->last_percent = percent;
    constexpr int kWidth = 30;
    const int filled = percent * kWidth / 100;
    std::fprintf(stderr, "\r%s [%.*s%*s] %3d%% %7.1f/%.1f MiB %5.1fs", bar->label.c_str(), filled,
                 "##############################", kWidth - filled, "", percent, done / 1048576.0, total / 1048576.0,
                 bar->watch.ElapsedSeconds());
    if (done >= total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
}

int64_t WindowReplayPositions(const kvcache::KvCacheSpec& spec) {
  int64_t window = 0, window_layers = 0;
  for (const kvcache::CacheGroupSpec& g : spec.groups) {
    if (g.retention != kvcache::CacheRetention::kWindow) continue;
    window = std::max(window, g.window);
    window_layers = std::max(window_layers, g.num_layers);
  }
  return (window_layers + 1) * std::max<int64_t>(window - 1, 0) + kvcache::kBlockTokens;
}

}  // namespace deepinfer::model
