// The stacked LoRA products' two small kernels (lora-kernels.h: lora_stack, lora_stack_mask). A prompt chunk's
// deltas are products of thousands of rows over a few adapters, which cuBLAS runs near the tensor cores' and the
// memory's limits once the step's adapters stand side by side in one matrix: these kernels build that matrix for
// one projection and zero each row's columns of the slots it does not run. Everything moves in 8-element (16-byte)
// pieces: ranks, segment offsets and input widths are multiples of 8 (kLoraRankAlign; in % 8 == 0).
#include <string>

#include "cuda/cuda-check.h"
#include "cuda/dtype.cuh"
#include "cuda/lora-kernels.h"

namespace engine::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kVec = 8;  // elements of a 16-bit dtype in one 16-byte piece

// Pieces [0, a_pieces) are A_st's: row j = block * rb + r (the block-th slot's A row r, zeros past its rank), `in`
// columns. The rest are B_st's: row o (an output column), stacked column c = block * rb + r (the slot's t column r:
// the segment covering o and r gives B_seg[o - out_offset, r - t_offset], any other slot's column is zero).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    lora_stack_kernel(const LoraTargetDesc* __restrict__ table, int64_t slot_stride, const int32_t* __restrict__ slots,
                      int32_t n_slots, int32_t rb, int64_t in, int64_t out, T* __restrict__ a_st,
                      T* __restrict__ b_st) {
  const int64_t width = static_cast<int64_t>(n_slots) * rb;
  const int64_t a_pieces = width * (in / kVec), b_pieces = out * (width / kVec);
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; e < a_pieces + b_pieces;
       e += static_cast<int64_t>(gridDim.x) * kThreads) {
    uint4 v = make_uint4(0, 0, 0, 0);
    if (e < a_pieces) {
      const int64_t j = e / (in / kVec), c = (e - j * (in / kVec)) * kVec;
      const int32_t block = static_cast<int32_t>(j / rb);
      const int32_t r = static_cast<int32_t>(j - static_cast<int64_t>(block) * rb);
      const LoraTargetDesc& d = table[slots[block] * slot_stride];
      if (r < d.rank) v = __ldg(reinterpret_cast<const uint4*>(static_cast<const T*>(d.a) + r * in + c));
      *reinterpret_cast<uint4*>(a_st + j * in + c) = v;
      continue;
    }
    const int64_t f = e - a_pieces;
    const int64_t o = f / (width / kVec), c = (f - o * (width / kVec)) * kVec;
    const int32_t block = static_cast<int32_t>(c / rb), r = static_cast<int32_t>(c - static_cast<int64_t>(block) * rb);
    const LoraTargetDesc& d = table[slots[block] * slot_stride];
    for (int32_t si = 0; si < d.n_seg; ++si) {
      const LoraSegDesc& sg = d.seg[si];
      if (o < sg.out_offset || o >= sg.out_offset + sg.out || r < sg.t_offset || r >= sg.t_offset + sg.rank) continue;
      const T* b = static_cast<const T*>(sg.b) + (o - sg.out_offset) * sg.rank + (r - sg.t_offset);
      v = __ldg(reinterpret_cast<const uint4*>(b));
      break;
    }
    *reinterpret_cast<uint4*>(b_st + o * width + c) = v;
  }
}

// out[i, c] = t[i, c] rounded where column c lies in row i's block (block[i] * rb .. + rb), else 0.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    lora_stack_mask_kernel(const float* __restrict__ t, const int32_t* __restrict__ block, int64_t n, int32_t width,
                           int32_t rb, T* __restrict__ out) {
  const int64_t pieces = n * (width / kVec);
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; e < pieces;
       e += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t i = e / (width / kVec);
    const int32_t c = static_cast<int32_t>(e - i * (width / kVec)) * kVec;
    const int32_t b = block[i];
    alignas(16) T v[kVec];
    if (b >= 0 && c >= b * rb && c < (b + 1) * rb) {
      const float4 lo = *reinterpret_cast<const float4*>(t + i * width + c);
      const float4 hi = *reinterpret_cast<const float4*>(t + i * width + c + 4);
      v[0] = from_float<T>(lo.x), v[1] = from_float<T>(lo.y), v[2] = from_float<T>(lo.z), v[3] = from_float<T>(lo.w);
      v[4] = from_float<T>(hi.x), v[5] = from_float<T>(hi.y), v[6] = from_float<T>(hi.z), v[7] = from_float<T>(hi.w);
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = from_float<T>(0.0f);
    }
    *reinterpret_cast<uint4*>(out + i * width + c) = *reinterpret_cast<const uint4*>(v);
  }
}

unsigned grid_for(int64_t pieces) {
  const int64_t blocks = (pieces + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

}  // namespace

void lora_stack(const LoraTargetDesc* table, int64_t slot_stride, const int32_t* slots, int32_t n_slots, int32_t rb,
                int64_t in, int64_t out, void* a_st, void* b_st, DType dt, cudaStream_t s) {
  if (n_slots == 0 || rb == 0) return;
  if (rb % kVec != 0 || in % kVec != 0)
    throw EngineError(ErrorCode::internal, "lora_stack: rank bound " + std::to_string(rb) + " and input width " +
                                               std::to_string(in) + " must be multiples of 8");
  const int64_t width = static_cast<int64_t>(n_slots) * rb;
  const unsigned grid = grid_for(width * (in / kVec) + out * (width / kVec));
  ENGINE_DISPATCH_DTYPE(dt, (lora_stack_kernel<T><<<grid, kThreads, 0, s>>>(table, slot_stride, slots, n_slots, rb, in,
                                                                          out, static_cast<T*>(a_st),
                                                                          static_cast<T*>(b_st))));
  check_launch("lora_stack");
}

void lora_stack_mask(const float* t, const int32_t* block, int64_t n, int32_t n_slots, int32_t rb, void* out, DType dt,
                     cudaStream_t s) {
  const int32_t width = n_slots * rb;
  if (n == 0 || width == 0) return;
  const unsigned grid = grid_for(n * (width / kVec));
  ENGINE_DISPATCH_DTYPE(dt, (lora_stack_mask_kernel<T><<<grid, kThreads, 0, s>>>(t, block, n, width, rb,
                                                                               static_cast<T*>(out))));
  check_launch("lora_stack_mask");
}

}  // namespace engine::cuda
