// The FP8 decode GEMV's memory-access patterns and arithmetic, measured apart from the engine (issue 24): the 128
// projections of a Llama-3-8B batch-M decode step (32 layers x q|k|v, o, gate|up, down; 6.98 GB of e4m3) captured in
// one CUDA graph, each variant's step time and GB/s against a read-only streaming kernel over the same bytes.
// Variants: loads only (the 16-row tile pattern of kernels-fp8-mma.cu, with and without programmatic dependent
// launch, L2 256-byte fetch hints; the SIMT GEMV's row-contiguous pattern), the engine's W8A16 tile kernel, the
// same with the activations pre-packed, e4m3 x e4m3 mma.sync m16n8k32 (W8A8) in the tile pattern, and a
// "diagonal" mapping of row-contiguous loads onto MMAs. Each compute variant is checked against a float64 GEMV.
// Results: bench/RESULTS.md ("The FP8 decode GEMV's access pattern"). Built and run by itself on a GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/fp8-gemv-patterns bench/cuda/fp8-gemv-patterns.cu && /tmp/fp8-gemv-patterns
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                    \
  do {                                                                           \
    cudaError_t e = (x);                                                         \
    if (e != cudaSuccess) {                                                      \
      printf("CUDA %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
template <int L>
__device__ __forceinline__ uint4 ldw(const uint8_t* p) {
  if constexpr (L == 0) return __ldcs(reinterpret_cast<const uint4*>(p));
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ void widen(uint32_t w, uint32_t& even, uint32_t& odd) {
  const uint32_t e = w << 8;
  odd = (w & 0x80008000u) | ((w >> 4) & 0x07f007f0u);
  even = (e & 0x80008000u) | ((e >> 4) & 0x07f007f0u);
}
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// 16 bf16 activations at xp as the bf16 MMA's B registers in the widened weights' k order, scaled by 2^64 (the
// widening leaves the weights x 2^-120; the products then stay normal in fp32).
__device__ __forceinline__ void load_b(const __nv_bfloat16* xp, uint32_t (&b)[8]) {
  const uint4 r0 = __ldg(reinterpret_cast<const uint4*>(xp)), r1 = __ldg(reinterpret_cast<const uint4*>(xp) + 1);
  const __nv_bfloat16* h0 = reinterpret_cast<const __nv_bfloat16*>(&r0);
  const __nv_bfloat16* h1 = reinterpret_cast<const __nv_bfloat16*>(&r1);
  float xf[16];
#pragma unroll
  for (int i = 0; i < 8; ++i) xf[i] = __bfloat162float(h0[i]), xf[8 + i] = __bfloat162float(h1[i]);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    b[2 * j] = pack(xf[4 * j] * 0x1p64f, xf[4 * j + 2] * 0x1p64f);
    b[2 * j + 1] = pack(xf[4 * j + 1] * 0x1p64f, xf[4 * j + 3] * 0x1p64f);
  }
}

// V: 0 W8A16 current (x bf16, converted in the kernel), 1 W8A16 with x pre-packed, 2 W8A8 native e4m3 MMA,
// 3 loads only.
template <int V, int M, int PARTS, int U, int L = 0, bool PDL = false>
__global__ void __launch_bounds__(32 * PARTS)
    gemv(const uint8_t* __restrict__ W, const void* __restrict__ x, const float* __restrict__ ws,
         const float* __restrict__ xs, float* __restrict__ y, int n, int k) {
  __shared__ float part[PARTS][16][8];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
  const int64_t n0 = int64_t(blockIdx.x) * 16;
  const int64_t ra = min(n0 + g, int64_t(n) - 1), rb = min(n0 + g + 8, int64_t(n) - 1);
  const uint8_t* wa = W + ra * k + 16 * tig;
  const uint8_t* wb = W + rb * k + 16 * tig;
  const int steps = k / 64, per = (steps + PARTS - 1) / PARTS;
  const int s_begin = warp * per, s_end = min(steps, s_begin + per);
  if constexpr (PDL) {
    for (int u = 0; u < U; ++u)
      if (s_begin + u < s_end) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(wa + (s_begin + u) * 64));
        asm volatile("prefetch.global.L2 [%0];" ::"l"(wb + (s_begin + u) * 64));
      }
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" :::);
  }
  const bool has_x = g < M;
  float acc[4] = {0, 0, 0, 0};
  uint32_t sink = 0;
  for (int s0 = s_begin; s0 < s_end; s0 += U) {
    uint4 va[U], vb[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const bool ok = s0 + u < s_end;
      va[u] = ok ? ldw<L>(wa + int64_t(s0 + u) * 64) : make_uint4(0, 0, 0, 0);
      vb[u] = ok ? ldw<L>(wb + int64_t(s0 + u) * 64) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int s = s0 + u;
      if (s >= s_end) break;
      if constexpr (V == 3) {
        sink ^= va[u].x ^ va[u].y ^ va[u].z ^ va[u].w ^ vb[u].x ^ vb[u].y ^ vb[u].z ^ vb[u].w;
      } else if constexpr (V == 2) {
        uint4 xv = make_uint4(0, 0, 0, 0);
        if (has_x) xv = __ldg(reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(x) + int64_t(g) * k +
                                                             int64_t(s) * 64 + 16 * tig));
        mma_e4m3(acc, va[u].x, vb[u].x, va[u].y, vb[u].y, xv.x, xv.y);
        mma_e4m3(acc, va[u].z, vb[u].z, va[u].w, vb[u].w, xv.z, xv.w);
      } else {
        uint32_t b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (has_x) {
          if constexpr (V == 1) {
            const uint4* p = reinterpret_cast<const uint4*>(static_cast<const uint32_t*>(x) + int64_t(g) * (k / 2) +
                                                            (int64_t(s) * 64 + 16 * tig) / 2);
            const uint4 p0 = __ldg(p), p1 = __ldg(p + 1);
            b[0] = p0.x, b[1] = p0.y, b[2] = p0.z, b[3] = p0.w, b[4] = p1.x, b[5] = p1.y, b[6] = p1.z, b[7] = p1.w;
          } else {
            load_b(static_cast<const __nv_bfloat16*>(x) + int64_t(g) * k + int64_t(s) * 64 + 16 * tig, b);
          }
        }
        const uint32_t ra4[4] = {va[u].x, va[u].y, va[u].z, va[u].w}, rb4[4] = {vb[u].x, vb[u].y, vb[u].z, vb[u].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t a[4];
          widen(ra4[j], a[0], a[2]);
          widen(rb4[j], a[1], a[3]);
          mma_bf16(acc, a, b[2 * j], b[2 * j + 1]);
        }
      }
    }
  }
  if constexpr (V == 3) acc[0] = float(sink & 1);
  part[warp][g][2 * tig] = acc[0];
  part[warp][g][2 * tig + 1] = acc[1];
  part[warp][g + 8][2 * tig] = acc[2];
  part[warp][g + 8][2 * tig + 1] = acc[3];
  __syncthreads();
  const int t = threadIdx.x;
  if (t >= 16 * M) return;
  const int r = t / M, m = t % M;
  const int64_t row = n0 + r;
  if (row >= n) return;
  float sum = 0;
#pragma unroll
  for (int p = 0; p < PARTS; ++p) sum += part[p][r][m];
  if constexpr (V == 2) sum *= ws[row] * xs[m];
  else if constexpr (V != 3) sum *= 0x1p56f * ws[row];
  y[int64_t(m) * n + row] = sum;
}

