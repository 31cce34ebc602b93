#include "comm/comm-nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <exception>
#include <string>

#include "errors.h"

namespace engine {
namespace {
void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess)
    throw EngineError(ErrorCode::internal, std::string("NCCL: ") + what + " failed: " + ncclGetErrorString(r) +
                                               " (set NCCL_DEBUG=INFO for details)");
}
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
}  // namespace

struct DeviceComm::Impl {
  ncclComm_t comm = nullptr;
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

std::unique_ptr<DeviceComm> DeviceComm::create(const Comm& group) {
  ncclUniqueId id{};
  if (group.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  group.broadcast(&id, sizeof(id), 0);
  std::unique_ptr<DeviceComm> dc(new DeviceComm());
  dc->impl_ = std::make_unique<Impl>();
  dc->rank_ = group.rank();
  dc->size_ = group.size();
  check_nccl(ncclCommInitRank(&dc->impl_->comm, group.size(), id, group.rank()), "ncclCommInitRank");
  return dc;
}

DeviceComm::~DeviceComm() = default;

void DeviceComm::all_reduce_sum(float* data, size_t count, void* stream) {
  check_nccl(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, impl_->comm, as_stream(stream)), "ncclAllReduce");
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
