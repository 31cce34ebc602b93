// The peer all-reduce kernels (layout and launch in peer-all-reduce-args.h). Block b of every rank owns the same
// range of float4s.
//  - one-shot: block b writes the rank's rows of its range into every rank's buffer (its own segment there) and
//    sums what arrives in its own buffer, polling each float4 until no lane holds the sentinel (-0.0, which senders
//    turn into +0.0): the data is its own flag, so the call costs one trip across NVLink and no fence. Arrivals
//    rotate over three slots; each call clears its own buffer's slot of the call before it (which this rank has
//    read), and no peer writes that slot again before it is clear: it would first need this rank's rows of the
//    call after this one.
//  - two-shot: block b copies its range into the rank's buffer, signals block b of each peer (a release store
//    across NVLink after a system fence) and waits for theirs; sums its rank's 1/ranks slice of the range into its
//    buffer's sums, meets the peers again, and reads the other slices' sums from theirs. A call reuses its slot two
//    calls later, when every peer has met this one's first barrier again and so is done with it.
// Sums run in rank order 0, 1, ..., so every rank gets the same bits (the residual stream stays identical across
// the group). Reads of memory that peers write bypass L1 (ld.global.cg / volatile): a cached line would be stale.
#include <cuda_runtime.h>

#include <string>

#include "comm/peer-all-reduce-args.h"
#include "cuda/pdl.cuh"
#include "errors.h"

