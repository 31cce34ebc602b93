// mpi.h for the comm unit's own files (comm, comm-link, comm-wait, liveness, liveness-questions, leader-channel) and
// nobody else: the rest of the engine sees MPI only through comm.h, comm-link.h, liveness.h and leader-channel.h.
#pragma once
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "comm/comm.h"

namespace engine {

// The communicator comm_world() wraps: MPI_COMM_WORLD, or the group joined with comm_join_group.
MPI_Comm comm_world_handle();

// A Comm's MPI communicator (MPI_COMM_NULL for the size-1 group without MPI).
struct CommAccess {
  static MPI_Comm handle(const Comm& c);
};

// Aborts the job naming `what` and MPI's error text unless `rc` is MPI_SUCCESS (errors come back as codes: comm_init
// sets MPI_ERRORS_RETURN).
void comm_check(int rc, const char* what);

}  // namespace engine
