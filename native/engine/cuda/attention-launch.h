// What kernels-attention.cu (the split plan, the SIMT kernel, the merge) needs of kernels-attention-mma.cu (the
// tensor-core kernel), kernels-attention-decode.cu (large decode batches) and kernels-attention-prefill.cu (prompt
// rows).
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

// Query heads one decode block serves: the largest power of two dividing the GQA group, at most 8 (the MMA's columns).
int attention_decode_heads(int group);
// Whether the decode kernel serves a launch of decode rows (a.new_last_only, one row per sequence) that the EARLY
// kernels do not take: unsplit (parts 1), one row a group, head size 64 or 128, and TRTLLM_ATTN_DECODE_KERNEL not 0.
// The pools must already hold every position (a.fresh written by the separate kernel).
bool attention_decode_applies(const AttnArgs& a, int parts);
void attention_decode(const AttnArgs& a, cudaStream_t s);

// Warps of a prompt-rows block, each serving attention_rows_per_group() rows: a.wide_groups are planned with this
// many times that (attention_prefill_rows_per_group).
constexpr int kAttentionPrefillWarps = 4;
// Whether the prompt-rows kernel serves this launch: rows not all decode rows (not new_last_only), wide_groups
// planned, head size 64 or 128, enough blocks that no context would be split, TRTLLM_ATTN_PREFILL_KERNEL not 0.
// The pools must already hold every position (a.fresh written by the separate kernel).
bool attention_prefill_applies(const AttnArgs& a, int num_sms);
void attention_prefill(const AttnArgs& a, cudaStream_t s);

}  // namespace engine::cuda
