// The leader's per-iteration message to its followers (ARCHITECTURE.md, "The per-iteration protocol"): what every
// rank must do to its KV pool and which chunks to run. Followers reproduce every KV decision from it alone; they
// never schedule. Serialised as little-endian int32 words; the size per iteration is reported in the stats.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "model/model.h"

namespace engine {

enum class PlanOp : int32_t {
  allocate_kv = 1,   // args: num_blocks, tokens_per_block
  copy_kv_block = 2, // args: src, dst
  forward = 3,       // chunks; arg0: 1 when every logit row is a device argmax (Model::set_argmax_only)
  shutdown = 4,      // followers return
  load_lora = 5,     // args: slot; the adapter, whole (each rank keeps its slice)
  unload_lora = 6,   // args: slot
  head_guesses = 7,  // rows: logits rows of the last forward; the last stage's first tp rank sends back the guesses
};

struct IterationPlan {
  PlanOp op = PlanOp::forward;
  int32_t arg0 = 0, arg1 = 0;
  std::vector<SequenceChunk> chunks;  // forward only
  std::shared_ptr<const LoraAdapter> lora;  // load_lora only
  std::vector<int32_t> rows;                // head_guesses only
  // Forward with prompt tables: the model's vocab_size, which tells virtual tokens apart (not sent: every rank
  // knows it).
  int32_t vocab_size = 0;
};

// Words per chunk header: n_tokens, past_len, n_blocks, all_logits, window, lora_slot, n_tree; then the tokens,
// blocks and tree parents; then the prompt-table rows its virtual tokens use (p-tuning): their count (0: no table
// sent), the table's row count and width, and each row's index and floats, bit for bit. A follower's table holds
// those rows at their indices (zeros elsewhere, never read), so vocab_size + i embeds as on the leader. An adapter
// goes as its weights' (layer, module, rank, in, out) words followed by A's and B's floats, bit for bit; head-guess
// rows as their count and the rows.
std::vector<uint8_t> serialize_plan(const IterationPlan& plan);
// Throws EngineError(internal) on a malformed buffer (a protocol bug, never user input).
IterationPlan deserialize_plan(const std::vector<uint8_t>& bytes);

}  // namespace engine