namespace engine {
namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ uint32_t* flag_at(char* buf, int barrier, int block, int from) {
  return reinterpret_cast<uint32_t*>(buf) + (barrier * kPeerBlocks + block) * kPeerMaxRanks + from;
}

__device__ __forceinline__ uint32_t* epoch_at(char* buf, int block) {
  return reinterpret_cast<uint32_t*>(buf) + 2 * kPeerBlocks * kPeerMaxRanks + block;
}

__device__ __forceinline__ uint32_t* one_shot_epoch_at(char* buf, int block) {
  return reinterpret_cast<uint32_t*>(buf) + 2 * kPeerBlocks * kPeerMaxRanks + kPeerBlocks + block;
}

__device__ __forceinline__ uint32_t* one_shot_last_at(char* buf, int block) {
  return reinterpret_cast<uint32_t*>(buf) + 2 * kPeerBlocks * kPeerMaxRanks + 2 * kPeerBlocks + block;
}

// Segment `from` of one-shot slot `slot` in `buf`: where rank `from` writes its rows.
__device__ __forceinline__ float4* arrivals_at(const PeerArgs& a, char* buf, int slot, int from) {
  const size_t seg = static_cast<size_t>(slot) * static_cast<size_t>(a.ranks) + static_cast<size_t>(from);
  return reinterpret_cast<float4*>(buf + kPeerHeaderBytes + 4 * a.slot_bytes + seg * a.one_shot_bytes);
}

constexpr uint32_t kSentinel = 0x80000000u;  // -0.0f

__device__ __forceinline__ float canonical(float v) { return __float_as_uint(v) == kSentinel ? 0.0f : v; }

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

__device__ __forceinline__ void block_range(size_t n4, size_t& begin, size_t& end) {
  const size_t per = (n4 + kPeerBlocks - 1) / kPeerBlocks;
  begin = min(n4, per * blockIdx.x);
  end = min(n4, begin + per);
}

__device__ __forceinline__ float4* slot_at(char* buf, size_t slot_bytes, int region) {
  return reinterpret_cast<float4*>(buf + kPeerHeaderBytes + static_cast<size_t>(region) * slot_bytes);
}

__device__ __forceinline__ void store_release(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void add4(float4& s, const float4 v) {
  s.x += v.x;
  s.y += v.y;
  s.z += v.z;
  s.w += v.w;
}

// Block b of every rank reaches barrier `barrier` of call `epoch` before any of them goes on.
template <int W>
__device__ void meet(const PeerArgs& a, int barrier, uint32_t epoch) {
  __syncthreads();
  if (threadIdx.x < W) {
    __threadfence_system();
    store_release(flag_at(a.bufs[threadIdx.x], barrier, blockIdx.x, a.rank), epoch);
    const uint32_t* mine = flag_at(a.bufs[a.rank], barrier, blockIdx.x, threadIdx.x);
    // (epochs wrap: compare by difference)
    while (static_cast<int32_t>(load_acquire(mine) - epoch) < 0) {
    }
  }
  __syncthreads();
}

template <int W>
__device__ float4 sum_ranks(const PeerArgs& a, int region, size_t i) {
  float4 s = __ldcg(slot_at(a.bufs[0], a.slot_bytes, region) + i);
#pragma unroll
  for (int p = 1; p < W; ++p) add4(s, __ldcg(slot_at(a.bufs[p], a.slot_bytes, region) + i));
  return s;
}

// Launched programmatically dependent (cuda/pdl.cuh): its blocks are resident while the product before it finishes,
// and once they have sent their rows the next kernel may be scheduled (the decode GEMV then prefetches its weights
// while this one waits for the peers' rows).
template <int W>
__global__ void __launch_bounds__(kThreads) one_shot_kernel(PeerArgs a, float4* data, size_t n4) {
  __shared__ uint32_t epoch_s, last_s;
  char* own = a.bufs[a.rank];
  cuda::pdl_wait();  // (before the header too: the call before may be the kernel just before this one)
  if (threadIdx.x == 0) {
    epoch_s = *one_shot_epoch_at(own, blockIdx.x) + 1;
    last_s = *one_shot_last_at(own, blockIdx.x);
  }
  __syncthreads();
  const uint32_t epoch = epoch_s;
  const int slot = static_cast<int>(epoch % 3), previous = static_cast<int>((epoch + 2) % 3);
  size_t begin, end;
  block_range(n4, begin, end);
  for (size_t i = begin + threadIdx.x; i < end; i += kThreads) {
    float4 v = data[i];
    v = make_float4(canonical(v.x), canonical(v.y), canonical(v.z), canonical(v.w));
#pragma unroll
    for (int p = 0; p < W; ++p) arrivals_at(a, a.bufs[p], slot, a.rank)[i] = v;
  }
  cuda::pdl_trigger();
  // The last call's arrivals back to the sentinel (its rows: this block's range of that call's size).
  size_t lb, le;
  block_range(last_s, lb, le);
  const float4 empty = make_float4(-0.0f, -0.0f, -0.0f, -0.0f);
  for (size_t i = lb + threadIdx.x; i < le; i += kThreads)
#pragma unroll
    for (int p = 0; p < W; ++p) arrivals_at(a, own, previous, p)[i] = empty;
  for (size_t i = begin + threadIdx.x; i < end; i += kThreads) {
    float4 s;
#pragma unroll
    for (int p = 0; p < W; ++p) {
      const float4* at = arrivals_at(a, own, slot, p) + i;
      float4 v = load_volatile(at);
      while (!arrived(v)) v = load_volatile(at);
      if (p == 0)
        s = v;
      else
        add4(s, v);
    }
    data[i] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    *one_shot_epoch_at(own, blockIdx.x) = epoch;
    *one_shot_last_at(own, blockIdx.x) = static_cast<uint32_t>(n4);
  }
}

template <int W>
__global__ void __launch_bounds__(kThreads) two_shot_kernel(PeerArgs a, float4* data, size_t n4) {
  __shared__ uint32_t epoch_s;
  char* own = a.bufs[a.rank];
  if (threadIdx.x == 0) epoch_s = *epoch_at(own, blockIdx.x) + 1;
  __syncthreads();
  const uint32_t epoch = epoch_s;
  const int slot = static_cast<int>(epoch & 1);
  size_t begin, end;
  block_range(n4, begin, end);

  float4* staged = slot_at(own, a.slot_bytes, slot);
  for (size_t i = begin + threadIdx.x; i < end; i += kThreads) staged[i] = data[i];
  meet<W>(a, 0, epoch);
  const size_t part = (end - begin + W - 1) / W;
  const size_t mine = min(end, begin + part * a.rank), mine_end = min(end, mine + part);
  float4* sums = slot_at(own, a.slot_bytes, 2 + slot);
  for (size_t i = mine + threadIdx.x; i < mine_end; i += kThreads) {
    const float4 s = sum_ranks<W>(a, slot, i);
    sums[i] = s;
    data[i] = s;
  }
  meet<W>(a, 1, epoch);
  for (int p = 0; p < W; ++p) {
    if (p == a.rank) continue;
    const size_t from = min(end, begin + part * p), to = min(end, from + part);
    const float4* theirs = slot_at(a.bufs[p], a.slot_bytes, 2 + slot);
    for (size_t i = from + threadIdx.x; i < to; i += kThreads) data[i] = __ldcg(theirs + i);
  }
  if (threadIdx.x == 0) *epoch_at(own, blockIdx.x) = epoch;
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
    two_shot_kernel<W><<<kPeerBlocks, kThreads, 0, s>>>(a, data, n4);
  else
    cuda::launch_pdl(one_shot_kernel<W>, dim3(kPeerBlocks), dim3(kThreads), s, a, data, n4);
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
  cudaError_t e = cudaMemset(base, 0, kPeerHeaderBytes + 4 * a.slot_bytes);
  if (e != cudaSuccess) fail("cudaMemset", e);
  const size_t arrivals = 3 * static_cast<size_t>(a.ranks) * a.one_shot_bytes;
  fill_sentinel<<<256, 256>>>(reinterpret_cast<float4*>(base + kPeerHeaderBytes + 4 * a.slot_bytes), arrivals / 16);
  if ((e = cudaGetLastError()) != cudaSuccess) fail("fill", e);
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) fail("synchronize", e);
}

}  // namespace engine
