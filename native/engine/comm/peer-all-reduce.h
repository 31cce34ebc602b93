// The peer-memory all-reduce (part of the comm unit, beside NCCL in comm-nccl.cpp, which picks between them by
// size: all-reduce-plan.h). Every rank of a tp group on one host allocates one buffer, exports it as a CUDA IPC
// handle, and maps every peer's: the kernels (peer-all-reduce.cu) write each rank's rows into its peers' buffers
// (one-shot), or each slice to its owner and the owner's sums back (two-shot). Captured in CUDA graphs like any
// kernel: their epochs live in device memory, not in the launch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/all-reduce-plan.h"
#include "comm/comm.h"
#include "comm/peer-all-reduce-args.h"

namespace engine {

class PeerAllReduce {
 public:
  // Collective over `group` (its MPI calls on this thread, the rank's GPU current); the kernels run `blocks` blocks
  // (rank 0's value is taken by all). Null on every rank when any rank cannot take part — another host, no peer
  // access, IPC refused — with the reason in `why_not`.
  static std::unique_ptr<PeerAllReduce> create(const Comm& group, const PeerCapacity& capacity, int32_t blocks,
                                               std::string& why_not);
  ~PeerAllReduce();
  PeerAllReduce(const PeerAllReduce&) = delete;
  PeerAllReduce& operator=(const PeerAllReduce&) = delete;

  PeerCapacity capacity() const { return {args_.one_shot_bytes, args_.two_shot_bytes}; }
  int32_t blocks() const { return args_.blocks; }
  // In place, enqueued on `stream` (a cudaStream_t); `count` a multiple of 4 floats at a 16-byte aligned address.
  void all_reduce_sum(float* data, size_t count, bool two_shot, void* stream);

 private:
  PeerAllReduce() = default;
  PeerArgs args_{};
  void* own_ = nullptr;  // this rank's buffer (cudaMalloc); the peers' are IPC mappings in args_.bufs
};

}  // namespace engine
