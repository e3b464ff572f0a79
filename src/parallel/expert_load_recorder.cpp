#include "parallel/expert_load_recorder.h"

#include <algorithm>

#include "core/json.h"

namespace deepinfer::parallel {
namespace {

ExpertLoads ToLoads(int64_t layers, int64_t experts, const std::vector<int64_t>& counts) {
  ExpertLoads loads(layers, experts);
  for (size_t i = 0; i < counts.size(); ++i) loads.values[i] = static_cast<double>(counts[i]);
  return loads;
}

}  // namespace

Result<std::unique_ptr<ExpertLoadRecorder>> ExpertLoadRecorder::Create(int64_t layers, int64_t experts,
                                                                      int64_t window_steps, int64_t slots) {
  if (layers < 1 || layers > EplbLimits::kMaxLayers || experts < 1 || experts > EplbLimits::kMaxExperts)
    return Status::InvalidArgument("expert load recorder: " + std::to_string(layers) + " layers of " + std::to_string(experts) +
                                   " experts is out of bounds");
  if (window_steps < 1 || window_steps > kMaxWindowSteps || slots < 1 || slots > window_steps ||
      window_steps % slots != 0)
    return Status::InvalidArgument("expert load recorder: the window of " + std::to_string(window_steps) + " steps must be " +
                                   "1.." + std::to_string(kMaxWindowSteps) + " and a multiple of its " + std::to_string(slots) + " slots");
  if (slots * layers * experts > kMaxSlotValues)
    return Status::InvalidArgument("expert load recorder: " + std::to_string(slots) + " slots of " + std::to_string(layers) + " × " +
                                   std::to_string(experts) + " counts exceed " + std::to_string(kMaxSlotValues));
  return std::unique_ptr<ExpertLoadRecorder>(new ExpertLoadRecorder(layers, experts, window_steps, slots));
}

ExpertLoadRecorder::ExpertLoadRecorder(int64_t layers, int64_t experts, int64_t window_steps, int64_t slots)
    : layers_(layers), experts_(experts), steps_per_slot_(window_steps / slots), slots_(slots) {
  MutexLock lock(&mu_);
  current_.assign(layers * experts, 0);
  last_.assign(layers * experts, 0);
  ring_.assign(slots * layers * experts, 0);
  window_.assign(layers * experts, 0);
  slot_steps_.assign(slots, 0);
}

Status ExpertLoadRecorder::CheckLayer(int64_t layer) const {
  if (layer < 0 || layer >= layers_)
    return Status::InvalidArgument("expert load recorder: layer " + std::to_string(layer) + " outside 0.." + std::to_string(layers_ - 1));
  return Status::Ok();
}

Status ExpertLoadRecorder::RecordRouting(int64_t layer, std::span<const int32_t> expert_ids) {
  DI_RETURN_IF_ERROR(CheckLayer(layer));
  for (int32_t id : expert_ids)
    if (id < 0 || id >= experts_)
      return Status::InvalidArgument("expert load recorder: expert id " + std::to_string(id) + " outside 0.." +
                                     std::to_string(experts_ - 1));
  MutexLock lock(&mu_);
  int64_t* row = current_.data() + layer * experts_;
  for (int32_t id : expert_ids) ++row[id];
  return Status::Ok();
}

Status ExpertLoadRecorder::RecordCounts(int64_t layer, std::span<const int64_t> tokens_per_expert) {
  DI_RETURN_IF_ERROR(CheckLayer(layer));
  if (static_cast<int64_t>(tokens_per_expert.size()) != experts_)
    return Status::InvalidArgument("expert load recorder: " + std::to_string(static_cast<int64_t>(tokens_per_expert.size())) +
                                   " counts for " + std::to_string(experts_) + " experts");
  for (int64_t c : tokens_per_expert)
    if (c < 0) return Status::InvalidArgument("expert load recorder: a negative token count");
  MutexLock lock(&mu_);
  int64_t* row = current_.data() + layer * experts_;
  for (int64_t e = 0; e < experts_; ++e) row[e] += tokens_per_expert[e];
  return Status::Ok();
}

void ExpertLoadRecorder::EndStep() {
  MutexLock lock(&mu_);
  const size_t n = current_.size();
  if (slot_steps_[slot_] == steps_per_slot_) {
    // The slot is full: the next one, the oldest, leaves the window and takes this step.
    slot_ = (slot_ + 1) % slots_;
    int64_t* oldest = ring_.data() + slot_ * n;
    for (size_t i = 0; i < n; ++i) window_[i] -= oldest[i];
    std::fill(oldest, oldest + n, 0);
    window_steps_ -= slot_steps_[slot_];
    slot_steps_[slot_] = 0;
  }
  int64_t* slot = ring_.data() + slot_ * n;
  for (size_t i = 0; i < n; ++i) {
    slot[i] += current_[i];
    window_[i] += current_[i];
  }
  ++slot_steps_[slot_];
  ++window_steps_;
  ++steps_;
  last_.swap(current_);
  std::fill(current_.begin(), current_.end(), 0);
}

ExpertLoads ExpertLoadRecorder::WindowLoads() const {
  MutexLock lock(&mu_);
  return ToLoads(layers_, experts_, window_);
}

ExpertLoads ExpertLoadRecorder::LastStepLoads() const {
  MutexLock lock(&mu_);
  return ToLoads(layers_, experts_, last_);
}

int64_t ExpertLoadRecorder::window_steps_recorded() const {
  MutexLock lock(&mu_);
  return window_steps_;
}

int64_t ExpertLoadRecorder::steps() const {
  MutexLock lock(&mu_);
  return steps_;
}

Result<std::vector<double>> ExpertLoadRecorder::Balance(const ExpertPlacement& placement,
                                                        const std::vector<int64_t>& counts) const {
  if (placement.layers != layers_ || placement.experts != experts_)
    return Status::InvalidArgument("expert load recorder: a placement of " + std::to_string(placement.layers) + " layers of " +
                                   std::to_string(placement.experts) + " experts for " + std::to_string(layers_) + " of " + std::to_string(experts_));
  std::vector<double> balance(layers_);
  std::vector<double> row(experts_);
  for (int64_t l = 0; l < layers_; ++l) {
    for (int64_t e = 0; e < experts_; ++e) row[e] = static_cast<double>(counts[l * experts_ + e]);
    balance[l] = BalanceRatio(RankLoads(placement, l, row));
  }
  return balance;
}

Result<std::vector<double>> ExpertLoadRecorder::LastStepBalance(const ExpertPlacement& placement) const {
  std::vector<int64_t> counts;
  {
    MutexLock lock(&mu_);
    counts = last_;
  }
  return Balance(placement, counts);
}

Result<std::vector<double>> ExpertLoadRecorder::WindowBalance(const ExpertPlacement& placement) const {
  std::vector<int64_t> counts;
  {
    MutexLock lock(&mu_);
    counts = window_;
  }
  return Balance(placement, counts);
}

std::string ExpertLoadRecorder::LastStepTraceLine() const {
  std::vector<int64_t> counts;
  {
    MutexLock lock(&mu_);
    counts = last_;
  }
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t l = 0; l < layers_; ++l)
    rows.push_back(std::vector<int64_t>(counts.begin() + l * experts_, counts.begin() + (l + 1) * experts_));
  nlohmann::json line = nlohmann::json::object();
  line["loads"] = std::move(rows);
  return DumpJson(line);
}

}  // namespace deepinfer::parallel
