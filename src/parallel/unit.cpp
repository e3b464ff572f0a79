#include "parallel/unit.h"

#include <charconv>
#include <cstdlib>
#include <string>

#include "parallel/mpi_module.h"
#include "parallel/shared_memory_communicator.h"

namespace deepinfer::parallel {

int LauncherRank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    int rank = 0;
    const char* end = value + std::char_traits<char>::length(value);
    const auto [ptr, ec] = std::from_chars(value, end, rank);
    if (ec == std::errc() && ptr == end && rank >= 0) return rank;
  }
  return 0;
}

Result<std::unique_ptr<Unit>> Unit::Start(const UnitOptions& options) {
  auto unit = std::make_unique<Unit>();
  EplbOptions eplb = options.eplb;
  eplb.enabled |= eplb.redundant_experts > 0;
  if (eplb.enabled && !options.expert_parallel)
    return Status::InvalidArgument("--enable-eplb and --num-redundant-experts need --enable-expert-parallel");
  const int launched = LauncherWorldSize();
  const int wanted = options.data_parallel_size > 0 ? options.data_parallel_size : launched;
  if (launched == 1 && wanted == 1) {
    if (options.expert_parallel)
      return Status::InvalidArgument("--enable-expert-parallel needs several ranks: start deepinfer with "
                                     "`mpirun -n N` and --data-parallel-size N");
    return unit;
  }
  if (launched == 1)
    return Status::InvalidArgument("--data-parallel-size " + std::to_string(wanted) + " needs " +
                                   std::to_string(wanted) + " processes: start it as `mpirun -n " +
                                   std::to_string(wanted) + " deepinfer ...` (docs/parallel.md)");
  if (wanted != launched)
    return Status::InvalidArgument("--data-parallel-size " + std::to_string(wanted) + " but the launcher started " +
                                   std::to_string(launched) + " processes (mpirun -n " + std::to_string(wanted) + ")");
  DI_ASSIGN_OR_RETURN(unit->communicator_, OpenMpiCommunicator());
  if (unit->communicator_->size() != launched)
    return Status::FailedPrecondition("MPI reports " + std::to_string(unit->communicator_->size()) +
                                      " processes where the launcher announced " + std::to_string(launched));
  // Ranks that share a host exchange through shared memory (MPI's latency dominates a decode step's small
  // exchanges); ranks on several hosts, or where the segment cannot be made, keep MPI.
  DI_ASSIGN_OR_RETURN(Communicator * collectives,
                      OpenSameHostCommunicator(*unit->communicator_, options.timeouts.startup_s, &unit->same_host_));
  unit->group_ = std::make_unique<ExpertGroup>(*collectives, options.timeouts);
  unit->group_->set_eplb(eplb);
  unit->expert_parallel_ = options.expert_parallel;
  unit->lock_step_ = options.lock_step;
  return unit;
}

}  // namespace deepinfer::parallel
