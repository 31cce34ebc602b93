// Paged KV block manager: bookkeeping only. The Model owns the storage (Model::allocate_kv); this class decides
// which block ids each sequence uses. Blocks are ref-counted from the start so prefix reuse (hashed chains of full
// blocks shared between sequences, an LRU of unreferenced cached blocks) can be layered on without changing the
// allocation API: a shared block is simply one whose ref_count > 1.
//
// Units: "tokens" are positions in a sequence; a block holds tokens_per_block consecutive positions.
#pragma once
#include <cstdint>
#include <vector>

#include "kv-cache/kv-block-hash.h"
#include "kv-cache/kv-cache-events.h"
#include "kv-cache/prefix-cache.h"
#include "scheduling/request.h"

namespace engine {

// Positions [0, num_tokens) of one sequence: position p lives in table[p / tokens_per_block].
using BlockTable = std::vector<int32_t>;

class KvCacheManager {
 public:
  KvCacheManager() = default;
  // enable_reuse: prefix reuse of full blocks (prefix-cache.h); off, blocks are freed as soon as unreferenced.
  // events: where to record what the prefix cache stores and evicts (kv-cache-events.h), starting with `created`;
  // null, or reuse off: nothing is recorded. Not owned; it must outlive this manager.
  KvCacheManager(int32_t num_blocks, int32_t tokens_per_block, bool enable_reuse = false,
                 KvCacheEventBuffer* events = nullptr);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t tokens_per_block() const { return tokens_per_block_; }
  // Cached blocks nobody references count as free (as in TensorRT-LLM): they are evicted on demand.
  int32_t num_free_blocks() const { return static_cast<int32_t>(free_list_.size()) + prefix_.num_evictable(); }
  int32_t num_used_blocks() const { return num_blocks() - num_free_blocks(); }

  // Blocks needed to hold num_tokens positions (ceil division; 0 tokens -> 0 blocks).
  int32_t blocks_for_tokens(int64_t num_tokens) const;

  // Grows `table` so it covers num_tokens positions. All-or-nothing: returns false and changes nothing when the
  // pool lacks the blocks (the scheduler normally guarantees this never happens).
  bool ensure_capacity(BlockTable& table, int64_t num_tokens);
  // Drops the sequence's reference to every block of `table` and clears it. Blocks whose count reaches 0 return
  // to the free pool. Entries of -1 (released by release_front) are skipped.
  void release(BlockTable& table);
  // Sliding windows (kv-window.h): drops the reference to table[0, first_kept) and marks those entries -1, so
  // "position p lives in table[p / tokens_per_block]" still holds for the positions kept.
  void release_front(BlockTable& table, int64_t first_kept);
  // Entries of `table` holding a block (not released).
  static int32_t blocks_held(const BlockTable& table);

  KvCacheStats stats() const;

  // Beam search (kv-cache-fork.cpp): beams of one request share the blocks they have in common and copy a block
  // only when they are about to write into it while another beam still reads it (copy-on-write).
  // share: one more reference to every block of `table` (a forked beam starts with its parent's table).
  void share(const BlockTable& table);
  int32_t ref_count(int32_t block) const;
  // Makes table[index] exclusively this table's: when the block is shared, a fresh block replaces it and the old
  // id is returned so the caller copies its contents (Model::copy_kv_block(old, table[index])); -1 when it was
  // already exclusive. Throws internal when no block is free (the scheduler reserved it, so that is a bug).
  int32_t make_writable(BlockTable& table, size_t index);

  // Prefix reuse (kv-cache-reuse.cpp); with reuse off, probe/attach match nothing and commit does nothing.
  bool reuse_enabled() const { return reuse_; }
  // Tokens of the longest cached chain of full blocks that starts `tokens`, at most max_tokens (rounded down to
  // whole blocks). *num_in_use, when given, gets how many of those blocks some sequence holds right now:
  // attaching those takes nothing from the free pool, while attaching a cached unreferenced one takes one.
  // `root` (kv-block-hash.h's kv_block_root) keeps the chains of different LoRA adapters apart, here and below.
  int32_t probe_prefix(const TokenIds& tokens, int32_t max_tokens, int32_t* num_in_use,
                       uint64_t root = kv_root_block_hash) const;
  // For a sequence holding no blocks: attaches that chain (one more reference each) and returns its tokens,
  // which the sequence then does not recompute.
  int32_t attach_prefix(BlockTable& table, const TokenIds& tokens, int32_t max_tokens,
                        uint64_t root = kv_root_block_hash);
  // After a forward pass wrote positions [0, num_computed): registers every block of `table` that is now full.
  void commit_full_blocks(const BlockTable& table, const TokenIds& tokens, int32_t num_computed,
                          uint64_t root = kv_root_block_hash);

 private:
  struct Block {
    int32_t ref_count = 0;
    // Content (hash, LRU position) lives in prefix_, indexed by the same block id.
  };
  int32_t allocate_block();
  void unref_block(int32_t id);
  // One `stored` event for blocks ids[0, n): registered, each the child of the one before it.
  void record_stored(const int32_t* ids, size_t n);

  int32_t tokens_per_block_ = 1;
  std::vector<Block> blocks_;
  // Free block ids, used as a stack; the back is handed out next. Initialised so low ids go first, which keeps
  // allocation deterministic (useful in tests and when comparing runs).
  std::vector<int32_t> free_list_;
  int64_t alloc_total_blocks_ = 0;  // every block handed to a sequence (new or reused)
  int64_t alloc_new_blocks_ = 0;    // blocks taken from the free pool (vs reused cached blocks)
  int64_t reused_blocks_ = 0;       // cached blocks attached by a prompt instead of being recomputed
  bool reuse_ = false;
  PrefixCache prefix_;              // empty (nothing evictable) unless reuse_
  KvCacheEventBuffer* events_ = nullptr;  // null unless reuse_ and events are asked for
};

}  // namespace engine
