// A command's place in a parallel unit (`mpirun -n N deepinfer generate|serve ... --data-parallel-size N
// [--enable-expert-parallel]`): which rank this process is, and, with expert parallelism, the group the
// model and the engine step through. A command that is not started by mpirun and asks for one process is a
// unit of one and never loads MPI.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "parallel/communicator.h"
#include "parallel/expert_group.h"

namespace deepinfer::parallel {

struct UnitOptions {
  int data_parallel_size = 0;   // 0: as many as the launcher started (1 without one)
  bool expert_parallel = false;  // shard the routed experts over the ranks (else each rank holds them all)
  // The ranks step together even without expert parallelism (a serving unit: its requests and updates
  // ride on the step agreement).
  bool lock_step = false;
  GroupTimeouts timeouts;
  // The expert load balancer (with expert parallelism only); redundant experts turn it on.
  EplbOptions eplb;
};

class Unit {
 public:
  // Joins the unit the launcher started (loading MPI), or makes a unit of one.
  static Result<std::unique_ptr<Unit>> Start(const UnitOptions& options);

  int rank() const { return communicator_ ? communicator_->rank() : 0; }
  int size() const { return communicator_ ? communicator_->size() : 1; }
  // Whether this rank prints what a single process prints (rank 0).
  bool leader() const { return rank() == 0; }
  // With expert parallelism: what LoadOptions::expert_exchange takes, and with it or lock_step what
  // EngineOptions::step_group takes (else null).
  model::ExpertExchange* expert_exchange() { return expert_parallel_ ? group_.get() : nullptr; }
  engine::StepGroup* step_group() { return expert_parallel_ || lock_step_ ? group_.get() : nullptr; }
  // The group's collectives (null in a unit of one).
  ExpertGroup* group() { return group_.get(); }
  // Whether job `index` of a command's list runs on this rank (round robin).
  bool Owns(size_t index) const { return static_cast<int>(index % static_cast<size_t>(size())) == rank(); }

 private:
  std::unique_ptr<Communicator> communicator_;  // MPI: set-up, and ending the unit
  std::unique_ptr<Communicator> same_host_;     // shared memory when every rank runs on this host
  std::unique_ptr<ExpertGroup> group_;
  bool expert_parallel_ = false;
  bool lock_step_ = false;
};

// The launcher's rank of this process before MPI is loaded (0 when not started by one): so that only rank 0
// reports an error every rank meets.
int LauncherRank();

}  // namespace deepinfer::parallel
