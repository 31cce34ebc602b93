// The one place that decides where a sequence's next token is drawn: on the host, by sampler.h from the logits row
// the model returns, or by the model on its device (Model::samples_on_device). Models obey SequenceChunk::sample_on
// and never decide themselves, so the executor's shape check and every backend agree by construction.
#pragma once
#include "model/model.h"
#include "scheduling/sequence.h"

namespace engine {

// Sets chunk.sample_on (and chunk.device_sampling for SampleOn::device) for a chunk of `seq` whose tokens, past_len
// and all_logits are already set. A device choice needs: a model that samples on its device; a chunk that reaches
// the sequence's last token (a token is drawn after it) and returns no context rows; and nothing that only the host
// sampler does: no beams, no returned generation logits, no embedding bias, no bad words, no active min_tokens ban,
// no budget redraw of a guided sequence. Greedy without penalties or guide is a plain argmax
// (SampleOn::device_argmax); anything else, SampleOn::device. A guided sequence's mask is not filled here
// (guided-masks.h fills the batch's masks at once).
void choose_device_sampling(const Sequence& seq, bool model_samples_on_device, SequenceChunk& chunk);

}  // namespace engine
