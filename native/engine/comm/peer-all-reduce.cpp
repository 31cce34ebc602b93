// Setting up the peer all-reduce: each rank's buffer, its IPC handle and host name broadcast by every rank in turn
// (over the group's own MPI communicator: no other rendezvous), the peers' handles mapped, and a group vote so
// that either every rank takes the peer path or none does.
#include "comm/peer-all-reduce.h"

#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "errors.h"

namespace engine {
namespace {

struct Card {
  char host[128];
  cudaIpcMemHandle_t handle;
  int32_t ok;  // this rank's buffer and handle exist
};

}  // namespace

std::unique_ptr<PeerAllReduce> PeerAllReduce::create(const Comm& group, const PeerCapacity& capacity,
                                                     int32_t blocks, std::string& why_not) {
  const int32_t n = group.size(), me = group.rank();
  if (n < 2 || n > kPeerMaxRanks) {
    why_not = "the group has " + std::to_string(n) + " ranks (the peer all-reduce takes 2 to " +
              std::to_string(kPeerMaxRanks) + ")";
    return nullptr;
  }
  std::unique_ptr<PeerAllReduce> p(new PeerAllReduce());
  p->args_.rank = me;
  p->args_.ranks = n;
  p->args_.two_shot_bytes = capacity.two_shot_bytes;
  p->args_.one_shot_bytes = capacity.one_shot_bytes;
  // Every rank must launch the same grid (the kernels pair block b with block b): rank 0's count for all.
  group.broadcast(&blocks, sizeof(blocks), 0);
  p->args_.blocks = blocks;
  Card mine{};
  std::snprintf(mine.host, sizeof(mine.host), "%s", comm_info().host.c_str());
  std::string local_why;
  // The buffer is ready (flags and epochs at 0, one-shot arrivals empty) before any peer can map it.
  if (cudaMalloc(&p->own_, peer_buffer_bytes(p->args_)) != cudaSuccess ||
      cudaIpcGetMemHandle(&mine.handle, p->own_) != cudaSuccess) {
    local_why = std::string("rank ") + std::to_string(me) + ": " + cudaGetErrorString(cudaGetLastError());
  } else {
    try {
      init_peer_buffer(p->args_, p->own_);
      mine.ok = 1;
    } catch (const EngineError& e) {
      local_why = std::string("rank ") + std::to_string(me) + ": " + e.what();
    }
  }
  std::vector<Card> cards(static_cast<size_t>(n));
  for (int32_t r = 0; r < n; ++r) {
    Card c = mine;
    group.broadcast(&c, sizeof(c), r);
    cards[static_cast<size_t>(r)] = c;
  }
  for (const Card& c : cards)
    if (local_why.empty() && std::strncmp(c.host, mine.host, sizeof(mine.host)) != 0)
      local_why = std::string("the group spans hosts ") + mine.host + " and " + c.host;
  p->args_.bufs[me] = static_cast<char*>(p->own_);
  for (int32_t r = 0; r < n && local_why.empty(); ++r) {
    if (r == me) continue;
    const Card& c = cards[static_cast<size_t>(r)];
    void* mapped = nullptr;
    if (!c.ok) {
      local_why = "rank " + std::to_string(r) + " has no buffer to share";
    } else if (cudaIpcOpenMemHandle(&mapped, c.handle, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
      local_why = "rank " + std::to_string(me) + " cannot map rank " + std::to_string(r) + "'s memory (" +
                  cudaGetErrorString(cudaGetLastError()) + ")";
    } else {
      p->args_.bufs[r] = static_cast<char*>(mapped);
    }
  }
  float refusals = local_why.empty() ? 0.0f : 1.0f;
  group.all_reduce_sum(&refusals, 1);
  if (refusals > 0) {
    why_not = local_why.empty() ? "another rank of the group cannot share GPU memory" : local_why;
    return nullptr;  // (the destructor unmaps what this rank mapped)
  }
  return p;
}

PeerAllReduce::~PeerAllReduce() {
  for (int32_t r = 0; r < args_.ranks; ++r)
    if (r != args_.rank && args_.bufs[r] != nullptr) cudaIpcCloseMemHandle(args_.bufs[r]);
  if (own_ != nullptr) cudaFree(own_);
}

void PeerAllReduce::all_reduce_sum(float* data, size_t count, bool two_shot, void* stream) {
  launch_peer_all_reduce(args_, data, count, two_shot, stream);
}

}  // namespace engine
