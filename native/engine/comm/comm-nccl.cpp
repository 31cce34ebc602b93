#include "comm/comm-nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "comm/peer-all-reduce.h"
#include "errors.h"

namespace engine {
namespace {
void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess)
    throw EngineError(ErrorCode::internal, std::string("NCCL: ") + what + " failed: " + ncclGetErrorString(r) +
                                               " (set NCCL_DEBUG=INFO for details)");
}
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// What the peer buffers take per call (the plan's defaults never ask for more): past it sums go through NCCL.
constexpr PeerCapacity kPeerCapacity{size_t{1} << 20, size_t{8} << 20};

std::string kib(size_t bytes) { return std::to_string(bytes >> 10) + " KiB"; }

// The startup log's words for the peer path: which sizes take which algorithm.
std::string peer_summary(const AllReducePolicy& p, const PeerCapacity& cap, int32_t blocks) {
  using Mode = AllReducePolicy::Mode;
  const std::string head = "peer memory (" + std::to_string(blocks) + " blocks), ";
  if (p.mode == Mode::one_shot)
    return head + "one-shot up to " + kib(cap.one_shot_bytes) + " (TRTLLM_ALL_REDUCE=oneshot), NCCL above";
  if (p.mode == Mode::two_shot)
    return head + "two-shot up to " + kib(cap.two_shot_bytes) + " (TRTLLM_ALL_REDUCE=twoshot), NCCL above";
  return head + "one-shot up to " + kib(std::min(p.one_shot_max_bytes, cap.one_shot_bytes)) +
         ", two-shot up to " + kib(std::min(p.two_shot_max_bytes, cap.two_shot_bytes)) + ", NCCL above";
}
}  // namespace

struct DeviceComm::Impl {
  ncclComm_t comm = nullptr;
  std::unique_ptr<PeerAllReduce> peer;
  ~Impl() {
    if (comm == nullptr) return;
    // Destroying a communicator waits for every rank to destroy theirs: a rank unwinding from an error while its
    // peers sit in a collective would wait forever instead of reaching its abort. Abort does not wait.
    if (std::uncaught_exceptions() > 0)
      ncclCommAbort(comm);
    else
      ncclCommDestroy(comm);
  }
};

std::unique_ptr<DeviceComm> DeviceComm::create(const Comm& group, bool peer_all_reduce) {
  ncclUniqueId id{};
  if (group.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  group.broadcast(&id, sizeof(id), 0);
  std::unique_ptr<DeviceComm> dc(new DeviceComm());
  dc->impl_ = std::make_unique<Impl>();
  dc->rank_ = group.rank();
  dc->size_ = group.size();
  check_nccl(ncclCommInitRank(&dc->impl_->comm, group.size(), id, group.rank()), "ncclCommInitRank");
  if (peer_all_reduce && group.size() > 1) {
    const char* env = std::getenv("TRTLLM_ALL_REDUCE");
    const char* blocks = std::getenv("TRTLLM_PEER_BLOCKS");
    dc->policy_ = all_reduce_policy(env != nullptr ? env : "", group.size(), blocks != nullptr ? blocks : "");
    // Every rank reads the same environment (mpirun -x / srun export it to all), so all take the same branch.
    if (dc->policy_.mode == AllReducePolicy::Mode::nccl) {
      dc->peer_status_ = "NCCL only (TRTLLM_ALL_REDUCE=nccl)";
    } else if (dc->policy_.mode == AllReducePolicy::Mode::skip) {  // (no sum takes any path: no buffers)
      dc->peer_status_ = "skipped (TRTLLM_ALL_REDUCE=skip): outputs are wrong";
      if (group.rank() == 0)
        std::fprintf(stderr, "TRTLLM_ALL_REDUCE=skip: tensor-parallel sums are skipped, outputs are wrong (for "
                             "measuring what the all-reduces cost)\n");
    } else {
      std::string why;
      dc->impl_->peer = PeerAllReduce::create(group, kPeerCapacity, dc->policy_.peer_blocks, why);
      dc->peer_status_ = dc->impl_->peer ? peer_summary(dc->policy_, kPeerCapacity, dc->impl_->peer->blocks())
                                         : "NCCL only: " + why;
    }
  }
  return dc;
}

DeviceComm::~DeviceComm() = default;

AllReduceAlgo DeviceComm::all_reduce_algo(const float* data, size_t count) const {
  return choose_all_reduce(policy_, count, reinterpret_cast<uintptr_t>(data),
                           impl_->peer ? impl_->peer->capacity() : PeerCapacity{});
}

void DeviceComm::all_reduce_sum(float* data, size_t count, void* stream) {
  all_reduce_sum_with(all_reduce_algo(data, count), data, count, stream);
}

void DeviceComm::all_reduce_sum_with(AllReduceAlgo algo, float* data, size_t count, void* stream) {
  if (algo == AllReduceAlgo::skip) return;
  if (algo == AllReduceAlgo::nccl) {
    check_nccl(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, impl_->comm, as_stream(stream)),
               "ncclAllReduce");
    return;
  }
  AllReducePolicy forced = policy_;
  forced.mode = algo == AllReduceAlgo::one_shot ? AllReducePolicy::Mode::one_shot : AllReducePolicy::Mode::two_shot;
  if (choose_all_reduce(forced, count, reinterpret_cast<uintptr_t>(data),
                        impl_->peer ? impl_->peer->capacity() : PeerCapacity{}) != algo)
    throw EngineError(ErrorCode::internal, std::string("all-reduce of ") + std::to_string(count) + " floats: no " +
                                               all_reduce_name(algo) + " path (" + peer_status_ + ")");
  impl_->peer->all_reduce_sum(data, count, algo == AllReduceAlgo::two_shot, stream);
}

