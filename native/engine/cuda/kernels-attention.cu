// Paged attention for every query row of an iteration (decode tokens and prefill chunks alike): each row attends
// to positions [0, ctx) of its own sequence, found through its block table. One thread block handles one row, one
// kv head and G of the query heads that read it (GQA: the kv head's keys and values are loaded once for all G).
// Each warp walks its own chunks of 32 positions with its own online softmax (no block-wide barrier per chunk):
// lane j holds key j of the chunk whole (scores against the queries in shared memory), then the values are taken
// with lane = a slice of head_dim, so every load of a chunk is issued before any is waited on. The warps' partial
// results are combined at the end. When too few rows would leave the GPU idle (small-batch decode), each context
// is split into partitions handled by separate blocks and merged by a second kernel (flash-decoding's split-K).
#include <cfloat>
#include <type_traits>

#include "cuda-check.h"
#include "dtype.cuh"
#include "kernels.h"

namespace engine::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 32;     // positions per warp step (one per lane)
constexpr int kMaxParts = 64;  // partitions of one context at most

// N consecutive elements of T as one load (N = 1, 2, 4 or 8; 16-byte aligned rows).
template <int N, typename T>
struct Packed {
  using type = typename std::conditional<N == 8, uint4,
               typename std::conditional<N == 4, uint2, typename std::conditional<N == 2, uint32_t, T>::type>::type>::type;
};
template <int N, typename T>
__device__ __forceinline__ typename Packed<N, T>::type load_packed(const T* p) {
  return *reinterpret_cast<const typename Packed<N, T>::type*>(p);
}
template <int N, typename T>
__device__ __forceinline__ void unpack(const typename Packed<N, T>::type& raw, float (&out)[N]) {
  const T* v = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = to_float(v[i]);
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// grid: (n_rows, n_kv * head groups, partitions); ws_out: [n_rows, n_heads, parts, HD]; ws_ms: [.., 2] (max, sum).
template <typename T, int HD, int G>
__global__ void __launch_bounds__(kThreads, HD >= 256 ? 1 : 3) attention_kernel(AttnArgs a, int part_size, float* ws_out, float* ws_ms) {
  constexpr int DPL = HD >= 32 ? HD / 32 : 1;  // value dims per lane
  // Values in registers at once (of the chunk's 32): fewer where the accumulators already take many registers.
  constexpr int VB = G * HD >= 1024 || HD >= 256 ? 8 : 16;
  __shared__ __align__(16) float qs[G][HD];
  __shared__ float wm[kWarps][G], wl[kWarps][G];
  __shared__ float wacc[kWarps][G][HD];

  const int r = blockIdx.x;
  const int group = a.n_heads / a.n_kv;
  const int per_kv = group / G;
  const int kvh = blockIdx.y / per_kv;
  const int h0 = kvh * group + (blockIdx.y % per_kv) * G;
  const AttnRow row = a.rows[r];
  const int start = blockIdx.z * part_size;
  if (start >= row.ctx) return;  // this row's context ends before the partition (the merge skips it)
  const int end = min(row.ctx, start + part_size);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  for (int i = tid; i < G * HD; i += kThreads) {
    const int g = i / HD, d = i % HD;
    qs[g][d] = a.q[static_cast<int64_t>(row.q_row) * a.q_stride + static_cast<int64_t>(h0 + g) * HD + d] * a.scale;
  }
  __syncthreads();

  const T* k_pool = static_cast<const T*>(a.k_pool);
  const T* v_pool = static_cast<const T*>(a.v_pool);
  const int32_t* table = a.block_tables + row.table;
  const int tpb = a.tokens_per_block;
  const int64_t block_stride = static_cast<int64_t>(a.n_kv) * tpb * HD;
  auto slot = [&](int p) {  // element 0 of position p's key (or value) for this kv head
    return static_cast<int64_t>(table[p / tpb]) * block_stride + (static_cast<int64_t>(kvh) * tpb + p % tpb) * HD;
  };
  const int dim0 = HD >= 32 ? lane * DPL : lane;  // this lane's value dims [dim0, dim0 + DPL)
  const bool dims_here = HD >= 32 || lane < HD;

  float m[G], l[G], acc[G][DPL];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0;
#pragma unroll
    for (int e = 0; e < DPL; ++e) acc[g][e] = 0;
  }

  for (int c0 = start + warp * kChunk; c0 < end; c0 += kWarps * kChunk) {
    const int n = min(kChunk, end - c0);
    const bool valid = lane < n;
    // Lane j finds position c0 + j in the block table once; the value loads below take it by shuffle.
    const int64_t my_slot = valid ? slot(c0 + lane) : 0;
    // Issue the key of this lane and the first values of the chunk, then compute.
    uint4 kr[HD / 8 > 0 ? HD / 8 : 1];
    if (valid) {
      const T* kp = k_pool + my_slot;
#pragma unroll
      for (int i = 0; i < HD / 8; ++i) kr[i] = *reinterpret_cast<const uint4*>(kp + i * 8);
    }
    typename Packed<DPL, T>::type vr[VB];
#pragma unroll
    for (int j = 0; j < VB; ++j) {
      const int64_t sj = __shfl_sync(0xffffffffu, my_slot, j);
      if (j < n && dims_here) vr[j] = load_packed<DPL>(v_pool + sj + dim0);
    }
    float p[G];
#pragma unroll
    for (int g = 0; g < G; ++g) p[g] = 0;
    if (valid) {
#pragma unroll
      for (int i = 0; i < HD / 8; ++i) {
        float kf[8];
        unpack<8, T>(kr[i], kf);
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const float4 qa = *reinterpret_cast<const float4*>(&qs[g][i * 8]);
          const float4 qb = *reinterpret_cast<const float4*>(&qs[g][i * 8 + 4]);
          p[g] += qa.x * kf[0] + qa.y * kf[1] + qa.z * kf[2] + qa.w * kf[3] + qb.x * kf[4] + qb.y * kf[5] +
                  qb.z * kf[6] + qb.w * kf[7];
        }
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float cm = warp_max(valid ? p[g] : -INFINITY);
      const float nm = fmaxf(m[g], cm);
      const float alpha = m[g] == -INFINITY ? 0.0f : expf(m[g] - nm);
      p[g] = valid ? expf(p[g] - nm) : 0.0f;
      l[g] = l[g] * alpha + warp_sum(p[g]);
      m[g] = nm;
#pragma unroll
      for (int e = 0; e < DPL; ++e) acc[g][e] *= alpha;
    }
#pragma unroll
    for (int j0 = 0; j0 < kChunk; j0 += VB) {
      if (j0 > 0) {
#pragma unroll
        for (int j = 0; j < VB; ++j) {
          const int64_t sj = __shfl_sync(0xffffffffu, my_slot, j0 + j);
          if (j0 + j < n && dims_here) vr[j] = load_packed<DPL>(v_pool + sj + dim0);
        }
      }
#pragma unroll
      for (int j = 0; j < VB; ++j) {
        if (j0 + j >= n) break;  // n is the same on every lane: the shuffles below stay converged
        float vf[DPL];
        unpack<DPL, T>(vr[j], vf);
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const float w = __shfl_sync(0xffffffffu, p[g], j0 + j);
#pragma unroll
          for (int e = 0; e < DPL; ++e) acc[g][e] += w * vf[e];
        }
      }
    }
  }

  // Combine the warps: each warp's sums rescaled to the block's max.
  if (lane == 0) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      wm[warp][g] = m[g];
      wl[warp][g] = l[g];
    }
  }
  if (dims_here)
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int e = 0; e < DPL; ++e) wacc[warp][g][dim0 + e] = acc[g][e];
  __syncthreads();
  const bool split = gridDim.z > 1;
  for (int i = tid; i < G * HD; i += kThreads) {
    const int g = i / HD, d = i % HD;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, wm[w][g]);
    float sum = 0, total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      if (wm[w][g] == -INFINITY) continue;  // a warp that had no positions
      const float f = expf(wm[w][g] - mx);
      sum += wacc[w][g][d] * f;
      total += wl[w][g] * f;
    }
    if (!split) {
      static_cast<T*>(a.out)[static_cast<int64_t>(r) * a.out_stride + static_cast<int64_t>(h0 + g) * HD + d] =
          from_float<T>(sum / total);
    } else {
      const int64_t cell = (static_cast<int64_t>(r) * a.n_heads + h0 + g) * gridDim.z + blockIdx.z;
      ws_out[cell * HD + d] = sum;
      if (d == 0) {
        ws_ms[cell * 2] = mx;
        ws_ms[cell * 2 + 1] = total;
      }
    }
  }
}

