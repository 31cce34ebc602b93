// How a model lays out one iteration, shared by the CPU and the CUDA decoder so both index rows alike: every
// chunk's tokens become consecutive rows of one activation matrix; the logits rows computed are every token of an
// all_logits chunk, else its last; each goes either to a row of ForwardOutput::logits (the host samples it) or to
// the device's argmax / sampler, as the chunk's SampleOn says (the model only obeys it).
#pragma once
#include <cstdint>
#include <vector>

#include "model/model.h"

namespace engine {

// Filled in place, so a model that keeps one BatchLayout allocates nothing in steady state.
struct BatchLayout {
  int64_t num_tokens = 0;                // T: token rows of the iteration
  int64_t num_table_entries = 0;         // block-table entries of all chunks together
  std::vector<int64_t> chunk_first_row;  // [chunks] token row of each chunk's first token
  std::vector<int32_t> positions;        // [T] each token row's position in its sequence
  std::vector<int32_t> token_chunk;      // [T] each token row's chunk
  std::vector<int64_t> out_rows;         // [R] token rows whose logits are computed, in chunk order
  std::vector<int32_t> out_chunk;        // [R] each one's chunk
  std::vector<int32_t> host_row;         // [R] each one's row in ForwardOutput::logits; -1: drawn on the device
  int32_t num_host_rows = 0;             // rows of ForwardOutput::logits
  std::vector<int32_t> tree_depth;       // scratch: a token tree's depth of each node

  int64_t num_out_rows() const { return static_cast<int64_t>(out_rows.size()); }
};

// Lays out `chunks` into `layout` and sets what every rank reports in `out`: vocab_size, first_row (its first host
// row, -1 for a chunk drawn on the device), `sampled` (one per chunk, for the device to fill) and, for an
// all_logits chunk taking device argmaxes, its span of row_samples. Throws EngineError(internal) for a chunk that
// asks for device sampling from a model that cannot (samples_on_device false), or for draws with penalties or a
// guide together with all_logits.
void layout_batch(const std::vector<SequenceChunk>& chunks, bool samples_on_device, int32_t vocab_size,
                  BatchLayout& layout, ForwardOutput& out);

// True when there are chunks and every one's logit rows are drawn by the device's argmax (SampleOn::device_argmax):
// then nobody needs the logits themselves (Model::set_argmax_only).
bool all_rows_argmax(const std::vector<SequenceChunk>& chunks);

}  // namespace engine
