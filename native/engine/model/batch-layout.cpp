#include "model/batch-layout.h"

#include <string>

#include "errors.h"

namespace engine {

void layout_batch(const std::vector<SequenceChunk>& chunks, bool samples_on_device, int32_t vocab_size,
                  BatchLayout& layout, ForwardOutput& out) {
  BatchLayout& l = layout;
  l.chunk_first_row.clear();
  l.positions.clear();
  l.token_chunk.clear();
  l.out_rows.clear();
  l.out_chunk.clear();
  l.host_row.clear();
  l.num_table_entries = 0;
  l.num_host_rows = 0;
  out.vocab_size = vocab_size;
  out.first_row.assign(chunks.size(), -1);
  out.sampled.assign(chunks.size(), DeviceSample{});
  out.first_sample.assign(chunks.size(), -1);
  out.row_samples.clear();
  int64_t row = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SequenceChunk& ch = chunks[c];
    const bool on_device = ch.sample_on != SampleOn::host;
    // With all_logits every row is drawn: argmaxes, or draws without penalties or a guide (each row's would
    // depend on the rows before it).
    const bool row_draws_ok = ch.sample_on == SampleOn::device_argmax ||
                              (ch.device_sampling.penalty_tokens.empty() && !ch.device_sampling.guided);
    if (on_device && (!samples_on_device || (ch.all_logits && !row_draws_ok)))
      throw EngineError(ErrorCode::internal,
                        "chunk " + std::to_string(c) + " asks for device sampling " +
                            (ch.all_logits ? "with penalties or a guide on every row" : "from a model that cannot"));
    const int32_t n = static_cast<int32_t>(ch.tokens.size());
    l.chunk_first_row.push_back(row);
    l.num_table_entries += static_cast<int64_t>(ch.block_ids.size());
    if (!on_device) out.first_row[c] = l.num_host_rows;
    if (on_device && ch.all_logits) {
      out.first_sample[c] = static_cast<int32_t>(out.row_samples.size());
      out.row_samples.resize(out.row_samples.size() + ch.tokens.size());
    }
    const bool tree = !ch.tree_parents.empty();
    // A tree's token sits at the root's position plus its depth (the root at past_len, or earlier when the tree's
    // first nodes are in the past: SequenceChunk::tree_past).
    l.tree_depth.assign(ch.tree_parents.size(), 0);
    for (size_t i = 1; i < ch.tree_parents.size(); ++i)
      l.tree_depth[i] = l.tree_depth[static_cast<size_t>(ch.tree_parents[i])] + 1;
    for (int32_t i = 0; i < n; ++i) {
      l.positions.push_back(tree ? ch.past_len - ch.tree_past + l.tree_depth[static_cast<size_t>(ch.tree_past + i)]
                                 : ch.past_len + i);
      l.token_chunk.push_back(static_cast<int32_t>(c));
      if (!(ch.all_logits || i == n - 1)) continue;
      l.out_rows.push_back(row + i);
      l.out_chunk.push_back(static_cast<int32_t>(c));
      l.host_row.push_back(on_device ? -1 : l.num_host_rows++);
    }
    row += n;
  }
  l.num_tokens = row;
}

bool all_rows_argmax(const std::vector<SequenceChunk>& chunks) {
  for (const SequenceChunk& c : chunks)
    if (c.sample_on != SampleOn::device_argmax) return false;
  return !chunks.empty();
}

}  // namespace engine
