// Where a forward step spends its time, by phase, for `deepinfer bench model --breakdown`. Off by default:
// a disabled ScopedPhase costs one relaxed atomic load. Phases are timed on the calling thread only (the
// pool's workers run inside the phase that dispatched them), and nested phases are not subtracted.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "core/clock.h"

namespace deepinfer::model {

enum class Phase : int {
  kEmbed,
  kHcPre,
  kAttnProjections,
  kAttnCompress,
  kAttend,
  kAttnOutput,
  kHcPost,
  kMoeGate,
  kMoeExperts,
  kMoeCombine,
  kHead,
  kMtp,
  kEngram,   // V4.1: n-gram table lookups, wkv and the gate
  kIndexer,  // V4.1: indexer scoring and the (two-level) top-k
  kCount,
};

const char* PhaseName(Phase phase);

class StepProfile {
 public:
  static void Enable(bool on);
  static bool enabled() { return enabled_.load(std::memory_order_relaxed); }
  static void Add(Phase phase, int64_t nanos);
  static void Reset();
  // Accumulated seconds per phase since the last Reset.
  static std::array<double, static_cast<int>(Phase::kCount)> Totals();

 private:
  static std::atomic<bool> enabled_;
};

class ScopedPhase {
 public:
  explicit ScopedPhase(Phase phase) : phase_(phase), start_(StepProfile::enabled() ? NowNanos() : -1) {}
  ~ScopedPhase() { Stop(); }
  // Ends the running phase, if any, and starts `next`: one object times a function's consecutive phases.
  void Switch(Phase next) {
    Stop();
    phase_ = next;
    start_ = StepProfile::enabled() ? NowNanos() : -1;
  }
  // Ends the running phase; time until the next Switch is counted in none.
  void Stop() {
    if (start_ >= 0) StepProfile::Add(phase_, NowNanos() - start_);
    start_ = -1;
  }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  Phase phase_;
  int64_t start_;
};

}  // namespace deepinfer::model