// Row-contiguous loads (the SIMT GEMV's pattern): a warp streams R rows, 512 B a row per load, k split in KS parts.
template <int R, int KS, int U, int L, bool PDL>
__global__ void __launch_bounds__(128) rowloads(const uint8_t* __restrict__ W, float* y, int n, int k) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int part = warp % KS;
  const int64_t n0 = (int64_t(blockIdx.x) * (4 / KS) + warp / KS) * R;
  const int span = k / KS;
  const int kb = part * span, ke = kb + span;
  if constexpr (PDL) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" :::);
  }
  if (n0 >= n) return;
  uint32_t s = 0;
  for (int base = kb + lane * 16; base < ke; base += 512 * U) {
    uint4 v[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r)
        v[u][r] = base + u * 512 < ke ? ldw<L>(W + (n0 + r) * int64_t(k) + base + u * 512) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) s ^= v[u][r].x ^ v[u][r].y ^ v[u][r].z ^ v[u][r].w;
  }
  if (s == 0x12345678u) y[0] = 1;
}

// Row-contiguous loads and tensor cores at batch M (the "diagonal" mapping): lane t holds 16 bytes of each of R
// rows at column t*16 (+ u*512). For a row pair (r0, r1), MMA row g is (r0, lane group g's columns), row g + 8 is
// (r1, same columns); B column n is x at lane group n's columns, so only C[g][g] and C[g+8][g] are wanted.
// A8: e4m3 MMA with x pre-quantized (xq, xs); else bf16 MMA with widened weights and x (bf16) x 2^64.
template <int M, int R, int KS, int U, bool A8, bool PDL>
__global__ void __launch_bounds__(128)
    diag(const uint8_t* __restrict__ W, const void* __restrict__ xin, const float* __restrict__ ws,
         const float* __restrict__ xs, float* __restrict__ y, int n, int k) {
  __shared__ float part[4][R][M];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
  const int p = warp % KS;
  const int64_t n0 = (int64_t(blockIdx.x) * (4 / KS) + warp / KS) * R;
  const int span = ((k + KS * 512 - 1) / (KS * 512)) * 512;
  const int kb = p * span, ke = min(k, kb + span);
  const uint8_t* rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = W + min(n0 + r, int64_t(n) - 1) * int64_t(k);
  if constexpr (PDL) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (kb + lane * 16 + u * 512 < ke) asm volatile("prefetch.global.L2 [%0];" ::"l"(rows[r] + kb + lane * 16 + u * 512));
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" :::);
  }
  float c[R / 2][M][4];
