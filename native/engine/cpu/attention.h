// Causal attention over a paged KV pool. Each chunk's new tokens attend to the chunk's past (already in the
// pool) and to themselves; keys/values are found through the chunk's block table, so sequences never need
// contiguous storage and blocks can be handed out in any order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/model-config.h"

namespace engine::cpu {

// How the pool stores a value: float32, or e4m3fn bytes (--kv-cache-dtype fp8) whose value is the decoded byte times
// the layer's k_scale / v_scale (1 unless the checkpoint calibrated them), as TensorRT-LLM and vLLM store FP8 KV.
enum class KvStorage : uint8_t { f32, e4m3 };

// One layer's pool. Layout per block: [num_kv_heads, tokens_per_block, head_dim] for K and the same for V, so one
// head's keys of one block are contiguous (the attention inner loop streams them).
struct PagedKv {
  void* k = nullptr;  // [num_blocks, num_kv_heads, tokens_per_block, head_dim] elements of `storage`
  void* v = nullptr;  // same
  int32_t num_blocks = 0;
  int32_t num_kv_heads = 0;
  int32_t tokens_per_block = 0;
  int32_t head_dim = 0;
  KvStorage storage = KvStorage::f32;
  float k_scale = 1.0f, v_scale = 1.0f;  // e4m3 only
  int64_t block_stride() const { return static_cast<int64_t>(num_kv_heads) * tokens_per_block * head_dim; }
};

// Bytes of one stored K or V value.
inline size_t kv_element_bytes(KvStorage s) { return s == KvStorage::e4m3 ? 1 : sizeof(float); }

struct AttentionChunk {
  int32_t past_len = 0;        // tokens already in the pool
  int32_t n_tokens = 0;        // new tokens (rows of q), at positions past_len ...
  int64_t first_row = 0;       // first row of this chunk in q / out / the new k, v
  const int32_t* block_ids = nullptr;  // validated by the caller to cover past_len + n_tokens
  int32_t window = 0;          // the sequence's window cap (0: none); entries before its window may be -1
  // A token tree (SequenceChunk::tree_parents): row i of the chunk sees the past and the chunk's tokens whose bits
  // are set in tree_visible[i] (its ancestors and itself); null: causal. Bit b is slot past_len - tree_past + b:
  // the tree's first tree_past nodes are in the past (a tree grown over passes, SequenceChunk::tree_past).
  const uint64_t* tree_visible = nullptr;
  int32_t tree_past = 0;
};

// What a layer's scores are: softmax over q.k * scale, soft-capped to cap * tanh(s / cap) when softcap > 0 (Gemma
// 2), over the last `window` positions when window > 0 (combined with each chunk's cap by effective_window).
struct AttentionScores {
  float scale = 1.0f;
  float softcap = 0.0f;
  int32_t window = 0;
};

// Copies the new tokens' K and V rows into their slots (e4m3: divided by the scale and rounded, saturating at 448).
// k_rows/v_rows: [n_total, row_stride] with num_kv_heads * head_dim values per row starting at the pointer.
void write_kv(const PagedKv& pool, const std::vector<AttentionChunk>& chunks, const float* k_rows,
              const float* v_rows, int64_t row_stride);

// For each query row r = query_rows[i] (or r = i when query_rows is null), i < n_rows:
// out[i, h * head_dim ...] = softmax(q[r]·Kᵀ * scale) V over positions [lo, past_len + (r - first_row)] of r's
// chunk, lo = 0 or the first position of the row's window. Computing only some rows lets the last layer skip tokens whose logits nobody asked for.
// q: [n_total, q_stride] with num_heads * head_dim values per row; out: [n_rows, out_stride].
// Query head h reads kv head h / (num_heads / num_kv_heads) (GQA/MQA). `row_chunk`: [n_total] chunk per row.
void paged_attention(const PagedKv& pool, const std::vector<AttentionChunk>& chunks, const int32_t* row_chunk,
                     const int64_t* query_rows, int64_t n_rows, const float* q, int64_t q_stride, int32_t num_heads,
                     const AttentionScores& how, float* out, int64_t out_stride);

}  // namespace engine::cpu
