// Paged KV block manager: bookkeeping only. The Model owns the storage (Model::allocate_kv); this class decides
// which block ids each sequence uses. Blocks are ref-counted from the start so prefix reuse (hashed chains of full
// blocks shared between sequences, an LRU of unreferenced cached blocks) can be layered on without changing the
// allocation API: a shared block is simply one whose ref_count > 1.
//
// Units: "tokens" are positions in a sequence; a block holds tokens_per_block consecutive positions.
#pragma once
#include <cstdint>
#include <vector>

#include "request.h"

namespace engine {

// Positions [0, num_tokens) of one sequence: position p lives in table[p / tokens_per_block].
using BlockTable = std::vector<int32_t>;

class KvCacheManager {
 public:
  KvCacheManager() = default;
  KvCacheManager(int32_t num_blocks, int32_t tokens_per_block);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t tokens_per_block() const { return tokens_per_block_; }
  int32_t num_free_blocks() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t num_used_blocks() const { return num_blocks() - num_free_blocks(); }

  // Blocks needed to hold num_tokens positions (ceil division; 0 tokens -> 0 blocks).
  int32_t blocks_for_tokens(int64_t num_tokens) const;

  // Grows `table` so it covers num_tokens positions. All-or-nothing: returns false and changes nothing when the
  // pool lacks the blocks (the scheduler normally guarantees this never happens).
  bool ensure_capacity(BlockTable& table, int64_t num_tokens);
  // Drops the sequence's reference to every block of `table` and clears it. Blocks whose count reaches 0 return
  // to the free pool.
  void release(BlockTable& table);

  KvCacheStats stats() const;

 private:
  struct Block {
    int32_t ref_count = 0;
    // Prefix reuse will add: content hash of the chain up to this block, parent block, LRU position.
  };
  int32_t allocate_block();
  void unref_block(int32_t id);

  int32_t tokens_per_block_ = 1;
  std::vector<Block> blocks_;
  // Free block ids, used as a stack; the back is handed out next. Initialised so low ids go first, which keeps
  // allocation deterministic (useful in tests and when comparing runs).
  std::vector<int32_t> free_list_;
  int64_t alloc_total_blocks_ = 0;  // every block handed to a sequence (new or, later, reused)
  int64_t alloc_new_blocks_ = 0;    // blocks taken from the free pool (vs reused cached blocks)
  int64_t reused_blocks_ = 0;       // stays 0 until prefix reuse lands
};

}  // namespace engine
