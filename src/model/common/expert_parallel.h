// Expert parallelism as the model sees it: the routed experts of every MoE layer are sharded over the
// processes of a group (member r holds experts [r·E/N, (r+1)·E/N)), and DispatchExperts (moe.h) sends each
// routed (row, expert) pair to the member holding the expert, runs the pairs it receives on its own experts,
// and sends every output back to the row's member, which sums them in increasing expert order exactly as
// one process does. The kernels are batch-invariant, so every row's bits equal a single process's.
//
// With redundant experts an expert may have copies on several members, and where each expert is computed can
// change between steps (a load balancer's new placement): the exchange says, layer by layer, which member
// computes each routed pair. The split changes no bits: every copy computes the same row the same way.
//
// The transport is the caller's (src/parallel implements it over MPI); nothing here knows about processes.
#pragma once

#include <charconv>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace deepinfer::model {

// The pages of the routed experts' weights in the mapped checkpoint, by routed layer and expert: a member
// given new experts reads theirs in before it computes them (from any thread, while the model runs), and
// gives back the pages of those it no longer computes (read again from the file if ever touched).
class ExpertWeightPages {
 public:
  virtual ~ExpertWeightPages() = default;
  virtual void ReadIn(int64_t layer, int64_t expert) const = 0;
  virtual void GiveBack(int64_t layer, int64_t expert) const = 0;
};

class ExpertExchange {
 public:
  virtual ~ExpertExchange() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // An all-to-all of bytes that every member calls in the same order: send_bytes[p] bytes of `send` (the
  // members' parts in rank order) go to member p, and recv_bytes[p] bytes from member p land in `recv` (in
  // rank order). A member that cannot complete it within its deadline ends the whole group (a forward pass
  // cannot continue without its peers), so it returns only on success.
  virtual void AllToAllV(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                         std::span<const int64_t> recv_bytes) = 0;
  // The same exchange, and where this member would wait for its peers it first runs `*idle_work` (and
  // empties it): work of its own that the exchange does not need, such as the shared expert over its rows. A
  // member that never waits leaves it for the caller. By default the exchange alone.
  virtual void AllToAllVWithIdleWork(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                                     std::span<const int64_t> recv_bytes, std::function<void()>* idle_work) {
    (void)idle_work;
    AllToAllV(send, send_bytes, recv, recv_bytes);
  }
  // The same exchange where only the senders know the sizes: each part travels with its size; once every
  // member's is in, `receive_into(total)` gives room for all the parts in rank order (this member's own
  // included) and recv_bytes[p] says how many bytes came from member p. A part over max_part_bytes ends the
  // group, as a missed deadline does. Where the transport allows it (shared memory), one rendezvous instead
  // of a sizes exchange followed by the parts'.
  virtual void AllToAllVSized(const uint8_t* send, std::span<const int64_t> send_bytes,
                              const std::function<uint8_t*(int64_t)>& receive_into, std::span<int64_t> recv_bytes,
                              int64_t max_part_bytes, std::function<void()>* idle_work) = 0;
  // The experts (of `experts`) this member's rows were routed to in the routed layer about to exchange:
  // each row's k ids one after another, empty for a member without rows. Called once per routed layer of a
  // forward pass, in layer order: the expert loads a load balancer needs. Nothing by default.
  virtual void NoteRouting(int64_t experts, std::span<const int32_t> expert_ids) { (void)experts, (void)expert_ids; }
  // Where the routed layer about to exchange is computed: members[p] computes the pair routed to
  // expert_ids[p], and (*computes)[e] (resized to `experts`) says whether this member computes expert e
  // there. Called once per routed layer of a forward pass, in layer order, right after NoteRouting. By
  // default the static shard (ExpertShard).
  virtual void PlaceRoutedPairs(int64_t experts, std::span<const int32_t> expert_ids, std::span<int32_t> members,
                                std::vector<uint8_t>* computes);
  // Physical expert copies beyond one per expert that the members hold in all (0: none); with them the member
  // count must divide experts + redundant_experts().
  virtual int64_t redundant_experts() const { return 0; }
  // The model's expert weights, so that a new placement can read in and give back pages (null: none).
  virtual void SetExpertWeightPages(std::shared_ptr<const ExpertWeightPages> pages) { (void)pages; }
};

// The routed experts member `rank` of `size` holds: [first, last).
struct ExpertShard {
  int64_t first = 0, last = 0;
  static ExpertShard Of(int64_t experts, int rank, int size) {
    const int64_t per = experts / size;
    return {per * rank, per * (rank + 1)};
  }
};

// Whether a checkpoint tensor belongs to a routed expert outside `shard` (`*.ffn.experts.<e>.*`).
inline bool IsRemoteExpertTensor(std::string_view name, const ExpertShard& shard) {
  constexpr std::string_view kMarker = ".ffn.experts.";
  const size_t at = name.find(kMarker);
  if (at == std::string_view::npos) return false;
  int64_t expert = 0;
  const char* begin = name.data() + at + kMarker.size();
  const auto [end, ec] = std::from_chars(begin, name.data() + name.size(), expert);
  if (ec != std::errc() || end == begin) return false;
  return expert < shard.first || expert >= shard.last;
}

inline void ExpertExchange::PlaceRoutedPairs(int64_t experts, std::span<const int32_t> expert_ids,
                                             std::span<int32_t> members, std::vector<uint8_t>* computes) {
  const int64_t per = experts / size();
  for (size_t p = 0; p < expert_ids.size(); ++p) members[p] = static_cast<int32_t>(expert_ids[p] / per);
  const ExpertShard shard = ExpertShard::Of(experts, rank(), size());
  computes->assign(static_cast<size_t>(experts), 0);
  for (int64_t e = shard.first; e < shard.last; ++e) (*computes)[static_cast<size_t>(e)] = 1;
}

// Refuses a group whose size does not divide the routed experts and, with redundant copies, their sum with
// the experts, or more copies than every expert on every member.
inline Status CheckExpertSharding(int64_t experts, const ExpertExchange* exchange) {
  if (exchange == nullptr) return Status::Ok();
  const int64_t redundant = exchange->redundant_experts();
  if (experts % exchange->size() != 0)  // (the placement before the first rebalance is the static shard)
    return Status::InvalidArgument("expert parallelism: " + std::to_string(exchange->size()) +
                                   " ranks do not divide the model's " + std::to_string(experts) +
                                   " routed experts evenly (use a rank count that divides it)");
  if (redundant == 0) return Status::Ok();
  if (redundant < 0 || redundant > experts * (exchange->size() - 1))
    return Status::InvalidArgument("--num-redundant-experts " + std::to_string(redundant) + ": at most " +
                                   std::to_string(experts * (exchange->size() - 1)) +
                                   " (each expert copied on every rank) for the model's " + std::to_string(experts) +
                                   " routed experts");
  if ((experts + redundant) % exchange->size() != 0)
    return Status::InvalidArgument("--num-redundant-experts " + std::to_string(redundant) + ": the model's " +
                                   std::to_string(experts) + " routed experts plus the redundant copies must be a "
                                   "multiple of the " + std::to_string(exchange->size()) + " ranks");
  return Status::Ok();
}

}  // namespace deepinfer::model
