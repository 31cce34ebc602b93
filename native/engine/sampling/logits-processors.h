// The logits processors of TensorRT-LLM's sampling pipeline, applied to one row in place before temperature,
// top-k/top-p, greedy or beam search. Order (each only when its parameter is not the neutral default):
//   1. embedding_bias      row[t] += bias[t]                       (a per-vocab additive vector on the request)
//   2. repetition_penalty  for every token present in prompt + output: row > 0 ? row / p : row * p
//   3. presence_penalty    for every token present in the OUTPUT (prompt excluded, as TRT-LLM): row -= p
//   4. frequency_penalty   for every token of the OUTPUT: row -= p * count
//   5. min_tokens          end_id -> -inf while fewer than min_tokens tokens were generated
//   6. bad_words           single-token words -> -inf always; a word w of length L > 1 bans w[L-1] when the last
//                          L-1 tokens of prompt + output equal w[0 .. L-1) (the prompt counts, as in TRT-LLM and
//                          HF's NoBadWordsLogitsProcessor: a banned phrase is banned wherever it starts)
//   7. guided decoding     every token the request's grammar does not allow next -> -inf
// Temperature is not a processor here: the sampler scales after these, so penalties act on raw logits (HF order;
// it keeps repetition_penalty's sign test meaningful).
#pragma once
#include <cstdint>
#include <vector>

#include "sampling/sampling-context.h"

namespace engine {

class LogitsProcessors {
 public:
  // NaN entries become -inf first (never picked); then the stages above.
  void apply(float* row, int32_t vocab, const SamplingContext& ctx);

 private:
  void apply_penalties(float* row, int32_t vocab, const SamplingContext& ctx);
  // Scratch indexed by token id, reset through touched_ after each use: O(sequence length) per row, not O(vocab).
  std::vector<int32_t> output_count_;
  std::vector<uint8_t> in_sequence_;
  std::vector<int32_t> touched_;
};

}  // namespace engine
