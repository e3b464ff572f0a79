#include "model/common/checkpoint_io.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <map>
#include <span>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"

namespace deepinfer::model {
namespace {

volatile uint8_t g_prefault_sink = 0;

}  // namespace

void Prefault(const Checkpoint& checkpoint, const std::function<bool(const TensorInfo&)>& skip,
              const std::function<void(int64_t, int64_t)>& progress) {
  auto read = [&](const TensorInfo& t) { return !skip || !skip(t); };
  int64_t total = 0;
  for (const TensorInfo* t : checkpoint.tensors())
    if (read(*t)) total += static_cast<int64_t>(t->nbytes());
  int64_t done = 0;
  uint8_t sink = 0;
  for (const TensorInfo* t : checkpoint.tensors()) {
    if (!read(*t)) continue;
    const volatile uint8_t* p = t->data;
    for (uint64_t at = 0; at < t->nbytes(); at += 4096) sink ^= p[at];
    done += static_cast<int64_t>(t->nbytes());
    if (progress) progress(std::min(done, total), total);
  }
  if (progress) progress(total, total);
  g_prefault_sink = g_prefault_sink + sink;  // keeps the reads
}

void ReleaseTensorPages(const Checkpoint& checkpoint, const std::function<bool(const TensorInfo&)>& which) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (const TensorInfo* t : checkpoint.tensors()) {
    if (t->data == nullptr || !which(*t)) continue;
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(t->data) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(t->data) + t->nbytes()) / page * page;
    // A read-only private file mapping: the pages come back from the file if they are ever read again.
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  }
}

namespace {

class CheckpointPages final : public ExpertWeightPages {
 public:
  explicit CheckpointPages(const Checkpoint& checkpoint) {
    constexpr std::string_view kLayers = "layers.", kExperts = ".ffn.experts.";
    std::map<int64_t, std::map<int64_t, std::vector<const TensorInfo*>>> found;  // layer → expert → tensors
    for (const TensorInfo* t : checkpoint.tensors()) {
      const std::string_view name = t->name;
      const size_t at = name.find(kExperts);
      if (t->data == nullptr || !name.starts_with(kLayers) || at == std::string_view::npos) continue;
      int64_t layer = 0, expert = 0;
      const char* layer_begin = name.data() + kLayers.size();
      const auto [layer_end, layer_ec] = std::from_chars(layer_begin, name.data() + at, layer);
      const char* expert_begin = name.data() + at + kExperts.size();
      const auto [expert_end, expert_ec] = std::from_chars(expert_begin, name.data() + name.size(), expert);
      if (layer_ec != std::errc() || layer_end != name.data() + at || expert_ec != std::errc() || expert_end == expert_begin)
        continue;
      found[layer][expert].push_back(t);
    }
    for (auto& [layer, experts] : found) {
      std::vector<std::vector<const TensorInfo*>> by_expert;
      for (auto& [expert, tensors] : experts) {
        if (expert >= static_cast<int64_t>(by_expert.size())) by_expert.resize(static_cast<size_t>(expert) + 1);
        by_expert[static_cast<size_t>(expert)] = std::move(tensors);
      }
      layers_.push_back(std::move(by_expert));
    }
  }

  void ReadIn(int64_t layer, int64_t expert) const override {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    for (const TensorInfo* t : Tensors(layer, expert)) {
      uint8_t sum = 0;
      for (uint64_t at = 0; at < t->nbytes(); at += page) sum ^= *static_cast<const volatile uint8_t*>(t->data + at);
      sink_.fetch_xor(sum, std::memory_order_relaxed);
    }
  }

  void GiveBack(int64_t layer, int64_t expert) const override {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    for (const TensorInfo* t : Tensors(layer, expert)) {
      const uintptr_t begin = (reinterpret_cast<uintptr_t>(t->data) + page - 1) / page * page;
      const uintptr_t end = (reinterpret_cast<uintptr_t>(t->data) + t->nbytes()) / page * page;
      // A read-only private file mapping: the pages come back from the file if they are ever read again.
      if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    }
  }

 private:
  std::span<const TensorInfo* const> Tensors(int64_t layer, int64_t expert) const {
    if (layer < 0 || layer >= static_cast<int64_t>(layers_.size())) return {};
    const auto& experts = layers_[static_cast<size_t>(layer)];
    if (expert < 0 || expert >= static_cast<int64_t>(experts.size())) return {};
    return experts[static_cast<size_t>(expert)];
  }

  std::vector<std::vector<std::vector<const TensorInfo*>>> layers_;  // routed layer → expert → tensors
  mutable std::atomic<uint8_t> sink_{0};  // keeps the page reads from being optimised away
};

}  // namespace

std::shared_ptr<const ExpertWeightPages> CheckpointExpertPages(const Checkpoint& checkpoint) {
  return std::make_shared<CheckpointPages>(checkpoint);
}

Result<Hash128> WeightsFingerprint(const std::string& dir, const Checkpoint& checkpoint) {
  DI_ASSIGN_OR_RETURN(std::string config, ReadFileToString(dir + "/config.json"));
  Hasher128 h;
  h.UpdateInt(config.size()).Update(config);
  for (const TensorInfo* t : checkpoint.tensors()) {
    h.UpdateInt(t->name.size()).Update(t->name).UpdateInt(static_cast<uint64_t>(t->dtype));
    h.UpdateInt(t->shape.size());
    for (int64_t dim : t->shape) h.UpdateInt(static_cast<uint64_t>(dim));
    const uint64_t bytes = t->nbytes();
    h.UpdateInt(bytes);
    const uint64_t sample = std::min<uint64_t>(64, bytes);
    h.Update(t->data, sample);
    h.Update(t->data + bytes / 2 - std::min(bytes / 2, sample / 2), sample);
    h.Update(t->data + bytes - sample, sample);
  }
  return h.Digest();
}

}  // namespace deepinfer::model
