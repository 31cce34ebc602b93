// The checks every Model runs on an iteration's chunks before touching its KV pool: token ids inside the vocab,
// block tables covering every position, block ids inside the pool, positions inside a learned position table.
// One definition for the CPU and the device models, so both reject the same inputs with the same messages.
#pragma once
#include <cstdint>
#include <vector>

#include "model/model-config.h"
#include "model/model.h"

namespace engine {

// Throws EngineError (internal for executor bugs, invalid_argument for token ids and positions).
// `learned_positions`: the model adds a position table of max_position_embeddings rows (GPT-2).
void validate_chunks(const std::vector<SequenceChunk>& chunks, const ModelConfig& config, bool learned_positions,
                     int32_t num_blocks, int32_t tokens_per_block);

}  // namespace engine
