// mpi.h for the comm unit's own files (comm.cpp, comm-link.cpp) and nobody else: the rest of the engine sees MPI
// only through comm.h and comm-link.h.
#pragma once
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

namespace engine {

// The communicator comm_world() wraps: MPI_COMM_WORLD, or the group joined with comm_join_group.
MPI_Comm comm_world_handle();

}  // namespace engine
