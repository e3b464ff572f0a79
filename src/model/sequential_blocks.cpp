#include "model/sequential_blocks.h"

namespace deepinfer::model {

SequentialBlocks::SequentialBlocks(const kvcache::KvCacheSpec& spec, const kvcache::KvPools& pools)
    : spec_(&spec), capacity_(spec.groups.size(), 0), next_(spec.groups.size(), 0) {
  for (size_t g = 0; g < spec.groups.size() && g < pools.num_groups(); ++g) capacity_[g] = pools.group(g).num_blocks();
}

Status SequentialBlocks::Reserve(SequenceState& state, int64_t extra) {
  if (state.num_groups() != spec_->groups.size())
    return Status::InvalidArgument("the sequence has " + std::to_string(state.num_groups()) + " block tables, the spec " +
                                   std::to_string(spec_->groups.size()) + " groups");
  const int64_t start = state.num_tokens(), end = start + extra;
  // Count first, so that a refusal changes nothing.
  std::vector<int64_t> wanted(spec_->groups.size(), 0);
  for (size_t g = 0; g < spec_->groups.size(); ++g) {
    const kvcache::BlockSpan need = kvcache::BlocksNeeded(spec_->groups[g], start, end);
    const std::vector<int32_t>& table = state.block_table(g);
    for (int64_t b = need.first; b < need.end; ++b) {
      if (b >= static_cast<int64_t>(table.size()) || table[b] == kvcache::kNoBlock) ++wanted[g];
    }
    if (next_[g] + wanted[g] > capacity_[g])
      return Status::ResourceExhausted("KV pool of group '" + spec_->groups[g].name + "' is used up (" +
                                       std::to_string(capacity_[g]) + " blocks)");
  }
  for (size_t g = 0; g < spec_->groups.size(); ++g) {
    const kvcache::BlockSpan need = kvcache::BlocksNeeded(spec_->groups[g], start, end);
    std::vector<int32_t>& table = state.block_table(g);
    if (static_cast<int64_t>(table.size()) < need.end) table.resize(static_cast<size_t>(need.end), kvcache::kNoBlock);
    for (int64_t b = need.first; b < need.end; ++b) {
      if (table[b] == kvcache::kNoBlock) table[b] = static_cast<int32_t>(next_[g]++);
    }
  }
  return Status::Ok();
}

}  // namespace deepinfer::model
