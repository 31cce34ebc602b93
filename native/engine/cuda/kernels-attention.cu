// Paged attention for every query row of an iteration (decode tokens and prefill chunks alike): each row attends
// to positions [0, ctx) of its own sequence, found through its block table. One thread block handles one row, one
// kv head and G of the query heads that read it (GQA: the kv head's keys and values are loaded once for all G).
// Keys are taken by groups of 8 lanes (each lane holds head_dim / 8 elements); positions go in tiles (scores in
// shared memory, online softmax across tiles). When too few rows would leave the GPU idle (small-batch decode),
// each context is split into partitions handled by separate blocks and merged by a second kernel (flash-decoding's
// split-K).
#include <cfloat>

#include "cuda-check.h"
#include "dtype.cuh"
#include "kernels.h"

namespace engine::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kLanesPerKey = 8;
constexpr int kKeyGroups = kThreads / kLanesPerKey;  // keys in flight per block
constexpr int kTile = 256;                            // positions per tile (scores in shared memory)
constexpr int kMaxParts = 64;                         // partitions of one context at most

template <int E, typename T>
__device__ __forceinline__ void load_elems(const T* p, float (&out)[E]) {
  if constexpr (E % 8 == 0) {
#pragma unroll
    for (int i = 0; i < E; i += 8) {
      const uint4 raw = *reinterpret_cast<const uint4*>(p + i);
      const T* v = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int j = 0; j < 8; ++j) out[i + j] = to_float(v[j]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < E; i += 2) {
      const uint32_t raw = *reinterpret_cast<const uint32_t*>(p + i);
      const T* v = reinterpret_cast<const T*>(&raw);
      out[i] = to_float(v[0]);
      out[i + 1] = to_float(v[1]);
    }
  }
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// grid: (n_rows, n_kv * head groups, partitions). A block walks its positions in tiles of kTile (scores of one tile
// in shared memory) with a running max / sum / output (online softmax), so any context length fits; partitions
// exist only to give a GPU with few rows enough blocks. ws_out: [n_rows, n_heads, parts, HD]; ws_ms: [.., 2].
template <typename T, int HD, int G>
__global__ void __launch_bounds__(kThreads) attention_kernel(AttnArgs a, int part_size, float* ws_out, float* ws_ms) {
  constexpr int E = HD / kLanesPerKey;
  __shared__ float scores[G][kTile];
  __shared__ float red[kThreads / 32][G];
  __shared__ float tile_max[G], tile_sum[G];
  __shared__ float shared_max[G];  // the running max, for the threads that combine (a register array can't be
                                   // indexed by thread id without going to local memory)
  __shared__ float wacc[kThreads / 32][G * HD];

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
  const int sub = lane & (kLanesPerKey - 1), key_group = tid / kLanesPerKey;

  float q[G][E];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const float* qh = a.q + static_cast<int64_t>(row.q_row) * a.q_stride + static_cast<int64_t>(h0 + g) * HD + sub * E;
#pragma unroll
    for (int e = 0; e < E; ++e) q[g][e] = qh[e] * a.scale;
  }
  const T* k_pool = static_cast<const T*>(a.k_pool);
  const T* v_pool = static_cast<const T*>(a.v_pool);
  const int32_t* table = a.block_tables + row.table;
  const int tpb = a.tokens_per_block;
  const int64_t block_stride = static_cast<int64_t>(a.n_kv) * tpb * HD;
  auto slot = [&](int p) {
    return static_cast<int64_t>(table[p / tpb]) * block_stride + (static_cast<int64_t>(kvh) * tpb + p % tpb) * HD + sub * E;
  };

  float run_max[G], run_sum[G], acc[G][E];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    run_max[g] = -INFINITY;
    run_sum[g] = 0;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[g][e] = 0;
  }

  if (tid < G) shared_max[tid] = -INFINITY;  // read back by the same thread only
  for (int t0 = start; t0 < end; t0 += kTile) {
    const int n = min(end - t0, kTile);
    // 1. Scores of the tile.
    float mx[G];
#pragma unroll
    for (int g = 0; g < G; ++g) mx[g] = -INFINITY;
    // The same trip count for every lane of a warp: the shuffles below need all 32 lanes present.
    for (int j0 = 0; j0 < n; j0 += kKeyGroups) {
      const int j = j0 + key_group;
      const bool valid = j < n;
      float k[E];
      if (valid) {
        load_elems<E>(k_pool + slot(t0 + j), k);
      } else {
#pragma unroll
        for (int e = 0; e < E; ++e) k[e] = 0;
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float dot = 0;
#pragma unroll
        for (int e = 0; e < E; ++e) dot += q[g][e] * k[e];
#pragma unroll
        for (int o = kLanesPerKey / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        if (valid) {
          if (sub == 0) scores[g][j] = dot;
          mx[g] = fmaxf(mx[g], dot);
        }
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float m = warp_max(mx[g]);
      if (lane == 0) red[warp][g] = m;
    }
    __syncthreads();
    if (tid < G) {
      float m = red[0][tid];
      for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, red[w][tid]);
      tile_max[tid] = fmaxf(m, shared_max[tid]);  // the new running max
      shared_max[tid] = tile_max[tid];
    }
    __syncthreads();

    // 2. Numerators against the new running max, and the tile's sum.
    float sm[G];
#pragma unroll
    for (int g = 0; g < G; ++g) sm[g] = 0;
    for (int j = tid; j < n; j += kThreads) {
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float e = expf(scores[g][j] - tile_max[g]);
        scores[g][j] = e;
        sm[g] += e;
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float s = warp_sum(sm[g]);
      if (lane == 0) red[warp][g] = s;
    }
    __syncthreads();
    if (tid < G) {
      float s = 0;
      for (int w = 0; w < kThreads / 32; ++w) s += red[w][tid];
      tile_sum[tid] = s;
    }
    __syncthreads();

    // 3. Rescale what was accumulated so far, then add this tile's weighted values.
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float m_new = tile_max[g];
      const float alpha = run_max[g] == -INFINITY ? 0.0f : expf(run_max[g] - m_new);
      run_sum[g] = run_sum[g] * alpha + tile_sum[g];
      run_max[g] = m_new;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[g][e] *= alpha;
    }
    for (int j = key_group; j < n; j += kKeyGroups) {
      float v[E];
      load_elems<E>(v_pool + slot(t0 + j), v);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float w = scores[g][j];
#pragma unroll
        for (int e = 0; e < E; ++e) acc[g][e] += w * v[e];
      }
    }
    __syncthreads();  // the next tile overwrites scores, red and tile_*
  }

  // The 4 key groups of a warp hold the same elements (lanes sub, sub + 8, ...): fold them onto lanes 0..7.
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int e = 0; e < E; ++e) {
      acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], 8);
      acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], 16);
    }
  if (lane < kLanesPerKey)
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int e = 0; e < E; ++e) wacc[warp][g * HD + lane * E + e] = acc[g][e];
  __syncthreads();
  const bool split = gridDim.z > 1;
  for (int i = tid; i < G * HD; i += kThreads) {
    float s = 0;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) s += wacc[w][i];
    const int g = i / HD, d = i % HD;
    if (!split) {
      static_cast<T*>(a.out)[static_cast<int64_t>(r) * a.out_stride + static_cast<int64_t>(h0 + g) * HD + d] =
          from_float<T>(s / run_sum[g]);
    } else {
      const int64_t cell = (static_cast<int64_t>(r) * a.n_heads + h0 + g) * gridDim.z + blockIdx.z;
      ws_out[cell * HD + d] = s;
      if (d == 0) {
        ws_ms[cell * 2] = run_max[g];
        ws_ms[cell * 2 + 1] = run_sum[g];
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

// Query heads per block: the largest power of two dividing the GQA group with G * HD <= 512 (registers).
int heads_per_block(int group, int hd) {
  for (int g : {8, 4, 2}) if (group % g == 0 && g * hd <= 512) return g;
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
    case 8: if constexpr (8 * HD <= 512) { launch<T, HD, 8>(a, sp, ws, s); return; } break;
    case 4: if constexpr (4 * HD <= 512) { launch<T, HD, 4>(a, sp, ws, s); return; } break;
    case 2: if constexpr (2 * HD <= 512) { launch<T, HD, 2>(a, sp, ws, s); return; } break;
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
