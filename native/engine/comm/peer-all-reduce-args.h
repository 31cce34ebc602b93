// What the peer all-reduce kernels are launched with (peer-all-reduce.cu), and the layout of each rank's buffer:
//   header    [kPeerMaxBlocks] u32 epochs: this rank's count of calls, per block
//             [kPeerMaxBlocks] u32 the last call's float4 count, bit 31 set for a two-shot (what the next one clears)
//   one-shot  [3 slots][ranks][one-shot area]  the rows each rank wrote here, or the sentinel
//   scatter   [3 slots][two-shot area]         two-shot: every rank's piece of this rank's slice, or the sentinel
//   gather    [3 slots][two-shot area]         two-shot: the other ranks' summed slices, or the sentinel
// A block only ever exchanges rows with the same block of the other ranks, every call launches the same grid and
// every block has rows in every call (short calls are padded), so the per-block epochs stay equal across ranks and no
// rank's block gets more than one call ahead of a peer's — without host bookkeeping, which a replayed graph could
// not do.
#pragma once
#include <cstddef>
#include <cstdint>

namespace engine {

constexpr int32_t kPeerMaxRanks = 8;
constexpr int32_t kPeerMaxBlocks = 256;
constexpr size_t kPeerHeaderBytes = 4096;
static_assert(2 * kPeerMaxBlocks * 4 <= kPeerHeaderBytes, "peer header");

#ifdef __CUDACC__
#define PEER_HD __host__ __device__
#else
#define PEER_HD
#endif

struct PeerArgs {
  char* bufs[kPeerMaxRanks] = {};  // every rank's buffer as this process maps it (its own included)
  int32_t rank = 0, ranks = 1;
  int32_t blocks = 32;        // the kernels' grid: the same on every rank (rank 0's choice)
  size_t one_shot_bytes = 0;  // one-shot's largest call
  size_t two_shot_bytes = 0;  // two-shot's largest call
};

// Padding: a call shorter than the grid gives each block one row of zeros (one-shot: `blocks` float4s at least;
// two-shot: slices of `blocks` float4s at least), so every block meets its peers in every call.
PEER_HD inline size_t peer_one_shot_area(const PeerArgs& a) {
  return a.one_shot_bytes + static_cast<size_t>(kPeerMaxBlocks) * 16;
}
PEER_HD inline size_t peer_two_shot_area(const PeerArgs& a) {
  return a.two_shot_bytes + static_cast<size_t>(a.ranks) * (kPeerMaxBlocks + 1) * 16;
}
PEER_HD inline size_t peer_buffer_bytes(const PeerArgs& a) {
  return kPeerHeaderBytes + 3 * (static_cast<size_t>(a.ranks) * peer_one_shot_area(a) + 2 * peer_two_shot_area(a));
}

// Enqueues one all-reduce of `count` floats (count % 4 == 0, 16-byte aligned) on `stream` (a cudaStream_t).
void launch_peer_all_reduce(const PeerArgs& a, float* data, size_t count, bool two_shot, void* stream);
// Readies a freshly allocated buffer (zeroed header, every area the sentinel), synchronously.
void init_peer_buffer(const PeerArgs& a, void* own);

}  // namespace engine
