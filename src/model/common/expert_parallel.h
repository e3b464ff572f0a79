// Expert parallelism as the model sees it: the routed experts of every MoE layer are sharded over the
// processes of a group (member r holds experts [r·E/N, (r+1)·E/N)), and DispatchExperts (moe.h) sends each
// routed (row, expert) pair to the member holding the expert, runs the pairs it receives on its own experts,
// and sends every output back to the row's member, which sums them in increasing expert order exactly as
// one process does. The kernels are batch-invariant, so every row's bits equal a single process's.
//
// The transport is the caller's (src/parallel implements it over MPI); nothing here knows about processes.
#pragma once

#include <charconv>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/status.h"

namespace deepinfer::model {

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
  // The experts (of `experts`) this member's rows were routed to in the routed layer about to exchange:
  // each row's k ids one after another, empty for a member without rows. Called once per routed layer of a
  // forward pass, in layer order: the expert loads a load balancer needs. Nothing by default.
  virtual void NoteRouting(int64_t experts, std::span<const int32_t> expert_ids) { (void)experts, (void)expert_ids; }
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

// Refuses a group whose size does not divide the routed experts.
inline Status CheckExpertSharding(int64_t experts, const ExpertExchange* exchange) {
  if (exchange == nullptr || experts % exchange->size() == 0) return Status::Ok();
  return Status::InvalidArgument("expert parallelism: " + std::to_string(exchange->size()) +
                                 " ranks do not divide the model's " + std::to_string(experts) +
                                 " routed experts evenly (use a rank count that divides it)");
}

}  // namespace deepinfer::model
