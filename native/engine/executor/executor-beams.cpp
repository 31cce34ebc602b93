// The executor loop's beam-search parts (beam-search.h has the algorithm): building the per-beam chunks with
// copy-on-write of shared KV blocks, and running one beam step over a sequence's rows.
#include "executor/executor-impl.h"
#include "executor/response-builder.h"

namespace engine {

bool Executor::Impl::add_beam_chunks(Sequence& seq, IterationBatch& batch) {
  const int32_t pos = seq.num_computed;  // every live beam feeds its newest token at this position
  const size_t index = static_cast<size_t>(pos / kv.tokens_per_block());
  for (Beam& beam : seq.beams) {
    if (!kv.ensure_capacity(beam.block_table, pos + 1)) return false;
    // The block about to be written may still be read by a sibling (same parent): give this beam its own copy.
    const int32_t src = kv.make_writable(beam.block_table, index);
    if (src >= 0) model->copy_kv_block(src, beam.block_table[index]);
    SequenceChunk c;
    c.tokens = {beam.tokens.back()};
    c.past_len = pos;
    c.block_ids = beam.block_table;
    c.window = seq.window_cap;
    batch.seqs.push_back(&seq);
    batch.chunks.push_back(std::move(c));
    batch.ctx_rows_from.push_back(0);  // beams return no context logits
    batch.ctx_rows_to.push_back(0);
  }
  return true;
}

void Executor::Impl::run_beam_step(Sequence& seq, const std::vector<const float*>& rows, double t_tok,
                                   std::vector<Response>& out) {
  if (seq.first_token_time == 0) seq.first_token_time = t_tok;
  seq.last_token_time = t_tok;
  if (beam_search.step(seq, rows, vocab_size, sampler, kv)) {
    finish_sequence(seq, seq.finish_reason, out);
  } else if (seq.request.streaming) {
    out.push_back(build_response(seq, vocab_size, /*is_final=*/false));
  }
}

}  // namespace engine
