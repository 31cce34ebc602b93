// The peer all-reduce kernels (layout and launch in peer-all-reduce-args.h). Both push, and neither has a barrier:
// every value crosses NVLink as a store into the buffer of the rank that needs it, and the receiver polls each float4
// until no lane holds the sentinel (-0.0, which senders turn into +0.0) — the data is its own flag, so there is no
// fence and no flag round trip.
//  - one-shot: block b writes the rank's rows of its range into every rank's buffer (its own segment there) and sums
//    what arrives in its own buffer: one trip, (ranks - 1) x size written per rank.
//  - two-shot: the rows are cut into one slice per rank; block b sends its part of each slice to that slice's owner,
//    sums the pieces of its own slice that arrive, and sends the sums to every other rank: two trips,
//    2 (ranks - 1) / ranks x size written per rank.
// Arrivals rotate over three slots; each call clears the previous call's slot of its own buffer, which no peer
// writes again before it is clear: a peer's block needs this rank's rows of the call after this one before it can
// finish that call and start the one that reuses the slot (every block has rows in every call: short calls are
// padded). Sums run in rank order 0, 1, ..., and a two-shot slice is summed by its owner alone, so every rank gets
// the same bits (the residual stream stays identical across the group).
#include <cuda_runtime.h>

#include <string>

#include "comm/peer-all-reduce-args.h"
#include "cuda/pdl.cuh"
#include "errors.h"

