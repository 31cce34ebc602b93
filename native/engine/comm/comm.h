// The only door to MPI (mpi.h is included by comm.cpp alone). A Comm is a group of ranks — the world, or the
// tensor-parallel / pipeline-parallel group a rank belongs to — with the collectives the executor needs. Without
// MPI (one rank started outside mpirun/srun) every Comm has size 1 and the collectives are local no-ops, so the
// same executor code serves both.
//
// Threading: MPI is initialised with MPI_THREAD_SERIALIZED by the first call to comm_init(). MPI calls are made
// by one thread at a time, in a happens-before chain: the loader thread (model load, KV allocation), then the
// executor's loop thread for every iteration, then the thread that joined it (shutdown). Never concurrently.
// Orchestrator mode (comm-link.h) asks for MPI_THREAD_MULTIPLE instead: a link thread exchanges messages with
// another group while the executor's loop thread runs this group's collectives.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace engine {

struct CommInfo {
  bool mpi = false;          // false: no MPI runtime in use (single rank)
  int32_t world_rank = 0, world_size = 1;
  int32_t local_rank = 0, local_size = 1;  // among the ranks on this host
  std::string host;
  std::string library;       // MPI library version string (empty without MPI)
  int32_t job_rank = 0, job_size = 1;      // in the whole MPI job (differs from world_* after comm_join_group)
  bool spawned = false;      // started by MPI_Comm_spawn (an orchestrator's worker group)
};

class PendingTransfer;

class Comm {
 public:
  Comm();  // a size-1 group (no MPI)
  ~Comm();
  Comm(const Comm&);
  Comm& operator=(const Comm&);

  int32_t rank() const;
  int32_t size() const;

  // Sub-group of the ranks passing the same color, ordered by key (MPI_Comm_split). Collective over this group.
  Comm split(int32_t color, int32_t key) const;

  void broadcast(void* data, size_t bytes, int32_t root) const;
  // Broadcasts a byte buffer whose size only the root knows.
  void broadcast_bytes(std::vector<uint8_t>& data, int32_t root) const;
  void all_reduce_sum(float* data, size_t count) const;                 // in place
  void all_gather(const float* send, size_t count, float* recv) const;  // recv: [size, count]
  void gather(const float* send, size_t count, float* recv, int32_t root) const;  // recv on root: [size, count]
  void send(const void* data, size_t bytes, int32_t dest, int32_t tag) const;
  void recv(void* data, size_t bytes, int32_t source, int32_t tag) const;
  // A receive or send that stays posted while this rank goes on (pipelined pp: the leader accepts one micro-batch's
  // logits before it blocks sending the next one's activations, and the last stage hands logits back without
  // waiting for the leader to be in MPI, so neither stage waits on the other's compute). The buffer must stay
  // untouched until the transfer is done.
  PendingTransfer post_recv(void* data, size_t bytes, int32_t source, int32_t tag) const;
  PendingTransfer post_send(const void* data, size_t bytes, int32_t dest, int32_t tag) const;
  void barrier() const;

  struct Impl;

 private:
  explicit Comm(std::shared_ptr<Impl> impl);
  PendingTransfer post(void* data, size_t bytes, int32_t peer, int32_t tag, bool send) const;
  std::shared_ptr<Impl> impl_;
  friend Comm comm_world();
  friend struct CommAccess;  // the comm unit's own files reach the MPI communicator (comm-mpi.h)
};

// A transfer posted by Comm::post_recv / post_send; wait() returns once it is done (the data in the buffer, or
// the buffer free again). Move-only. Destroyed before that, it cancels the transfer if it can (a failed pass: the
// job is ending) and otherwise lets MPI finish it.
class PendingTransfer {
 public:
  PendingTransfer();
  ~PendingTransfer();
  PendingTransfer(PendingTransfer&&) noexcept;
  PendingTransfer& operator=(PendingTransfer&&) noexcept;
  void wait();
  bool test();            // done now? (never waits)
  bool pending() const;   // posted and not yet seen done

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  friend class Comm;
};

// Initialises MPI once per process when `use_mpi` (idempotent; later calls ignore the arguments); with
// `thread_multiple`, at MPI_THREAD_MULTIPLE. Throws EngineError(unsupported) naming the reason when MPI was
// requested but cannot start.
CommInfo comm_init(bool use_mpi, bool thread_multiple = false);
CommInfo comm_info();
// The ranks this process computes with: MPI_COMM_WORLD, or after comm_join_group the group it joined. A spawned
// group's world is its own job, so it needs no join.
Comm comm_world();
// Orchestrator mode without spawning: every rank of the job calls this once with its group's color (0: the
// orchestrator alone); afterwards comm_world() and comm_info().world_rank/world_size describe the group, while
// job_rank/job_size keep the whole job. Collective over the job.
void comm_join_group(int32_t color);
// Every rank of comm_world(): its host and process id, in rank order. Collective over comm_world(). The orchestrator
// watches these processes, so it can tell a dead group from a busy one without any MPI call.
struct RankIdentity {
  std::string host;
  int64_t pid = 0;
};
std::vector<RankIdentity> comm_world_members();
// True once this process's failure must stay inside its group (orchestrator mode): comm_abort then ends only this
// process, and the orchestrator, which watches every rank, takes the rest of the group down.
bool comm_isolated();
// Ends MPI (once, from the init thread); no-op without MPI.
void comm_finalize();
// Brings the whole job down at once (MPI_Abort), so no rank hangs in a collective after another one failed; in
// orchestrator mode (comm_isolated) only this process exits.
[[noreturn]] void comm_abort(int32_t code, const std::string& reason);

}  // namespace engine