// grid: (n_rows, n_heads). Merges the partitions a row's context spans.
template <typename T>
__global__ void merge_kernel(AttnArgs a, int part_size, int parts, const float* ws_out, const float* ws_ms) {
  const int r = blockIdx.x, h = blockIdx.y, hd = a.head_dim;
  const int used = (a.rows[r].ctx + part_size - 1) / part_size;
  const int64_t base = (static_cast<int64_t>(r) * a.n_heads + h) * parts;
  float m = -INFINITY;
  for (int p = 0; p < used; ++p) m = fmaxf(m, ws_ms[(base + p) * 2]);
  float total = 0;
  for (int p = 0; p < used; ++p) total += ws_ms[(base + p) * 2 + 1] * expf(ws_ms[(base + p) * 2] - m);
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float s = 0;
    for (int p = 0; p < used; ++p) s += ws_out[(base + p) * hd + d] * expf(ws_ms[(base + p) * 2] - m);
    static_cast<T*>(a.out)[static_cast<int64_t>(r) * a.out_stride + static_cast<int64_t>(h) * hd + d] =
        from_float<T>(s / total);
  }
}

// Query heads per block: the largest power of two dividing the GQA group, at most 8, with G * HD <= 1024 (each
// lane accumulates G * HD / 32 values).
int heads_per_block(int group, int hd) {
  for (int g : {8, 4, 2}) if (group % g == 0 && g * hd <= 1024) return g;
  return 1;
}