#pragma unroll
  for (int q = 0; q < R / 2; ++q)
#pragma unroll
    for (int m = 0; m < M; ++m) c[q][m][0] = c[q][m][1] = c[q][m][2] = c[q][m][3] = 0;
  for (int b0 = kb; b0 < ke; b0 += 512 * U) {  // warp-uniform
    uint4 v[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int kk = b0 + u * 512 + lane * 16;
#pragma unroll
      for (int r = 0; r < R; ++r) v[u][r] = kk < ke ? __ldcs(reinterpret_cast<const uint4*>(rows[r] + kk)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (b0 + u * 512 >= ke) break;  // warp-uniform
      const int kk = b0 + u * 512 + lane * 16;
      const bool ok = kk < ke;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        if constexpr (A8) {
          const uint4 xv = ok ? __ldg(reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(xin) + int64_t(m) * k + kk)) : make_uint4(0, 0, 0, 0);
#pragma unroll
          for (int q = 0; q < R / 2; ++q) {
            mma_e4m3(c[q][m], v[u][2 * q].x, v[u][2 * q + 1].x, v[u][2 * q].y, v[u][2 * q + 1].y, xv.x, xv.y);
            mma_e4m3(c[q][m], v[u][2 * q].z, v[u][2 * q + 1].z, v[u][2 * q].w, v[u][2 * q + 1].w, xv.z, xv.w);
          }
        } else {
          uint32_t b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          if (ok) {
            load_b(static_cast<const __nv_bfloat16*>(xin) + int64_t(m) * k + kk, b);
          }
#pragma unroll
          for (int q = 0; q < R / 2; ++q) {
            const uint32_t w0[4] = {v[u][2 * q].x, v[u][2 * q].y, v[u][2 * q].z, v[u][2 * q].w};
            const uint32_t w1[4] = {v[u][2 * q + 1].x, v[u][2 * q + 1].y, v[u][2 * q + 1].z, v[u][2 * q + 1].w};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              uint32_t a[4];
              widen(w0[j], a[0], a[2]);
              widen(w1[j], a[1], a[3]);
              mma_bf16(c[q][m], a, b[2 * j], b[2 * j + 1]);
            }
          }
        }
      }
    }
  }
  // the diagonal: lane (g, tig) holds C[g][2tig + e] and C[g + 8][2tig + e]
  const bool mine = tig == (g >> 1);
#pragma unroll
  for (int q = 0; q < R / 2; ++q)
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float s0 = mine ? c[q][m][g & 1] : 0.f, s1 = mine ? c[q][m][2 + (g & 1)] : 0.f;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) s0 += __shfl_xor_sync(~0u, s0, o), s1 += __shfl_xor_sync(~0u, s1, o);
      c[q][m][0] = s0, c[q][m][1] = s1;
    }
  if (KS > 1) {
    if (lane == 0)
#pragma unroll
      for (int q = 0; q < R / 2; ++q)
#pragma unroll
        for (int m = 0; m < M; ++m) part[warp][2 * q][m] = c[q][m][0], part[warp][2 * q + 1][m] = c[q][m][1];
    __syncthreads();
    if (p != 0) return;
    if (lane == 0)
#pragma unroll
      for (int q = 0; q < R / 2; ++q)
#pragma unroll
        for (int m = 0; m < M; ++m) {
          float s0 = 0, s1 = 0;
          for (int pp = 0; pp < KS; ++pp) s0 += part[warp + pp][2 * q][m], s1 += part[warp + pp][2 * q + 1][m];
          c[q][m][0] = s0, c[q][m][1] = s1;
        }
  }
  if (lane != 0) return;
