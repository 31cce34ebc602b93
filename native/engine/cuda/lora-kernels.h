// The grouped LoRA kernels (kernels-lora.cu): a projection's deltas for a batch whose rows run different adapters
// (or none), two launches per projection whatever the adapters: the shrink t = x · A_slotᵀ and the expand
// y += t · B_slotᵀ. Both read which rows run which slot (lora-rows.h's tiles) and the adapters' matrices (a device
// table of descriptors, lora-slots.h) from device memory, so a CUDA graph captures them once and replays them with
// each step's rows. Accumulation in fp32; A and B in the model dtype.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels.h"
#include "cuda/lora-rows.h"

namespace engine::cuda {

// Segments of one projection one adapter may have (qkv: q, k, v — three more if it gives attn_qkv besides).
constexpr int32_t kLoraMaxSegments = 8;
// The most shrink outputs (sum of a projection's padded segment ranks) of one adapter; the expand stages a tile's
// [kLoraTileRows][this] sums in shared memory.
constexpr int32_t kLoraMaxRank = 512;
// Ranks are padded with zeros to a multiple of this (A rows, B columns): 16-byte loads of B rows and of A
// rank-row blocks, and a shrink block's rank rows never straddle the end.
constexpr int32_t kLoraRankAlign = 8;

// One delta of a projection: y[:, out_offset .. out_offset + out) += t[:, t_offset .. t_offset + rank) · bᵀ.
struct LoraSegDesc {
  const void* b = nullptr;  // [out, rank] model dtype, rank padded (zero columns)
  int32_t out_offset = 0;
  int32_t out = 0;
  int32_t t_offset = 0;  // multiple of kLoraRankAlign
  int32_t rank = 0;      // padded
};

// One adapter on one projection of one layer: its segments' A stacked into one [rank, in] matrix (the shrink is
// one product for all of them, the input being the same), and each segment's B.
struct LoraTargetDesc {
  const void* a = nullptr;  // [rank, in] model dtype
  int32_t rank = 0;         // total padded rank (multiple of kLoraRankAlign); 0: the adapter leaves it alone
  int32_t n_seg = 0;
  LoraSegDesc seg[kLoraMaxSegments];
};

// The grouped rows of one projection in device memory (cuda-decoder-lora.cpp fills them per step).
struct LoraRowsDev {
  const int32_t* rows = nullptr;     // [grouped rows] the row of x / y each grouped row is
  const int32_t* grouped = nullptr;  // [rows] the inverse: each row's grouped row, -1 where it runs no adapter
  // [max_tiles]: this step's tiles, then tiles of count 0 (a graph's launches cover the most tiles its batch size
  // can have; the blocks of empty tiles return at once).
  const LoraTile* tiles = nullptr;
  int32_t max_tiles = 0;   // tiles listed (lora_max_tiles for a graph, else the step's count)
  int32_t grid_tiles = 0;  // lora_add's tile dimension (lora_grid_tiles for a graph): its block z serves tiles z,
                           // z + grid_tiles, .. up to the first empty one
  // For the stacked products (lora_stack): the step's slots in this view [n_slots], each row's position among them
  // [n] (-1: none); n is the view's row count.
  const int32_t* slots = nullptr;
  const int32_t* block = nullptr;
  int32_t n_slots = 0;
  int64_t n = 0;
};

// The shrink's output: partial sums over slices of kLoraKSlice input columns, which the expand adds up (a shrink
// block reads one slice of x and A, so that even one row and rank 16 make enough blocks to keep the memory
// system busy, and a decode step's shrink is one round of loads). Column ldt - 1 of each row holds the slice's sum
// of squares of x (a fused norm).
struct LoraScratch {
  float* t = nullptr;        // [slices][grouped rows][ldt]
  int64_t ldt = 0;           // >= the largest rank + 1
  int64_t slice_stride = 0;  // elements from one slice to the next (>= grouped rows * ldt)
};
constexpr int64_t kLoraKSlice = 2048;  // 8 warps x 32 lanes x 8 elements (one 16-byte load per lane and rank row)
inline int32_t lora_k_slices(int64_t in) { return static_cast<int32_t>((in + kLoraKSlice - 1) / kLoraKSlice); }

// Partial t[p, 0 .. rank) = x[rows[p], slice] · A_slot[:, slice]ᵀ for every grouped row p, slot = its tile's, A
// from table[slot * slot_stride] (this projection's column of the table). x: [.., ldx] of dtype dt, or (norm_w
// set) the fp32 residual stream times norm_w — an RMSNorm the expand finishes with the rows' 1 / rms, from the
// sums of squares written beside. max_rank: the grid's bound on any slot's rank here. in % 8 == 0, ldx % 8 == 0.
// pdl: launched with programmatic dependent launch (not on a stream forked from the main one). done (nullable): an
// event the launch records programmatically (pdl.cuh's launch_ex), or plainly when nothing is launched — the fork's
// join, so that the kernel after it keeps its early start.
void lora_shrink(const LoraRowsDev& rows, const LoraTargetDesc* table, int64_t slot_stride, int32_t max_rank,
                 const void* x, const float* norm_w, int64_t ldx, int64_t in, DType dt, const LoraScratch& t,
                 bool pdl, cudaStream_t s, cudaEvent_t done = nullptr);

// y[rows[p], c] += Σ_seg t[p, seg.t_offset + r] · B_seg[c - seg.out_offset, r] for every grouped row p and output
// column c < n of a segment of its slot, t being the shrink's slices summed (times the row's 1 / rms when `norm`:
// rms of its `in` columns, with eps). y: fp32 or dtype dt (rounded once), row stride ldy.
void lora_expand(const LoraRowsDev& rows, const LoraTargetDesc* table, int64_t slot_stride, const LoraScratch& t,
                 int64_t in, bool norm, float eps, int64_t n, void* y, bool y_f32, int64_t ldy, DType dt, bool pdl,
                 cudaStream_t s);

// The expand split in two, for decode-sized steps: the deltas computed beside the product (on the shrink's stream,
// nothing of y read) into delta[p, 0 .. n) for grouped row p (fp32, row stride ldd; zeros in columns no segment of
// the row's slot covers), then added into y after the product by lora_add — whose blocks have no adapter memory to
// read and no shrink outputs to stage, only the deltas and y.
void lora_expand_delta(const LoraRowsDev& rows, const LoraTargetDesc* table, int64_t slot_stride,
                       const LoraScratch& t, int64_t in, bool norm, float eps, int64_t n, float* delta, int64_t ldd,
                       DType dt, bool pdl, cudaStream_t s, cudaEvent_t done = nullptr);
void lora_add(const LoraRowsDev& rows, const float* delta, int64_t ldd, int64_t n, void* y, bool y_f32, int64_t ldy,
              DType dt, bool pdl, cudaStream_t s);

// The same two products on tensor cores (kernels-lora-wide.cu), for steps of many rows (prefill chunks): the same
// tiles, descriptors and scratch; t rounded to the model dtype before the expand, x (times the norm weight) before
// the shrink. The shrink is launched plainly (it runs on the forked stream).
void lora_shrink_wide(const LoraRowsDev& rows, const LoraTargetDesc* table, int64_t slot_stride, int32_t max_rank,
                      const void* x, const float* norm_w, int64_t ldx, int64_t in, DType dt, const LoraScratch& t,
                      cudaStream_t s);
void lora_expand_wide(const LoraRowsDev& rows, const LoraTargetDesc* table, int64_t slot_stride,
                      const LoraScratch& t, int64_t in, bool norm, float eps, int64_t n, void* y, bool y_f32,
                      int64_t ldy, DType dt, bool pdl, cudaStream_t s);

// Prompt chunks over few adapters as cuBLAS products (kernels-lora-stack.cu; cuda-decoder-lora.cpp runs them): the
// step's n_slots adapters of one projection side by side — A_st [n_slots * rb, in], slot k's A rows from row k * rb
// (zeros past its rank), and B_st [out, n_slots * rb], slot k's segments' B in columns k * rb + t_offset .. (zeros
// where a segment does not reach) — so that t = x · A_stᵀ is one product for every row and slot, and y += t' · B_stᵀ
// another, t' being t rounded to the model dtype with each row's columns of other slots zeroed (lora_stack_mask:
// block[i] is row i's slot position, -1 none). rb: the projection's rank bound, a multiple of 8; slots in device
// memory.
void lora_stack(const LoraTargetDesc* table, int64_t slot_stride, const int32_t* slots, int32_t n_slots, int32_t rb,
                int64_t in, int64_t out, void* a_st, void* b_st, DType dt, cudaStream_t s);
void lora_stack_mask(const float* t, const int32_t* block, int64_t n, int32_t n_slots, int32_t rb, void* out, DType dt,
                     cudaStream_t s);

}  // namespace engine::cuda
