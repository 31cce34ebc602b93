// The model interface the executor drives: one forward pass over a batch of sequence chunks whose keys and
// values live in a paged KV pool owned by the model. The executor decides which blocks each sequence uses
// (kv-cache.h); the model only reads and writes the blocks it is handed.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model-config.h"

namespace engine {

// Where this rank sits in the tensor/pipeline grid. Only tp=1, pp=1 exist until leader mode lands.
struct ShardInfo {
  int32_t tp_rank = 0, tp_size = 1;
  int32_t pp_rank = 0, pp_size = 1;
};

// One sequence's slice of an iteration: `tokens` are new (prefill chunk, or the one decode token), placed at
// positions [past_len, past_len + tokens.size()). `block_ids` covers positions [0, past_len + tokens.size()):
// position p lives in block block_ids[p / tokens_per_block] at slot p % tokens_per_block.
struct SequenceChunk {
  std::vector<int32_t> tokens;
  int32_t past_len = 0;
  std::vector<int32_t> block_ids;
  bool all_logits = false;  // true: a logits row for every token of the chunk; false: only for the last token
};

struct ForwardOutput {
  std::vector<float> logits;           // [n_rows, vocab_size], rows of all chunks concatenated in chunk order
  std::vector<int32_t> first_row;      // per chunk: index of its first row in `logits`
  int32_t vocab_size = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;

  // Bytes of KV storage one token takes on this rank (all layers, K and V, fp32).
  virtual size_t kv_bytes_per_token() const = 0;
  // (Re)allocates the KV pool: num_blocks blocks of tokens_per_block tokens. Contents start undefined.
  virtual void allocate_kv(int32_t num_blocks, int32_t tokens_per_block) = 0;
  // Bytes held by weights on this rank (for memory stats).
  virtual size_t weight_bytes() const = 0;

  // Runs every chunk as one batch (one GEMM per weight for all tokens of the iteration), writes K/V of the new
  // tokens into their blocks, and returns logits. Chunks of one call never share a block they write.
  virtual void forward(const std::vector<SequenceChunk>& chunks, ForwardOutput& out) = 0;
};

struct LoadOptions {
  ShardInfo shard;
  int32_t num_threads = 0;  // 0: all cores
  // progress(bytes_done, bytes_total) during weight loading; may be empty.
  void (*progress)(void* user, uint64_t done, uint64_t total) = nullptr;
  void* progress_user = nullptr;
};

// Loads a Hugging Face checkpoint directory (config.json + model.safetensors or model.safetensors.index.json).
// Throws EngineError naming the file / tensor / architecture on any problem.
std::unique_ptr<Model> load_model(const std::string& checkpoint_dir, const LoadOptions& options);

}  // namespace engine