#pragma unroll
  for (int q = 0; q < R / 2; ++q)
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t row = n0 + 2 * q + e;
        if (row >= n) continue;
        y[int64_t(m) * n + row] = A8 ? c[q][m][e] * ws[row] * xs[m] : c[q][m][e] * 0x1p56f * ws[row];
      }
}

// Packs bf16 x [M][k] into the B-register order of V 1 (scaled by 2^64).
__global__ void prepack(const __nv_bfloat16* x, uint32_t* out, int M, int k) {
  const int64_t total = int64_t(M) * k / 4;  // groups of 4 columns -> 2 words
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = i * 4;
    float f[4];
    for (int q = 0; q < 4; ++q) f[q] = __bfloat162float(x[base + q]) * 0x1p64f;
    out[i * 2] = pack(f[0], f[2]);
    out[i * 2 + 1] = pack(f[1], f[3]);
  }
}
// Per-token e4m3 quantization of bf16 x (one block per row).
__global__ void quant_x(const __nv_bfloat16* x, uint8_t* q, float* s, int k) {
  const int r = blockIdx.x;
  __shared__ float red[32];
  float mx = 0;
  for (int i = threadIdx.x; i < k; i += blockDim.x) mx = fmaxf(mx, fabsf(__bfloat162float(x[int64_t(r) * k + i])));
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mx;
  __syncthreads();
  if (threadIdx.x < 32) {
    mx = threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : 0;
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, o));
    if (threadIdx.x == 0) red[0] = mx;
  }
  __syncthreads();
  const float sc = red[0] > 0 ? red[0] / 448.f : 1.f;
  if (threadIdx.x == 0) s[r] = sc;
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    __nv_fp8_e4m3 v(__bfloat162float(x[int64_t(r) * k + i]) / sc);
    q[int64_t(r) * k + i] = *reinterpret_cast<uint8_t*>(&v);
  }
}
__global__ void ref_gemv(const uint8_t* W, const __nv_bfloat16* x, const float* ws, float* y, int M, int n, int k) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n) return;
  for (int m = 0; m < M; ++m) {
    double s = 0;
    for (int i = 0; i < k; ++i) {
      __nv_fp8_e4m3 w;
      *reinterpret_cast<uint8_t*>(&w) = W[int64_t(row) * k + i];
      s += double(float(w)) * double(__bfloat162float(x[int64_t(m) * k + i]));
    }
    y[int64_t(m) * n + row] = float(s * ws[row]);
  }
}
__global__ void fill_w(uint8_t* w, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
    z ^= z >> 31;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 29;
    uint8_t b = uint8_t(z);
    if ((b & 0x7f) == 0x7f) b &= 0xfe;  // no NaN
    if ((b & 0x78) == 0x78) b &= 0xf7;  // keep magnitudes moderate
    w[i] = b;
  }
}
__global__ void read_kernel(const uint4* p, int64_t n, uint32_t* out) {
  uint32_t s = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    s ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (s == 0x12345678u) out[0] = s;
}

struct Mat {
  int n, k;
  size_t off;
};

template <typename K, typename... A>
void launch_k(K kernel, dim3 grid, dim3 block, bool pdl, cudaStream_t st, A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = st;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  CK(cudaLaunchKernelEx(&cfg, kernel, args...));
}
template <int V, int M, int PARTS, int U, int L = 0, bool PDL = false>
void launch(const uint8_t* W, const Mat& mt, const void* x, const float* ws, const float* xs, float* y, cudaStream_t st) {
  launch_k(gemv<V, M, PARTS, U, L, PDL>, dim3((mt.n + 15) / 16), dim3(32 * PARTS), PDL, st, W + mt.off, x, ws, xs, y,
           mt.n, mt.k);
}

