// The only door to MPI (mpi.h is included by comm.cpp alone). A Comm is a group of ranks — the world, or the
// tensor-parallel / pipeline-parallel group a rank belongs to — with the collectives the executor needs. Without
// MPI (one rank started outside mpirun/srun) every Comm has size 1 and the collectives are local no-ops, so the
// same executor code serves both.
//
// Threading: MPI is initialised with MPI_THREAD_SERIALIZED by the first call to comm_init(). MPI calls are made
// by one thread at a time, in a happens-before chain: the loader thread (model load, KV allocation), then the
// executor's loop thread for every iteration, then the thread that joined it (shutdown). Never concurrently.
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
};

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
  void barrier() const;

  struct Impl;

 private:
  explicit Comm(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
  friend Comm comm_world();
};

// Initialises MPI once per process when `use_mpi` (idempotent; later calls ignore the argument). Throws
// EngineError(unsupported) naming the reason when MPI was requested but cannot start.
CommInfo comm_init(bool use_mpi);
CommInfo comm_info();
Comm comm_world();
// Ends MPI (once, from the init thread); no-op without MPI.
void comm_finalize();
// Brings the whole job down at once (MPI_Abort), so no rank hangs in a collective after another one failed.
[[noreturn]] void comm_abort(int32_t code, const std::string& reason);

}  // namespace engine
