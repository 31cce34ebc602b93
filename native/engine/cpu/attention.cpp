#include "cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "quant/fp8-matrix.h"

namespace engine::cpu {
namespace {

void store_row(const PagedKv& pool, void* base, int64_t at, const float* src, float scale) {
  const int32_t hd = pool.head_dim;
  if (pool.storage == KvStorage::f32) {
    std::memcpy(static_cast<float*>(base) + at, src, sizeof(float) * hd);
    return;
  }
  uint8_t* dst = static_cast<uint8_t*>(base) + at;
  const float inv = 1.0f / scale;
  for (int32_t d = 0; d < hd; ++d) dst[d] = encode_e4m3(src[d] * inv);
}

// Row `at` of a pool array as floats: in place for float32, else decoded (times `scale`) into `buf`.
const float* load_row(const PagedKv& pool, const void* base, int64_t at, float scale, float* buf) {
  if (pool.storage == KvStorage::f32) return static_cast<const float*>(base) + at;
  const uint8_t* src = static_cast<const uint8_t*>(base) + at;
  for (int32_t d = 0; d < pool.head_dim; ++d) buf[d] = decode_e4m3(src[d]) * scale;
  return buf;
}

// The dot product of a query and a K row, summed in a fixed order: eight running sums (lane d % 8), then added up
// pairwise. A reduction the compiler may reorder (omp simd) is vectorized differently where it inlines the loop for
// one KV storage and for the other, and attention over an e4m3 pool and over a float pool holding the same values
// then differs in the last bits (kv-fp8 checks they do not); this order is the same in every copy, and as fast.
inline float row_dot(const float* q, const float* k, int32_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int32_t d = 0;
  for (; d + 8 <= n; d += 8)
    for (int32_t l = 0; l < 8; ++l) lane[l] += q[d + l] * k[d + l];
  for (; d < n; ++d) lane[d & 7] += q[d] * k[d];
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
}

}  // namespace

void write_kv(const PagedKv& pool, const std::vector<AttentionChunk>& chunks, const float* k_rows,
              const float* v_rows, int64_t row_stride) {
  const int32_t hd = pool.head_dim, tpb = pool.tokens_per_block;
  for (const AttentionChunk& c : chunks) {
#pragma omp parallel for schedule(static) if (c.n_tokens > 8)
    for (int32_t i = 0; i < c.n_tokens; ++i) {
      const int32_t p = c.past_len + i;
      const int64_t block = c.block_ids[p / tpb];
      const int32_t slot = p % tpb;
      const float* kr = k_rows + (c.first_row + i) * row_stride;
      const float* vr = v_rows + (c.first_row + i) * row_stride;
      for (int32_t h = 0; h < pool.num_kv_heads; ++h) {
        const int64_t dst = block * pool.block_stride() + (static_cast<int64_t>(h) * tpb + slot) * hd;
        store_row(pool, pool.k, dst, kr + static_cast<int64_t>(h) * hd, pool.k_scale);
        store_row(pool, pool.v, dst, vr + static_cast<int64_t>(h) * hd, pool.v_scale);
      }
    }
  }
}

void paged_attention(const PagedKv& pool, const std::vector<AttentionChunk>& chunks, const int32_t* row_chunk,
                     const int64_t* query_rows, int64_t n_rows, const float* q, int64_t q_stride, int32_t num_heads,
                     const AttentionScores& how, float* out, int64_t out_stride) {
  const float scale = how.scale, cap = how.softcap;
  const int32_t hd = pool.head_dim, tpb = pool.tokens_per_block;
  const int32_t group = num_heads / pool.num_kv_heads;
  const int64_t bstride = pool.block_stride();
  const int64_t items = n_rows * num_heads;
  // Work per item grows with its context length, so a long prefill next to decode tokens is uneven: dynamic
  // scheduling keeps every core busy.
#pragma omp parallel
  {
    // Per-thread score buffer, kept across calls so decode steps do not allocate.
    static thread_local std::vector<float> scores;
    static thread_local std::vector<float> row_buf;  // one decoded e4m3 row
    if (row_buf.size() < static_cast<size_t>(hd)) row_buf.resize(static_cast<size_t>(hd));
#pragma omp for schedule(dynamic, 4)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t out_row = item / num_heads;
      const int64_t row = query_rows ? query_rows[out_row] : out_row;
      const int32_t h = static_cast<int32_t>(item % num_heads);
      const AttentionChunk& c = chunks[row_chunk[row]];
      const int32_t ctx = c.past_len + static_cast<int32_t>(row - c.first_row) + 1;  // causal: up to itself
      const int32_t window = effective_window(how.window, c.window);
      const int32_t lo = window > 0 && ctx > window ? ctx - window : 0;  // first visible position
      const int32_t n_vis = ctx - lo;
      if (scores.size() < static_cast<size_t>(n_vis)) scores.resize(static_cast<size_t>(n_vis) * 2);
      float* s = scores.data();  // s[p - lo] for positions p in [lo, ctx)
      const float* qh = q + row * q_stride + static_cast<int64_t>(h) * hd;
      const int32_t kvh = h / group;
      float max_s = -INFINITY;
      // Blocks are visited from the one holding `lo`: those before it may have been released (-1).
      for (int32_t p0 = lo / tpb * tpb; p0 < ctx; p0 += tpb) {
        const int64_t kb = c.block_ids[p0 / tpb] * bstride + static_cast<int64_t>(kvh) * tpb * hd;
        const int32_t j0 = std::max(0, lo - p0), n = std::min(tpb, ctx - p0);
        for (int32_t j = j0; j < n; ++j) {
          const int32_t in_tree = p0 + j - (c.past_len - c.tree_past);  // the tree's node at this slot (>= 0), or the past
          if (c.tree_visible && in_tree >= 0 && !((c.tree_visible[row - c.first_row] >> in_tree) & 1)) {
            s[p0 + j - lo] = -INFINITY;  // another branch of the tree: weight exactly 0
            continue;
          }
          const float* kj = load_row(pool, pool.k, kb + static_cast<int64_t>(j) * hd, pool.k_scale, row_buf.data());
          float dot = row_dot(qh, kj, hd) * scale;
          if (cap > 0) dot = cap * std::tanh(dot / cap);
          s[p0 + j - lo] = dot;
          max_s = dot > max_s ? dot : max_s;
        }
      }
      float sum = 0;
      for (int32_t j = 0; j < n_vis; ++j) {
        s[j] = std::exp(s[j] - max_s);
        sum += s[j];
      }
      const float inv = 1.0f / sum;
      float* o = out + out_row * out_stride + static_cast<int64_t>(h) * hd;
      for (int32_t d = 0; d < hd; ++d) o[d] = 0;
      for (int32_t p0 = lo / tpb * tpb; p0 < ctx; p0 += tpb) {
        const int64_t vb = c.block_ids[p0 / tpb] * bstride + static_cast<int64_t>(kvh) * tpb * hd;
        const int32_t j0 = std::max(0, lo - p0), n = std::min(tpb, ctx - p0);
        for (int32_t j = j0; j < n; ++j) {
          const float w = s[p0 + j - lo] * inv;
          if (w == 0.0f) continue;  // (masked tree tokens; skipping adds nothing a zero weight would have)
          const float* vj = load_row(pool, pool.v, vb + static_cast<int64_t>(j) * hd, pool.v_scale, row_buf.data());
#pragma omp simd
          for (int32_t d = 0; d < hd; ++d) o[d] += w * vj[d];
        }
      }
    }
  }
}

}  // namespace engine::cpu
