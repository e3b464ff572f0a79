// Loading the MPI module (libdeepinfer_mpi.so) at run time: looked for beside the executable, then by the
// dynamic loader's search path; DEEPINFER_MPI_MODULE names another file. A missing module or a missing
// libmpi is an error naming what was not found, never a crash.
#pragma once

#include <memory>

#include "core/status.h"
#include "parallel/communicator.h"

namespace deepinfer::parallel {

// Whether this process was started by an MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE, MPICH's hydra
// PMI_SIZE), and the member count it announces (1 when not).
int LauncherWorldSize();

// Loads the module and initialises MPI. Call once per process, from the thread that will use it first.
Result<std::unique_ptr<Communicator>> OpenMpiCommunicator();

}  // namespace deepinfer::parallel