void DeviceComm::all_gather(const float* send, size_t count, float* recv, void* stream) {
  check_nccl(ncclAllGather(send, recv, count, ncclFloat32, impl_->comm, as_stream(stream)), "ncclAllGather");
}

void DeviceComm::send(const void* data, size_t bytes, int32_t peer, void* stream) {
  check_nccl(ncclSend(data, bytes, ncclUint8, peer, impl_->comm, as_stream(stream)), "ncclSend");
}

void DeviceComm::recv(void* data, size_t bytes, int32_t peer, void* stream) {
  check_nccl(ncclRecv(data, bytes, ncclUint8, peer, impl_->comm, as_stream(stream)), "ncclRecv");
}

void DeviceComm::send_and_recv(const void* send_data, size_t send_bytes, int32_t send_peer, void* recv_data,
                               size_t recv_bytes, int32_t recv_peer, void* stream) {
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  ncclResult_t r = ncclSend(send_data, send_bytes, ncclUint8, send_peer, impl_->comm, as_stream(stream));
  if (r == ncclSuccess && recv_bytes > 0)
    r = ncclRecv(recv_data, recv_bytes, ncclUint8, recv_peer, impl_->comm, as_stream(stream));
  const ncclResult_t end = ncclGroupEnd();  // always closes the group, even after a failed call inside it
  check_nccl(r, "ncclSend / ncclRecv (grouped)");
  check_nccl(end, "ncclGroupEnd");
}

void DeviceComm::connect(const std::vector<int32_t>& peers, void* stream) {
  if (peers.empty()) return;
  void* buf = nullptr;  // [peers] bytes out, then [peers] in
  if (cudaMalloc(&buf, 2 * peers.size()) != cudaSuccess)
    throw EngineError(ErrorCode::internal, "cudaMalloc of the NCCL connection bytes failed");
  char* bytes = static_cast<char*>(buf);
  ncclResult_t r = ncclGroupStart();
  for (size_t i = 0; i < peers.size() && r == ncclSuccess; ++i) {
    r = ncclSend(bytes + i, 1, ncclUint8, peers[i], impl_->comm, as_stream(stream));
    if (r == ncclSuccess)
      r = ncclRecv(bytes + peers.size() + i, 1, ncclUint8, peers[i], impl_->comm, as_stream(stream));
  }
  const ncclResult_t end = ncclGroupEnd();
  const cudaError_t done =
      r == ncclSuccess && end == ncclSuccess ? cudaStreamSynchronize(as_stream(stream)) : cudaSuccess;
  cudaFree(buf);
  check_nccl(r, "ncclSend / ncclRecv (connecting)");
  check_nccl(end, "ncclGroupEnd (connecting)");
  if (done != cudaSuccess)
    throw EngineError(ErrorCode::internal, std::string("NCCL connection exchange: ") + cudaGetErrorString(done));
}

const char* nccl_version() {
  static std::string v = [] {
    int code = 0;
    if (ncclGetVersion(&code) != ncclSuccess) return std::string();
    // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z since 2.9.
    return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
  }();
  return v.c_str();
}

}  // namespace engine
