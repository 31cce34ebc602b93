// What kernels-attention.cu (the split plan, the SIMT kernel, the merge) needs of kernels-attention-mma.cu (the
// tensor-core kernel).
#pragma once
#include "cuda/kernels.h"

namespace engine::cuda {

// Head sizes the tensor-core kernel is built for (16, 32, 64, 128); others take the SIMT kernel.
bool attention_mma_supports(int head_dim);
// Query heads one tensor-core block serves: the largest power of two dividing the GQA group, at most 16 (the MMA
// tile's rows are tokens x heads).
int attention_mma_heads(int group);
// Whether the 8-warp block (tiles of 128 positions) is built for `head_dim` (64, 128).
bool attention_mma_wide(int head_dim);
// Whether the EARLY kernel (a.new_last_only) takes this step's keys / values from the qkv rows itself
// (AttnArgs::fresh): every token of the step is a row (the last layer may attend to fewer), one row per block, and
// each partition within the two tiles loaded before the loop.
bool attention_mma_fuses_new_kv(const AttnArgs& a, int part_size, bool wide);
// One launch over a.groups; contexts cut into `parts` partitions of `part_size` positions (parts > 1: unnormalised
// partial outputs into ws_out [n_rows, n_heads, parts, head_dim] and (max, sum) into ws_ms, for the merge).
// wide: 8 warps per block instead of 4 (attention_mma_wide).
void attention_mma(const AttnArgs& a, int part_size, int parts, bool wide, float* ws_out, float* ws_ms,
                   cudaStream_t s);

}  // namespace engine::cuda