struct Split {
  int part_size, parts;
};

Split choose_split(const AttnArgs& a, int num_sms) {
  const int g = heads_per_block(a.n_heads / a.n_kv, a.head_dim);
  const int64_t base = static_cast<int64_t>(a.n_rows) * a.n_kv * ((a.n_heads / a.n_kv) / g);
  const int ctx = a.max_ctx < 1 ? 1 : a.max_ctx;
  if (base >= 2 * static_cast<int64_t>(num_sms) || ctx <= 64) return {ctx, 1};
  // Too few blocks to fill the GPU: split each context so that about two waves of blocks exist.
  int64_t want = (2 * static_cast<int64_t>(num_sms) + base - 1) / base;
  if (want > kMaxParts) want = kMaxParts;
  int64_t part = (ctx + want - 1) / want;
  part = (part + 31) / 32 * 32;
  if (part < 64) part = 64;
  const int parts = static_cast<int>((ctx + part - 1) / part);
  return {static_cast<int>(part), parts};
}

template <typename T, int HD, int G>
void launch(const AttnArgs& a, const Split& sp, float* ws, cudaStream_t s) {
  const int per_kv = (a.n_heads / a.n_kv) / G;
  const dim3 grid(static_cast<unsigned>(a.n_rows), static_cast<unsigned>(a.n_kv * per_kv),
                  static_cast<unsigned>(sp.parts));
  float* ws_out = ws;
  float* ws_ms = ws + static_cast<int64_t>(a.n_rows) * a.n_heads * sp.parts * HD;
  attention_kernel<T, HD, G><<<grid, kThreads, 0, s>>>(a, sp.part_size, ws_out, ws_ms);
  check_launch("attention");
  if (sp.parts > 1) {
    merge_kernel<T><<<dim3(static_cast<unsigned>(a.n_rows), static_cast<unsigned>(a.n_heads)), 128, 0, s>>>(
        a, sp.part_size, sp.parts, ws_out, ws_ms);
    check_launch("attention merge");
  }
}

template <typename T, int HD>
void launch_hd(const AttnArgs& a, const Split& sp, float* ws, cudaStream_t s) {
  switch (heads_per_block(a.n_heads / a.n_kv, HD)) {
    case 8: if constexpr (8 * HD <= 1024) { launch<T, HD, 8>(a, sp, ws, s); return; } break;
    case 4: if constexpr (4 * HD <= 1024) { launch<T, HD, 4>(a, sp, ws, s); return; } break;
    case 2: if constexpr (2 * HD <= 1024) { launch<T, HD, 2>(a, sp, ws, s); return; } break;
    default: launch<T, HD, 1>(a, sp, ws, s); return;
  }
  launch<T, HD, 1>(a, sp, ws, s);
}

}  // namespace

bool attention_supports_head_dim(int32_t hd) { return hd == 16 || hd == 32 || hd == 64 || hd == 128 || hd == 256; }

size_t attention_workspace_floats(const AttnArgs& a, int32_t num_sms) {
  if (a.n_rows == 0) return 0;
  const Split sp = choose_split(a, num_sms);
  if (sp.parts == 1) return 0;
  return static_cast<size_t>(a.n_rows) * a.n_heads * sp.parts * (a.head_dim + 2);
}

size_t attention_workspace_bound(int32_t n_heads, int32_t n_kv, int32_t head_dim, int32_t num_sms) {
  // A split happens only while n_rows * n_heads / G < 2 * num_sms, into at most kMaxParts partitions.
  const int g = heads_per_block(n_heads / n_kv, head_dim);
  const size_t row_heads = static_cast<size_t>(2) * num_sms * g + n_heads;
  return row_heads * kMaxParts * (head_dim + 2);
}

void attention(const AttnArgs& a, float* workspace, int32_t num_sms, cudaStream_t s) {
  if (a.n_rows == 0) return;
  if (!attention_supports_head_dim(a.head_dim))
    throw EngineError(ErrorCode::unsupported, "CUDA attention: head_dim " + std::to_string(a.head_dim) +
                                                  " is not supported (16, 32, 64, 128, 256)");
  const Split sp = choose_split(a, num_sms);
  ENGINE_DISPATCH_DTYPE(a.dt, {
    switch (a.head_dim) {
      case 16: launch_hd<T, 16>(a, sp, workspace, s); break;
      case 32: launch_hd<T, 32>(a, sp, workspace, s); break;
      case 64: launch_hd<T, 64>(a, sp, workspace, s); break;
      case 128: launch_hd<T, 128>(a, sp, workspace, s); break;
      default: launch_hd<T, 256>(a, sp, workspace, s); break;
    }
  });
}

}  // namespace engine::cuda
