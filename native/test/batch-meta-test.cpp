// The CUDA decoder's per-iteration metadata (cuda/batch-meta.h, host code, checked here without a GPU): a decode
// row beside a token tree (a Medusa check) — each tree token written to the next K/V slot but rotated at its depth,
// attending to what came before the tree and to its ancestors and itself only; rows outside a tree see their whole
// context; the logit rows' copies carry the same. The prompt-rows kernel's wider row groups are planned for a batch
// with more rows than sequences, never across a sequence, and not for a decode batch.
#include <climits>
#include <vector>

#include "check.h"
#include "cuda/batch-meta.h"

using namespace engine;
using engine::cuda::AttnRow;

TEST_MAIN({
  const int32_t tpb = 4;
  auto chunk = [](std::vector<int32_t> tokens, int32_t past, std::vector<int32_t> blocks, bool all_logits) {
    SequenceChunk c;
    c.tokens = std::move(tokens);
    c.past_len = past;
    c.block_ids = std::move(blocks);
    c.all_logits = all_logits;
    return c;
  };
  const SequenceChunk decode = chunk({5}, 10, {7, 3, 9}, false);
  SequenceChunk tree = chunk({11, 12, 13, 14, 15, 16}, 20, {0, 1, 2, 4, 5, 6, 8}, true);
  //   0 ─┬─ 1 ── 3 ── 4
  //      └─ 2 ── 5
  tree.tree_parents = {-1, 0, 0, 1, 3, 2};
  const std::vector<SequenceChunk> chunks = {decode, tree};
  BatchLayout layout;
  ForwardOutput out;
  layout_batch(chunks, false, 100, layout, out);
  const int64_t T = layout.num_tokens, R = layout.num_out_rows();
  CHECK(T == 7 && R == 7);
  const cuda::MetaLayout ml = cuda::meta_layout(T, R, layout.num_table_entries);
  std::vector<char> host(ml.total);
  cuda::MetaGeometry g;
  g.tokens_per_block = tpb;
  g.block_elems = 2 * tpb * 8;  // 2 kv heads of head_dim 8
  g.head_dim = 8;
  g.rows_per_group = 4;
  const cuda::BatchMeta m = cuda::fill_batch_meta(chunks, layout, ml, g, host.data(), host.data());

  const std::vector<int32_t> positions(m.positions, m.positions + T);
  CHECK(positions == (std::vector<int32_t>{10, 20, 21, 21, 22, 23, 22}));  // the tree's at depth 0 1 1 2 3 2
  // K/V slots stay consecutive: tree token i at slot 20 + i, through its chunk's block table.
  for (int i = 0; i < 6; ++i) {
    const int32_t slot = 20 + i;
    CHECK(m.kv_dst[1 + i] == static_cast<int64_t>(tree.block_ids[slot / tpb]) * g.block_elems + (slot % tpb) * 8);
  }
  CHECK(m.kv_dst[0] == static_cast<int64_t>(decode.block_ids[10 / tpb]) * g.block_elems + (10 % tpb) * 8);
  // The decode row sees its 11 positions; each tree row sees through its own slot, masked to its ancestors.
  CHECK(m.rows_all[0].ctx == 11 && m.rows_all[0].tree_base == INT32_MAX);
  const std::vector<uint64_t> visible = {0b1, 0b11, 0b101, 0b1011, 0b11011, 0b100101};
  for (int i = 0; i < 6; ++i) {
    const AttnRow& r = m.rows_all[1 + i];
    CHECK_MSG(r.ctx == 21 + i && r.tree_base == 20 && r.tree_visible == visible[static_cast<size_t>(i)],
              "tree row %d: ctx %d, base %d, visible %llx", i, r.ctx, r.tree_base,
              static_cast<unsigned long long>(r.tree_visible));
    CHECK(r.table == 3);  // the second chunk's table starts after the first's 3 entries
  }
  for (int64_t i = 0; i < R; ++i) {
    const AttnRow& a = m.rows_last[i];
    const AttnRow& b = m.rows_all[m.out_rows[i]];
    CHECK(a.ctx == b.ctx && a.tree_base == b.tree_base && a.tree_visible == b.tree_visible);
  }
  CHECK(m.max_ctx == 26 && !m.one_token_each);
  CHECK(m.n_groups_wide == 0);  // (rows_per_wide_group unset: not planned)
  // Wide groups of up to 5 rows: the decode row alone, the tree's 6 rows as 5 + 1.
  g.rows_per_wide_group = 5;
  const cuda::BatchMeta mw = cuda::fill_batch_meta(chunks, layout, ml, g, host.data(), host.data());
  CHECK(mw.n_groups_wide == 3);
  const auto* wide = mw.groups_wide;
  CHECK(wide[0].first == 0 && wide[0].count == 1 && wide[1].first == 1 && wide[1].count == 5 &&
        wide[2].first == 6 && wide[2].count == 1);
  CHECK(mw.n_groups_all == 3);  // (groups of 4: 1, 4 and 2 rows)
  // A decode batch (every chunk one token) plans none.
  BatchLayout ld;
  layout_batch({decode, decode}, false, 100, ld, out);
  const cuda::MetaLayout mld = cuda::meta_layout(ld.num_tokens, ld.num_out_rows(), ld.num_table_entries);
  std::vector<char> hostd(mld.total);
  const cuda::BatchMeta md = cuda::fill_batch_meta({decode, decode}, ld, mld, g, hostd.data(), hostd.data());
  CHECK(md.one_token_each && md.n_groups_wide == 0 && md.n_groups_all == 2);
  g.rows_per_wide_group = 0;
  // Without a tree, positions are the slots (a plain chunk of the same tokens).
  SequenceChunk causal = tree;
  causal.tree_parents.clear();
  BatchLayout l2;
  layout_batch({causal}, false, 100, l2, out);
  const cuda::MetaLayout ml2 = cuda::meta_layout(l2.num_tokens, l2.num_out_rows(), l2.num_table_entries);
  std::vector<char> host2(ml2.total);
  const cuda::BatchMeta m2 = cuda::fill_batch_meta({causal}, l2, ml2, g, host2.data(), host2.data());
  for (int i = 0; i < 6; ++i)
    CHECK(m2.positions[i] == 20 + i && m2.rows_all[i].ctx == 21 + i && m2.rows_all[i].tree_base == INT32_MAX);

  // Whether a pass's logits are needed at all (Model::set_argmax_only): not when every chunk is a device argmax.
  SequenceChunk greedy = decode, sampled = decode;
  greedy.sample_on = SampleOn::device_argmax;
  sampled.sample_on = SampleOn::device;
  CHECK(all_rows_argmax({greedy, greedy}));
  CHECK(!all_rows_argmax({greedy, sampled}) && !all_rows_argmax({greedy, decode}) && !all_rows_argmax({}));
})
