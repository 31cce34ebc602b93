// Device-memory collectives for the CUDA backend, over NCCL: part of the comm unit (with comm.cpp, the only files
// that include mpi.h / nccl.h). A DeviceComm spans the same ranks as a Comm group (a tp or pp group); its
// ncclUniqueId travels over that group's MPI communicator, so no other rendezvous is needed. Streams are passed as
// void* (a cudaStream_t) to keep CUDA headers out of this header. A tp group's DeviceComm also sets up the peer-memory
// all-reduce (peer-all-reduce.h) when its GPUs share a host, and sends each sum the way all-reduce-plan.h picks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/all-reduce-plan.h"
#include "comm/comm.h"

namespace engine {

class DeviceComm {
 public:
  // Collective over `group`, on the thread that makes the group's MPI calls, with the rank's GPU current.
  // `peer_all_reduce`: also the peer-memory path for all_reduce_sum (a tp group; a pp group only sends).
  static std::unique_ptr<DeviceComm> create(const Comm& group, bool peer_all_reduce = false);
  ~DeviceComm();
  DeviceComm(const DeviceComm&) = delete;
  DeviceComm& operator=(const DeviceComm&) = delete;

  int32_t rank() const { return rank_; }
  int32_t size() const { return size_; }

  // Enqueued on `stream`; they complete in stream order like kernels.
  void all_reduce_sum(float* data, size_t count, void* stream);
  // The same through `algo` (benchmarks); a peer algorithm this group or size cannot take throws.
  void all_reduce_sum_with(AllReduceAlgo algo, float* data, size_t count, void* stream);
  AllReduceAlgo all_reduce_algo(const float* data, size_t count) const;
  // "peer memory (N blocks), one-shot up to ..., two-shot up to ..., NCCL above", or why the group has no peer path (the
  // startup log's words).
  const std::string& peer_status() const { return peer_status_; }
  void all_gather(const float* send, size_t count, float* recv, void* stream);  // recv: [size, count]
  void send(const void* data, size_t bytes, int32_t peer, void* stream);
  void recv(void* data, size_t bytes, int32_t peer, void* stream);
  // A send and a receive in one NCCL group, so they progress together: a peer that sends to this rank before it
  // receives from it cannot deadlock against this rank's send (pipelined pp: the leader hands one micro-batch's
  // activations on while the last stage hands the previous one's logits back). recv_bytes 0: the send alone.
  void send_and_recv(const void* send_data, size_t send_bytes, int32_t send_peer, void* recv_data, size_t recv_bytes,
                     int32_t recv_peer, void* stream);
  // A byte each way with every rank in `peers`, waited for: NCCL sets up a point-to-point connection at its first
  // use, which blocks until the peer joins — done at load, while every rank is here, rather than in the first pass,
  // where the peer may be waiting for something only this rank can give it. Collective over this rank and `peers`.
  void connect(const std::vector<int32_t>& peers, void* stream);

  struct Impl;

 private:
  DeviceComm() = default;
  std::unique_ptr<Impl> impl_;
  int32_t rank_ = 0, size_ = 1;
  AllReducePolicy policy_;
  std::string peer_status_ = "not requested";
};

// "2.27.3", or "" when NCCL is not built in.
const char* nccl_version();

}  // namespace engine
