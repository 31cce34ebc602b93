// Content hashes of full KV blocks for prefix reuse. A block's hash is chained from its parent's hash and its own
// tokens, so equal hashes mean (up to 64-bit collisions, which the prefix cache also guards against by comparing
// tokens and parent hashes) that the whole prefix up to and including the block is the same: the K/V in the block
// depend on every earlier token, not only on the block's own.
#pragma once
#include <cstdint>

namespace engine {

// A strong 64-bit finaliser: every input bit flips about half the output bits, so nearby inputs (one token or one
// value different, tokens swapped) land far apart. The block hashes chain through it, as prompt-table.h's table keys do.
inline uint64_t hash_avalanche(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// The "parent" of a sequence's first block.
constexpr uint64_t kv_root_block_hash = 0x6a09e667f3bcc908ull;

// The root a sequence's blocks chain from: kv_root_block_hash for the base model, another one per LoRA adapter
// (lora_key: the executor's number for the adapter, 0: none) and per p-tuning table (table_key: its content hash,
// prompt-table.h; 0: none), since the same tokens give other K/V under an adapter or (virtual ones) another table.
uint64_t kv_block_root(uint64_t lora_key, uint64_t table_key = 0);

// Hash of the block holding `tokens[0, n)` whose parent block (the previous tokens_per_block positions) hashes to
// `parent` (kv_root_block_hash for the first block).
uint64_t kv_block_hash(uint64_t parent, const int32_t* tokens, int32_t n);

}  // namespace engine
