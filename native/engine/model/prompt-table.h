// P-tuning (TensorRT-LLM's PromptTuningConfig, the seeds' prompt_embedding_table + prompt_vocab_size): a request's
// table of input embeddings for "virtual tokens". A prompt id vocab_size + i is such a token: the model takes row i
// of the table as its input embedding instead of looking the id up (embed_scale applies to it as to any row, as
// TRT-LLM scales after its PromptTuningEmbedding). Ids below vocab_size embed as usual.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace engine {

struct PromptTable {
  int32_t rows = 0;         // prompt_vocab_size: virtual ids are [vocab_size, vocab_size + rows)
  int32_t hidden = 0;       // the model's hidden_size
  std::vector<float> data;  // [rows, hidden]
  // Content hash (prompt_table_key): the prefix cache chains a tabled request's blocks from a root of this table's
  // own, so the same ids under another table (or none) never share K/V.
  uint64_t key = 0;
};

// A hash of the table's shape and every value's bits; never 0 (0 means "no table" to kv_block_root).
uint64_t prompt_table_key(const PromptTable& table);

// The table made from `data` ([rows, hidden]) with its key set.
std::shared_ptr<const PromptTable> make_prompt_table(int32_t rows, int32_t hidden, std::vector<float> data);

// Row `token - vocab_size` of `table` when `token` is one of its virtual ids, else null.
inline const float* prompt_table_row(const PromptTable* table, int32_t token, int32_t vocab_size) {
  if (table == nullptr || token < vocab_size) return nullptr;
  const int64_t row = static_cast<int64_t>(token) - vocab_size;
  if (row >= table->rows) return nullptr;
  return table->data.data() + row * table->hidden;
}

}  // namespace engine
