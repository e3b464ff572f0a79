#include "engine/drafter.h"

#include <algorithm>
#include <cmath>

#include "core/log.h"
#include "sampling/philox.h"

namespace deepinfer::engine {

std::vector<int32_t> NgramDrafter::ProposeOne(std::span<const int32_t> tokens, int max_tokens, int64_t* matched) const {
  if (matched) *matched = 0;
  const auto size = static_cast<int64_t>(tokens.size());
  const int64_t floor = std::max<int64_t>(0, size - kSearchTokens);
  for (int64_t n = std::min<int64_t>(max_n_, size - 1); n >= min_n_; --n) {
    const int32_t* suffix = tokens.data() + size - n;
    // The latest earlier occurrence [j, j + n) with at least one token after it (j + n < size).
    for (int64_t j = size - n - 1; j >= floor; --j) {
      if (tokens[static_cast<size_t>(j)] != suffix[0]) continue;
      if (!std::equal(suffix, suffix + n, tokens.begin() + j)) continue;
      const int64_t from = j + n;
      const int64_t to = std::min<int64_t>(size, from + max_tokens);
      if (matched) *matched = n;
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + to);
    }
  }
  return {};
}

void NgramDrafter::Propose(std::span<const DraftInput> inputs, std::vector<std::vector<int32_t>>* drafts) {
  drafts->resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) (*drafts)[i] = ProposeOne(inputs[i].tokens, inputs[i].max_tokens);
}

void SuffixDrafter::Propose(std::span<const DraftInput> inputs, std::vector<std::vector<int32_t>>* drafts) {
  drafts->resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    int64_t own = 0, indexed = 0;
    (*drafts)[i] = own_.ProposeOne(inputs[i].tokens, inputs[i].max_tokens, &own);
    std::vector<int32_t> other = index_->Lookup(inputs[i].tokens, inputs[i].max_tokens, &indexed);
    if (indexed > own) (*drafts)[i] = std::move(other);
  }
}

SyntheticDrafter::SyntheticDrafter(std::vector<double> acceptance_rates, int64_t vocab_size)
    : vocab_size_(std::max<int64_t>(vocab_size, 2)) {
  double previous = 1;
  for (double rate : acceptance_rates) {
    keep_.push_back(previous > 0 ? std::clamp(rate / previous, 0.0, 1.0) : 0.0);
    previous = rate;
  }
}

Hash128 SyntheticDrafter::KeyOf(const DraftInput& input) {
  Hasher128 h;
  h.UpdateInt(static_cast<uint64_t>(input.prompt_tokens));
  h.Update(input.tokens.data(), static_cast<size_t>(input.prompt_tokens) * sizeof(int32_t));
  h.UpdateInt(input.seed);
  h.UpdateInt(static_cast<uint64_t>(input.index));
  return h.Digest();
}

const std::vector<int32_t>* SyntheticDrafter::RecordingFor(const DraftInput& input) {
  auto known = keys_.find(input.sequence);
  if (known == keys_.end()) known = keys_.emplace(input.sequence, KeyOf(input)).first;
  auto it = recorded_.find(known->second);
  return it == recorded_.end() ? nullptr : &it->second;
}

void SyntheticDrafter::Propose(std::span<const DraftInput> inputs, std::vector<std::vector<int32_t>>* drafts) {
  drafts->resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DraftInput& in = inputs[i];
    std::vector<int32_t>& draft = (*drafts)[i];
    draft.clear();
    const std::vector<int32_t>* recording = RecordingFor(in);
    if (!recording) continue;
    // The next token's index among the outputs.
    const int64_t next = static_cast<int64_t>(in.tokens.size()) - in.prompt_tokens;
    const uint64_t stream = keys_[in.sequence].low;
    for (int j = 0; j < in.max_tokens && next + j < static_cast<int64_t>(recording->size()); ++j) {
      int32_t token = (*recording)[static_cast<size_t>(next + j)];
      const double keep = j < static_cast<int>(keep_.size()) ? keep_[static_cast<size_t>(j)] : 1.0;
      if (keep < 1.0) {
        const double u = sampling::UniformDraw(
            {.seed = stream, .stream = static_cast<uint32_t>(j), .sequence = 0, .position = next + j});
        if (u >= keep) token = static_cast<int32_t>((token + 1) % vocab_size_);
      }
      draft.push_back(token);
    }
  }
}