int main(int argc, char** argv) {
  const int layers = 32;
  std::vector<Mat> mats;
  size_t off = 0;
  const int shapes[4][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};
  for (int l = 0; l < layers; ++l)
    for (auto& s : shapes) {
      mats.push_back({s[0], s[1], off});
      off += size_t(s[0]) * s[1];
    }
  const size_t total = off;
  uint8_t* W;
  CK(cudaMalloc(&W, total));
  fill_w<<<4096, 256>>>(W, total, 1);
  const int kmax = 14336, nmax = 28672;
  __nv_bfloat16* x;
  CK(cudaMalloc(&x, 8 * kmax * 2));
  std::vector<__nv_bfloat16> hx(8 * kmax);
  for (int i = 0; i < 8 * kmax; ++i) hx[i] = __float2bfloat16(float((i * 7919) % 2001 - 1000) / 700.f);
  CK(cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  uint32_t* xp;
  CK(cudaMalloc(&xp, 8 * kmax * 2));
  uint8_t* xq;
  CK(cudaMalloc(&xq, 8 * kmax));
  float *xs, *ws, *y, *yr;
  CK(cudaMalloc(&xs, 64));
  CK(cudaMalloc(&ws, nmax * 4));
  std::vector<float> hws(nmax);
  for (int i = 0; i < nmax; ++i) hws[i] = 0.01f * (1 + i % 7);
  CK(cudaMemcpy(ws, hws.data(), nmax * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&y, 8 * nmax * 4));
  CK(cudaMalloc(&yr, 8 * nmax * 4));
  uint32_t* sink;
  CK(cudaMalloc(&sink, 4));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);

  // copy-read reference
  {
    float best = 1e9;
    for (int it = 0; it < 10; ++it) {
      cudaEventRecord(e0, st);
      read_kernel<<<132 * 16, 512, 0, st>>>(reinterpret_cast<const uint4*>(W), total / 16, sink);
      cudaEventRecord(e1, st);
      CK(cudaEventSynchronize(e1));
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      if (it > 1 && ms < best) best = ms;
    }
    printf("read-only kernel: %.3f ms for %.2f GB = %.0f GB/s\n", best, total / 1e9, total / 1e6 / best);
  }

  auto run_step = [&](auto fn, const char* name, int M) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (auto& mt : mats) fn(mt);
    CK(cudaStreamEndCapture(st, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    float best = 1e9;
    for (int it = 0; it < 12; ++it) {
      cudaEventRecord(e0, st);
      CK(cudaGraphLaunch(exec, st));
      cudaEventRecord(e1, st);
      CK(cudaEventSynchronize(e1));
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      if (it > 1 && ms < best) best = ms;
    }
    printf("%-34s M=%d: step %.3f ms, %.0f GB/s\n", name, M, best, total / 1e6 / best);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  };
  // Correctness of a compute variant against the float64 GEMV, on q|k|v (k 4,096) and down (k 14,336). The
  // reference takes x in bf16: the W8A8 variants' figure is their activations' e4m3 rounding.
  auto check = [&](auto fn, const char* name, int M) {
    for (int mi : {0, 3}) {
      const Mat& mt = mats[mi];
      prepack<<<64, 256>>>(x, xp, M, mt.k);  // x's rows as each variant reads them, at stride k
      quant_x<<<M, 256>>>(x, xq, xs, mt.k);
      ref_gemv<<<(mt.n + 127) / 128, 128>>>(W + mt.off, x, ws, yr, M, mt.n, mt.k);
      fn(mt);
      CK(cudaDeviceSynchronize());
      std::vector<float> a(M * mt.n), b(M * mt.n);
      CK(cudaMemcpy(a.data(), y, a.size() * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(b.data(), yr, b.size() * 4, cudaMemcpyDeviceToHost));
      double num = 0, den = 0;
      for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * double(a[i] - b[i]), den += double(b[i]) * b[i];
      printf("  check %s M=%d n=%d k=%d: rel L2 %.2e\n", name, M, mt.n, mt.k, std::sqrt(num / den));
    }
  };
// The 16-row tile kernel (gemv above): V 0 W8A16 as the engine, 1 W8A16 with x pre-packed, 2 W8A8, 3 loads only.
#define TILE(V, M, P, U, L, PDL, NAME)                                                                 \
  {                                                                                                    \
    auto fn = [&](const Mat& mt) {                                                                     \
      const void* xin = V == 0 ? (const void*)x : V == 1 ? (const void*)xp : (const void*)xq;          \
      launch<V, M, P, U, L, PDL>(W, mt, xin, ws, xs, y, st);                                           \
    };                                                                                                 \
    if (V != 3) check(fn, NAME, M);                                                                    \
    run_step(fn, NAME " P" #P " U" #U " L" #L " pdl" #PDL, M);                                         \
  }
// Row-contiguous loads mapped onto MMAs (diag above); A8: e4m3 x e4m3.
#define DIAG(M, R, KS, U, A8, PDL)                                                                     \
  {                                                                                                    \
    auto fn = [&](const Mat& mt) {                                                                     \
      const int per = (4 / KS) * R;                                                                    \
      launch_k(diag<M, R, KS, U, A8, PDL>, dim3((mt.n + per - 1) / per), dim3(128), PDL, st,           \
               (const uint8_t*)(W + mt.off), A8 ? (const void*)xq : (const void*)x, (const float*)ws,  \
               (const float*)xs, y, mt.n, mt.k);                                                       \
    };                                                                                                 \
    check(fn, A8 ? "diag W8A8" : "diag W8A16", M);                                                     \
    run_step(fn, "diag R" #R " KS" #KS " U" #U " A8 " #A8 " pdl" #PDL, M);                             \
  }
// The SIMT GEMV's row-contiguous loads alone.
#define ROWS(R, KS, U, L, PDL)                                                                         \
  run_step([&](const Mat& mt) {                                                                        \
    const int per = (4 / KS) * R;                                                                      \
    launch_k(rowloads<R, KS, U, L, PDL>, dim3((mt.n + per - 1) / per), dim3(128), PDL, st,             \
             (const uint8_t*)(W + mt.off), y, mt.n, mt.k);                                             \
  }, "rowloads R" #R " KS" #KS " U" #U " L" #L " pdl" #PDL, 1);

  TILE(3, 1, 8, 4, 0, false, "loads only");
  TILE(3, 1, 8, 4, 1, false, "loads only");
  TILE(3, 1, 8, 4, 0, true, "loads only");
  TILE(3, 1, 8, 4, 1, true, "loads only");
  TILE(3, 1, 16, 4, 1, true, "loads only");
  TILE(3, 1, 8, 8, 1, true, "loads only");
  {
    // One matrix of all the bytes: the tile pattern without kernel boundaries.
    Mat giant{int(total / 4096), 4096, 0};
    for (int L : {0, 1}) {
      float best = 1e9;
      for (int it = 0; it < 8; ++it) {
        cudaEventRecord(e0, st);
        if (L == 0) launch<3, 1, 8, 4, 0, false>(W, giant, xq, ws, xs, y, st);
        else launch<3, 1, 8, 4, 1, false>(W, giant, xq, ws, xs, y, st);
        cudaEventRecord(e1, st);
        CK(cudaEventSynchronize(e1));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (it > 1 && ms < best) best = ms;
      }
      printf("one matrix, loads only P8 U4 L%d: %.3f ms, %.0f GB/s\n", L, best, total / 1e6 / best);
    }
  }
  ROWS(4, 2, 4, 0, true);
  ROWS(4, 2, 4, 0, false);
  ROWS(4, 2, 4, 1, true);
  ROWS(2, 2, 4, 1, true);
  ROWS(4, 4, 2, 1, true);
  ROWS(4, 1, 4, 1, true);
  TILE(0, 1, 8, 4, 0, false, "W8A16 (the engine's kernel)");
  TILE(0, 1, 8, 4, 0, true, "W8A16 (the engine's kernel)");
  TILE(1, 1, 8, 4, 0, false, "W8A16, x pre-packed");
  TILE(2, 1, 8, 4, 0, false, "W8A8 e4m3 mma");
  TILE(2, 1, 8, 4, 0, true, "W8A8 e4m3 mma");
  TILE(2, 1, 16, 4, 0, false, "W8A8 e4m3 mma");
  TILE(2, 1, 8, 8, 0, false, "W8A8 e4m3 mma");
  DIAG(1, 4, 2, 4, false, true);
  DIAG(1, 4, 2, 4, false, false);
  DIAG(1, 4, 2, 4, true, true);
  DIAG(1, 4, 4, 4, false, true);
  DIAG(2, 4, 2, 4, true, true);
  DIAG(8, 4, 2, 4, true, true);
  TILE(0, 8, 8, 4, 0, true, "W8A16 (the engine's kernel)");
  TILE(2, 8, 8, 4, 0, true, "W8A8 e4m3 mma");
  return 0;
}
