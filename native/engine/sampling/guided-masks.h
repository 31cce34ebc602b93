// The token masks of an iteration's guided chunks that the device samples: each sequence's matcher fills its
// chunk's DeviceSampling::allowed, the batch's sequences on several threads at once (each matcher is its own
// state; the compiled grammars they share compute a position's mask on first use, safely under concurrency).
#pragma once
#include <vector>

#include "model/model.h"
#include "scheduling/sequence.h"

namespace engine {

// The grammar positions the guided sequences' next masks read that are new, computed first, for every grammar of
// the batch, each over all threads (CompiledGrammar::precompute): left to the fills, one new position would hold
// the whole batch on one thread. Unguided sequences are skipped.
void precompute_guided_positions(const std::vector<Sequence*>& seqs);

// For every i with chunks[i].sample_on == SampleOn::device and seqs[i]->matcher set (their new positions first).
// A sequence whose guide allows no token at all: with `no_token` (during the forward pass, when the chunks' layout
// is fixed), its mask stays empty of tokens — every token banned — and no_token[i] is set, for the step to report;
// without it (before the pass), the chunk goes back to host sampling, whose step reports the error.
void fill_guided_masks(const std::vector<Sequence*>& seqs, std::vector<SequenceChunk>& chunks,
                       std::vector<uint8_t>* no_token = nullptr);

}  // namespace engine