namespace engine {
namespace {

constexpr int kThreads = 512;
constexpr uint32_t kSentinel = 0x80000000u;    // -0.0f
constexpr uint32_t kTwoShotCall = 0x80000000u;  // in a block's `last` word: the call was a two-shot

__device__ __forceinline__ uint32_t* epoch_at(char* buf, int block) { return reinterpret_cast<uint32_t*>(buf) + block; }

__device__ __forceinline__ uint32_t* last_at(char* buf, int block) {
  return reinterpret_cast<uint32_t*>(buf) + kPeerMaxBlocks + block;
}

// Segment `from` of one-shot slot `slot` in `buf`: where rank `from` writes its rows.
__device__ __forceinline__ float4* one_shot_at(const PeerArgs& a, char* buf, int slot, int from) {
  const size_t seg = static_cast<size_t>(slot) * static_cast<size_t>(a.ranks) + static_cast<size_t>(from);
  return reinterpret_cast<float4*>(buf + kPeerHeaderBytes + seg * peer_one_shot_area(a));
}

__device__ __forceinline__ char* two_shot_base(const PeerArgs& a, char* buf) {
  return buf + kPeerHeaderBytes + 3 * static_cast<size_t>(a.ranks) * peer_one_shot_area(a);
}
// Two-shot slot `slot`: [sender][slice] pieces of this rank's slice (scatter), [owner][slice] sums (gather).
__device__ __forceinline__ float4* scatter_at(const PeerArgs& a, char* buf, int slot) {
  return reinterpret_cast<float4*>(two_shot_base(a, buf) + static_cast<size_t>(slot) * peer_two_shot_area(a));
}
__device__ __forceinline__ float4* gather_at(const PeerArgs& a, char* buf, int slot) {
  return reinterpret_cast<float4*>(two_shot_base(a, buf) + static_cast<size_t>(3 + slot) * peer_two_shot_area(a));
}

__device__ __forceinline__ float canonical(float v) { return __float_as_uint(v) == kSentinel ? 0.0f : v; }
__device__ __forceinline__ float4 canonical4(const float4 v) {
  return make_float4(canonical(v.x), canonical(v.y), canonical(v.z), canonical(v.w));
}

__device__ __forceinline__ bool arrived(const float4& v) {
  return __float_as_uint(v.x) != kSentinel && __float_as_uint(v.y) != kSentinel &&
         __float_as_uint(v.z) != kSentinel && __float_as_uint(v.w) != kSentinel;
}

__device__ __forceinline__ float4 load_volatile(const float4* p) {
  float4 v;
  asm volatile("ld.volatile.global.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

// Waits for the float4 a peer stores at `p` (this rank's own memory; volatile: an L1 line would be stale).
__device__ __forceinline__ float4 await(const float4* p) {
  float4 v = load_volatile(p);
  while (!arrived(v)) v = load_volatile(p);
  return v;
}

__device__ __forceinline__ void add4(float4& s, const float4 v) {
  s.x += v.x;
  s.y += v.y;
  s.z += v.z;
  s.w += v.w;
}

// Block b's share of `n` items, split as evenly as the grid allows (n >= the grid: every block gets one at least).
__device__ __forceinline__ void share(size_t n, size_t& begin, size_t& end) {
  begin = n * blockIdx.x / gridDim.x;
  end = n * (blockIdx.x + 1) / gridDim.x;
}
// A one-shot call's rows, padded to the grid; a two-shot call's slice (rows per rank), likewise.
__device__ __forceinline__ size_t one_shot_rows(size_t n4) { return max(n4, static_cast<size_t>(gridDim.x)); }
__device__ __forceinline__ size_t two_shot_slice(size_t n4, int ranks) {
  return max((n4 + ranks - 1) / ranks, static_cast<size_t>(gridDim.x));
}

// This block's part of the previous call's arrivals (`last`: its float4 count and kind) back to the sentinel.
template <int W>
__device__ void clear_last(const PeerArgs& a, char* own, int slot, uint32_t last) {
  const size_t n4 = last & ~kTwoShotCall;
  if (n4 == 0) return;  // (no call yet)
  const float4 empty = make_float4(-0.0f, -0.0f, -0.0f, -0.0f);
  size_t b, e;
  if ((last & kTwoShotCall) == 0) {
    share(one_shot_rows(n4), b, e);
    for (size_t i = b + threadIdx.x; i < e; i += kThreads)
#pragma unroll
      for (int p = 0; p < W; ++p) one_shot_at(a, own, slot, p)[i] = empty;
    return;
  }
  const size_t slice = two_shot_slice(n4, W);
  share(slice, b, e);
  float4* pieces = scatter_at(a, own, slot);
  float4* sums = gather_at(a, own, slot);
  for (size_t j = b + threadIdx.x; j < e; j += kThreads)
#pragma unroll
    for (int p = 0; p < W; ++p) {
      pieces[p * slice + j] = empty;
      if (p != a.rank) sums[p * slice + j] = empty;
    }
}

// A call's place in the slot rotation, read by every thread of the block from its header (after the PDL wait: the
// call before may be the kernel just before this one), and written back once the block is done with the call.
struct Call {
  uint32_t epoch, last;  // this call's epoch; the previous call's `last` word (what it left to clear)
  int slot, previous;    // this call's slot and the previous call's
};

__device__ __forceinline__ Call begin_call(char* own) {
  __shared__ uint32_t epoch_s, last_s;
  cuda::pdl_wait();
  if (threadIdx.x == 0) {
    epoch_s = *epoch_at(own, blockIdx.x) + 1;
    last_s = *last_at(own, blockIdx.x);
  }
  __syncthreads();
  return {epoch_s, last_s, static_cast<int>(epoch_s % 3), static_cast<int>((epoch_s + 2) % 3)};
}

__device__ __forceinline__ void end_call(char* own, uint32_t epoch, uint32_t last) {
  __syncthreads();
  if (threadIdx.x == 0) {
    *epoch_at(own, blockIdx.x) = epoch;
    *last_at(own, blockIdx.x) = last;
  }
}

// Both kernels are launched programmatically dependent (cuda/pdl.cuh): their blocks are resident while the product
// before them finishes, and once they have sent their rows the next kernel may be scheduled (the decode GEMV then
// prefetches its weights while this one waits for the peers').
template <int W>
__global__ void __launch_bounds__(kThreads) one_shot_kernel(PeerArgs a, float4* data, size_t n4) {
  char* own = a.bufs[a.rank];
  const Call call = begin_call(own);
  const int slot = call.slot;
  size_t begin, end;
  share(one_shot_rows(n4), begin, end);
  for (size_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float4 v = i < n4 ? canonical4(data[i]) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int p = 0; p < W; ++p) one_shot_at(a, a.bufs[p], slot, a.rank)[i] = v;
  }
  cuda::pdl_trigger();
  clear_last<W>(a, own, call.previous, call.last);
  for (size_t i = begin + threadIdx.x; i < end; i += kThreads) {
    float4 s = await(one_shot_at(a, own, slot, 0) + i);
#pragma unroll
    for (int p = 1; p < W; ++p) add4(s, await(one_shot_at(a, own, slot, p) + i));
    if (i < n4) data[i] = s;
  }
  end_call(own, call.epoch, static_cast<uint32_t>(n4));
}

template <int W>
__global__ void __launch_bounds__(kThreads) two_shot_kernel(PeerArgs a, float4* data, size_t n4) {
  char* own = a.bufs[a.rank];
  const Call call = begin_call(own);
  const int slot = call.slot;
  const size_t slice = two_shot_slice(n4, W);
  size_t begin, end;
  share(slice, begin, end);
  const size_t me = static_cast<size_t>(a.rank);
  // 1. Each slice's rows to its owner (rows past the call: zeros).
  for (size_t j = begin + threadIdx.x; j < end; j += kThreads) {
#pragma unroll
    for (int p = 0; p < W; ++p) {
      const size_t i = p * slice + j;
      const float4 v = i < n4 ? canonical4(data[i]) : make_float4(0.f, 0.f, 0.f, 0.f);
      scatter_at(a, a.bufs[p], slot)[me * slice + j] = v;
    }
  }
  cuda::pdl_trigger();
  clear_last<W>(a, own, call.previous, call.last);
  // 2. This rank's slice summed, in rank order, and sent to every other rank.
  const float4* pieces = scatter_at(a, own, slot);
  for (size_t j = begin + threadIdx.x; j < end; j += kThreads) {
    float4 s = await(pieces + j);
#pragma unroll
    for (int p = 1; p < W; ++p) add4(s, await(pieces + p * slice + j));
    s = canonical4(s);
#pragma unroll
    for (int p = 0; p < W; ++p)
      if (p != a.rank) gather_at(a, a.bufs[p], slot)[me * slice + j] = s;
    if (me * slice + j < n4) data[me * slice + j] = s;
  }
  // 3. The other slices' sums.
  const float4* sums = gather_at(a, own, slot);
#pragma unroll
  for (int p = 0; p < W; ++p) {
    if (p == a.rank) continue;
    for (size_t j = begin + threadIdx.x; j < end; j += kThreads) {
      const float4 s = await(sums + p * slice + j);
      if (p * slice + j < n4) data[p * slice + j] = s;
    }
  }
  end_call(own, call.epoch, static_cast<uint32_t>(n4) | kTwoShotCall);
}

__global__ void fill_sentinel(float4* p, size_t n4) {
  const float4 empty = make_float4(-0.0f, -0.0f, -0.0f, -0.0f);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = empty;
}

template <int W>
void launch_w(const PeerArgs& a, float4* data, size_t n4, bool two_shot, cudaStream_t s) {
  if (two_shot)
    cuda::launch_pdl(two_shot_kernel<W>, dim3(a.blocks), dim3(kThreads), s, a, data, n4);
  else
    cuda::launch_pdl(one_shot_kernel<W>, dim3(a.blocks), dim3(kThreads), s, a, data, n4);
}

}  // namespace

void launch_peer_all_reduce(const PeerArgs& a, float* data, size_t count, bool two_shot, void* stream) {
  auto* d = reinterpret_cast<float4*>(data);
  const size_t n4 = count / 4;
  const auto s = static_cast<cudaStream_t>(stream);
  switch (a.ranks) {
    case 2: launch_w<2>(a, d, n4, two_shot, s); break;
    case 3: launch_w<3>(a, d, n4, two_shot, s); break;
    case 4: launch_w<4>(a, d, n4, two_shot, s); break;
    case 5: launch_w<5>(a, d, n4, two_shot, s); break;
    case 6: launch_w<6>(a, d, n4, two_shot, s); break;
    case 7: launch_w<7>(a, d, n4, two_shot, s); break;
    case 8: launch_w<8>(a, d, n4, two_shot, s); break;
    default:
      throw EngineError(ErrorCode::internal, "peer all-reduce over " + std::to_string(a.ranks) + " ranks (2 to " +
                                                 std::to_string(kPeerMaxRanks) + " supported)");
  }
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw EngineError(ErrorCode::internal, std::string("peer all-reduce launch: ") + cudaGetErrorString(e));
}

void init_peer_buffer(const PeerArgs& a, void* own) {
  auto fail = [](const char* what, cudaError_t e) {
    throw EngineError(ErrorCode::internal, std::string("peer all-reduce buffer: ") + what + ": " + cudaGetErrorString(e));
  };
  char* base = static_cast<char*>(own);
  cudaError_t e = cudaMemset(base, 0, kPeerHeaderBytes);
  if (e != cudaSuccess) fail("cudaMemset", e);
  const size_t areas = peer_buffer_bytes(a) - kPeerHeaderBytes;
  fill_sentinel<<<256, 256>>>(reinterpret_cast<float4*>(base + kPeerHeaderBytes), areas / 16);
  if ((e = cudaGetLastError()) != cudaSuccess) fail("fill", e);
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) fail("synchronize", e);
}

}  // namespace engine
