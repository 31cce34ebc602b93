// What the peer all-reduce kernels are launched with (peer-all-reduce.cu), and the layout of each rank's buffer:
//   flags     [2 barriers][kPeerBlocks][kPeerMaxRanks] u32  written by the peers: the last two-shot epoch each reached
//   epochs    [kPeerBlocks] u32                             this rank's count of two-shot calls, per block
//   one-shot  [kPeerBlocks] u32 epochs, [kPeerBlocks] u32 float4s of the last call (what the next one clears)
//   data      [2 slots][slot_bytes]                          two-shot: each call's rows, alternate calls alternate slots
//   sums      [2 slots][slot_bytes]                          two-shot: this rank's summed slice
//   arrivals  [3 slots][ranks][one_shot_bytes]               one-shot: the rows each rank wrote here, or the sentinel
// A block only ever meets the same block of the other ranks, and every call launches the same grid, so the
// per-block epochs stay equal across ranks without any host bookkeeping (which a replayed graph could not do).
#pragma once
#include <cstddef>
#include <cstdint>

namespace engine {

constexpr int32_t kPeerMaxRanks = 8;
constexpr int32_t kPeerBlocks = 32;
constexpr size_t kPeerHeaderBytes = 4096;
static_assert((2 * kPeerBlocks * kPeerMaxRanks + 3 * kPeerBlocks) * 4 <= kPeerHeaderBytes, "peer header");

struct PeerArgs {
  char* bufs[kPeerMaxRanks] = {};  // every rank's buffer as this process maps it (its own included)
  int32_t rank = 0, ranks = 1;
  size_t slot_bytes = 0;      // two-shot's largest call
  size_t one_shot_bytes = 0;  // one-shot's largest call
};

inline size_t peer_buffer_bytes(const PeerArgs& a) {
  return kPeerHeaderBytes + 4 * a.slot_bytes + 3 * static_cast<size_t>(a.ranks) * a.one_shot_bytes;
}

// Enqueues one all-reduce of `count` floats (count % 4 == 0, 16-byte aligned) on `stream` (a cudaStream_t).
void launch_peer_all_reduce(const PeerArgs& a, float* data, size_t count, bool two_shot, void* stream);
// Readies a freshly allocated buffer (zeroed header, one-shot arrivals all sentinel), synchronously.
void init_peer_buffer(const PeerArgs& a, void* own);

}  // namespace engine
