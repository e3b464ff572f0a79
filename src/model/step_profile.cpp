#include "model/step_profile.h"

namespace deepinfer::model {
namespace {

std::array<std::atomic<int64_t>, static_cast<int>(Phase::kCount)> g_nanos{};

}  // namespace

std::atomic<bool> StepProfile::enabled_{false};

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kEmbed: return "embedding";
    case Phase::kHcPre: return "mHC pre";
    case Phase::kAttnProjections: return "attention projections";
    case Phase::kAttnCompress: return "compressors + indexer prep";
    case Phase::kAttend: return "attention (window, compressed)";
    case Phase::kAttnOutput: return "attention output projection";
    case Phase::kHcPost: return "mHC post";
    case Phase::kMoeGate: return "MoE router";
    case Phase::kMoeExperts: return "MoE experts";
    case Phase::kMoeCombine: return "MoE combine";
    case Phase::kHead: return "head (hc_head, norm, logits)";
    case Phase::kMtp: return "MTP layer";
    case Phase::kEngram: return "Engram lookup";
    case Phase::kIndexer: return "indexer top-k";
    case Phase::kCount: break;
  }
  return "?";
}

void StepProfile::Enable(bool on) { enabled_.store(on, std::memory_order_relaxed); }

void StepProfile::Add(Phase phase, int64_t nanos) {
  g_nanos[static_cast<int>(phase)].fetch_add(nanos, std::memory_order_relaxed);
}

void StepProfile::Reset() {
  for (auto& n : g_nanos) n.store(0, std::memory_order_relaxed);
}

std::array<double, static_cast<int>(Phase::kCount)> StepProfile::Totals() {
  std::array<double, static_cast<int>(Phase::kCount)> out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(g_nanos[i].load(std::memory_order_relaxed)) * 1e-9;
  return out;
}

}  // namespace deepinfer::model