void SyntheticDrafter::Finished(const DraftInput& input) {
  auto known = keys_.find(input.sequence);
  const Hash128 key = known != keys_.end() ? known->second : KeyOf(input);
  if (known != keys_.end()) keys_.erase(known);
  const auto output = static_cast<int64_t>(input.tokens.size()) - input.prompt_tokens;
  if (output <= 0 || output > kMaxRecordedTokens) return;
  auto it = recorded_.find(key);
  if (it != recorded_.end()) {
    recorded_tokens_ -= static_cast<int64_t>(it->second.size());
    std::erase(order_, key);
    recorded_.erase(it);
  }
  while (recorded_tokens_ + output > kMaxRecordedTokens && !order_.empty()) {
    auto old = recorded_.find(order_.front());
    recorded_tokens_ -= static_cast<int64_t>(old->second.size());
    recorded_.erase(old);
    order_.pop_front();
  }
  recorded_.emplace(key, std::vector<int32_t>(input.tokens.begin() + input.prompt_tokens, input.tokens.end()));
  order_.push_back(key);
  recorded_tokens_ += output;
}

void ModelDrafter::Attach(model::CausalLM* model, kvcache::KvPools* pools) {
  model_ = model;
  pools_ = pools;
}

double ModelDrafter::Calibrated(double confidence, int64_t slot) const {
  if (slot >= static_cast<int64_t>(calibration_.size())) return confidence;
  const double c = std::clamp(confidence, 1e-12, 1 - 1e-12);
  return 1 / (1 + std::exp(-std::log(c / (1 - c)) / calibration_[static_cast<size_t>(slot)]));
}

void ModelDrafter::Propose(std::span<const DraftInput> inputs, std::vector<std::vector<int32_t>>* drafts) {
  drafts->assign(inputs.size(), {});
  survival_.assign(inputs.size(), {});
  if (!model_) return;
  const int64_t bound = model_->info().max_draft_steps;
  std::vector<int64_t> steps(inputs.size(), 0);
  int64_t most = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DraftInput& in = inputs[i];
    if (in.tokens.empty()) continue;
    if (index_) {
      int64_t matched = 0;
      std::vector<int32_t> found = index_->Lookup(in.tokens, in.max_tokens, &matched);
      if (!found.empty()) {
        (*drafts)[i] = std::move(found);
        continue;
      }
    }
    if (!in.state) continue;
    int64_t n = in.max_tokens;
    if (in.room >= 0) n = std::min(n, in.room);
    if (bound > 0) n = std::min(n, bound);
    steps[i] = std::max<int64_t>(n, 0);
    most = std::max(most, steps[i]);
  }
  std::vector<model::DraftChunk> batch;
  std::vector<size_t> of;
  for (int64_t k = 0; k < most; ++k) {
    batch.clear();
    of.clear();
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (steps[i] <= k) continue;
      const int32_t token = k == 0 ? inputs[i].tokens.back() : (*drafts)[i].back();
      batch.push_back({.state = inputs[i].state, .token = token});
      of.push_back(i);
    }
    Status st = model_->Draft(batch, *pools_, &out_);
    if (!st.ok()) {
      if (!error_logged_) DI_LOG(kWarn, "engine: drafting failed; outputs go on without drafts").Field("status", st.ToString());
      error_logged_ = true;
      return;
    }
    const int64_t vocab = out_.vocab_size;
    for (size_t j = 0; j < of.size(); ++j) {
      const float* row = out_.row(j);
      const int64_t best = std::max_element(row, row + vocab) - row;  // the first maximum: the lowest id
      (*drafts)[of[j]].push_back(static_cast<int32_t>(best));
      if (out_.confidence.size() == of.size()) {
        std::vector<float>& s = survival_[of[j]];
        const double before = s.empty() ? 1.0 : s.back();
        s.push_back(static_cast<float>(before * Calibrated(out_.confidence[j], k)));
      }
    }
  }
}

Result<std::unique_ptr<Drafter>> MakeDrafter(const SpeculativeConfig& config, int64_t vocab_size) {
  switch (config.method) {
    case DraftMethod::kNgram:
      return std::unique_ptr<Drafter>(std::make_unique<NgramDrafter>(config.prompt_lookup_min, config.prompt_lookup_max));
    case DraftMethod::kSynthetic:
      return std::unique_ptr<Drafter>(
          std::make_unique<SyntheticDrafter>(config.synthetic_acceptance_rates, vocab_size));
    case DraftMethod::kSuffix:
      return std::unique_ptr<Drafter>(std::make_unique<SuffixDrafter>(config.prompt_lookup_min, config.prompt_lookup_max));
    case DraftMethod::kMtp:
      return std::unique_ptr<Drafter>(std::make_unique<ModelDrafter>(std::vector<double>{}, config.suffix_override_tokens));
    case DraftMethod::kDspark: {
      std::vector<double> calibration;
      if (!config.calibration_path.empty()) {
        DI_ASSIGN_OR_RETURN(calibration, ReadCalibrationTemperatures(config.calibration_path));
      }
      return std::unique_ptr<Drafter>(
          std::make_unique<ModelDrafter>(std::move(calibration), config.suffix_override_tokens));
    }
    case DraftMethod::kNone: break;
  }
  return Status::InvalidArgument("speculative config: no method");
}

}  // namespace deepinfer::engine
