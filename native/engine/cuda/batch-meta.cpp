#include "cuda/batch-meta.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "errors.h"

namespace engine::cuda {
namespace {

size_t align8(size_t n) { return (n + 7) / 8 * 8; }

template <typename T>
T* at(char* base, size_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

template <typename T>
const T* at(const char* base, size_t offset) {
  return reinterpret_cast<const T*>(base + offset);
}

}  // namespace

MetaLayout meta_layout(int64_t T, int64_t R, int64_t table_entries) {
  MetaLayout m{};
  size_t offset = 0;
  auto take = [&](size_t bytes) {
    const size_t here = offset;
    offset = align8(offset + bytes);
    return here;
  };
  m.tokens = take(4 * T);
  m.positions = take(4 * T);
  m.kv_dst = take(8 * T);
  m.use_long = take(T);
  m.rows_all = take(sizeof(AttnRow) * T);
  m.rows_last = take(sizeof(AttnRow) * R);
  m.groups_all = take(sizeof(AttnGroup) * T);
  m.groups_last = take(sizeof(AttnGroup) * R);
  m.groups_wide = take(sizeof(AttnGroup) * T);
  m.out_rows = take(4 * R);
  m.tables = take(4 * std::max<int64_t>(table_entries, 1));
  m.total = offset;
  return m;
}

BatchMeta fill_batch_meta(const std::vector<SequenceChunk>& chunks, const BatchLayout& layout, const MetaLayout& ml,
                          const MetaGeometry& g, char* host, const char* device) {
  auto* tokens = at<int32_t>(host, ml.tokens);
  auto* positions = at<int32_t>(host, ml.positions);
  auto* kv_dst = at<int64_t>(host, ml.kv_dst);
  auto* use_long = at<uint8_t>(host, ml.use_long);
  auto* rows_all = at<AttnRow>(host, ml.rows_all);
  auto* rows_last = at<AttnRow>(host, ml.rows_last);
  auto* out_rows = at<int32_t>(host, ml.out_rows);
  auto* tables = at<int32_t>(host, ml.tables);
  int32_t max_ctx = 0;
  bool one_token_each = true;
  int64_t row = 0, table_at = 0;
  for (const SequenceChunk& ch : chunks) {
    one_token_each = one_token_each && ch.tokens.size() == 1;
    std::memcpy(tables + table_at, ch.block_ids.data(), sizeof(int32_t) * ch.block_ids.size());
    // (the CPU decoder's rule: the sequence's length once this step is in)
    const bool long_rope = g.long_after > 0 && ch.past_len + static_cast<int64_t>(ch.tokens.size()) > g.long_after;
    const bool tree = !ch.tree_parents.empty();
    // (a tree grown over passes is the CPU EAGLE draft's alone: EAGLE heads are refused on CUDA)
    if (ch.tree_past != 0) throw EngineError(ErrorCode::internal, "a token tree with nodes in the past on CUDA");
    const int64_t first = row;
    for (size_t i = 0; i < ch.tokens.size(); ++i, ++row) {
      // p: the token's K/V slot; its position (rope) is the layout's, which differs in a token tree (its depth).
      const int32_t p = ch.past_len + static_cast<int32_t>(i);
      tokens[row] = ch.tokens[i];
      positions[row] = layout.positions[static_cast<size_t>(row)];
      kv_dst[row] = static_cast<int64_t>(ch.block_ids[p / g.tokens_per_block]) * g.block_elems +
                    static_cast<int64_t>(p % g.tokens_per_block) * g.head_dim;
      use_long[row] = long_rope ? 1 : 0;
      AttnRow& r = rows_all[row];
      r = AttnRow{static_cast<int32_t>(row), p + 1, static_cast<int32_t>(table_at), ch.window};
      if (tree) {  // its ancestors' slots and its own (model.h's SequenceChunk::tree_parents)
        r.tree_base = ch.past_len;
        r.tree_visible = (i == 0 ? 0 : rows_all[first + ch.tree_parents[i]].tree_visible) | (uint64_t{1} << i);
      }
      max_ctx = std::max(max_ctx, p + 1);
    }
    table_at += static_cast<int64_t>(ch.block_ids.size());
  }
  const int64_t R = layout.num_out_rows();
  for (int64_t i = 0; i < R; ++i) {
    rows_last[i] = rows_all[layout.out_rows[i]];
    out_rows[i] = static_cast<int32_t>(layout.out_rows[i]);
  }
  BatchMeta m{};
  m.n_groups_all = group_attention_rows(rows_all, static_cast<int32_t>(row), g.rows_per_group,
                                        at<AttnGroup>(host, ml.groups_all));
  m.n_groups_last = group_attention_rows(rows_last, static_cast<int32_t>(R), g.rows_per_group,
                                         at<AttnGroup>(host, ml.groups_last));
  m.n_groups_wide = 0;
  if (g.rows_per_wide_group > 0 && !one_token_each)  // (a decode batch's rows are one a sequence)
    m.n_groups_wide = group_attention_rows(rows_all, static_cast<int32_t>(row), g.rows_per_wide_group,
                                           at<AttnGroup>(host, ml.groups_wide));
  m.tokens = at<int32_t>(device, ml.tokens);
  m.positions = at<int32_t>(device, ml.positions);
  m.kv_dst = at<int64_t>(device, ml.kv_dst);
  m.use_long = g.long_after > 0 ? at<uint8_t>(device, ml.use_long) : nullptr;
  m.rows_all = at<AttnRow>(device, ml.rows_all);
  m.rows_last = at<AttnRow>(device, ml.rows_last);
  m.groups_all = at<AttnGroup>(device, ml.groups_all);
  m.groups_last = at<AttnGroup>(device, ml.groups_last);
  m.groups_wide = at<AttnGroup>(device, ml.groups_wide);
  m.out_rows = at<int32_t>(device, ml.out_rows);
  m.tables = at<int32_t>(device, ml.tables);
  m.one_token_each = one_token_each;
  m.max_ctx = max_ctx;
  return m;
}

}  // namespace engine::cuda
