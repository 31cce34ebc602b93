// KvCacheManager's prefix-reuse members: matching a prompt against cached full blocks, attaching them, and
// registering blocks as sequences fill them. The content bookkeeping itself is PrefixCache's (prefix-cache.h).
#include <algorithm>
#include <string>

#include "errors.h"
#include "kv-cache/kv-block-hash.h"
#include "kv-cache/kv-cache.h"

namespace engine {

int32_t KvCacheManager::probe_prefix(const TokenIds& tokens, int32_t max_tokens, int32_t* num_in_use,
                                     uint64_t root) const {
  if (num_in_use) *num_in_use = 0;
  if (!reuse_) return 0;
  const int32_t limit = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size())) / tokens_per_block_;
  if (limit <= 0) return 0;
  std::vector<int32_t> chain;
  prefix_.match(tokens.data(), limit, tokens_per_block_, chain, root);
  if (num_in_use) {
    for (int32_t id : chain)
      if (blocks_[static_cast<size_t>(id)].ref_count > 0) ++*num_in_use;
  }
  return static_cast<int32_t>(chain.size()) * tokens_per_block_;
}

int32_t KvCacheManager::attach_prefix(BlockTable& table, const TokenIds& tokens, int32_t max_tokens,
                                      uint64_t root) {
  if (!reuse_) return 0;
  if (!table.empty()) {
    // Attaching behind private blocks would break "position p lives in table[p / tokens_per_block]".
    throw EngineError(ErrorCode::internal, "KV cache: attach_prefix on a block table that already holds " +
                                               std::to_string(table.size()) + " blocks");
  }
  const int32_t limit = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size())) / tokens_per_block_;
  if (limit <= 0) return 0;
  std::vector<int32_t> chain;
  prefix_.match(tokens.data(), limit, tokens_per_block_, chain, root);
  for (int32_t id : chain) {
    Block& b = blocks_[static_cast<size_t>(id)];
    if (b.ref_count == 0) prefix_.take(id);  // cached, unreferenced: no longer evictable
    ++b.ref_count;
    table.push_back(id);
    ++alloc_total_blocks_;
    ++reused_blocks_;
  }
  return static_cast<int32_t>(chain.size()) * tokens_per_block_;
}

void KvCacheManager::commit_full_blocks(const BlockTable& table, const TokenIds& tokens, int32_t num_computed,
                                        uint64_t root) {
  if (!reuse_) return;
  const int64_t computed = std::min<int64_t>(num_computed, static_cast<int64_t>(tokens.size()));
  const size_t full = std::min(table.size(), static_cast<size_t>(computed / tokens_per_block_));
  // Hashed blocks form a prefix of the table (attached ones, then those committed in earlier iterations): walk
  // back to the last of them, then hash forward, each block chained to its parent.
  size_t first = full;
  // (Entries a sliding window released, -1, are all before the hashed ones: blocks are committed as soon as they
  // are full, before any release.)
  while (first > 0 && table[first - 1] >= 0 && !prefix_.is_hashed(table[first - 1])) --first;
  if (first > 0 && table[first - 1] < 0) return;
  // Events: one `stored` per run of blocks this call registered; a duplicate of a block another sequence holds
  // ends the run (the twin was reported when it was registered).
  size_t run = first;
  for (size_t i = first; i < full; ++i) {
    const uint64_t parent = i == 0 ? root : prefix_.hash_of(table[i - 1]);
    prefix_.on_full(table[i], parent, i == 0, tokens.data() + i * static_cast<size_t>(tokens_per_block_), tokens_per_block_);
    if (!prefix_.is_registered(table[i])) {
      if (events_ && i > run) record_stored(table.data() + run, i - run);
      run = i + 1;
    }
  }
  if (events_ && full > run) record_stored(table.data() + run, full - run);
}

void KvCacheManager::record_stored(const int32_t* ids, size_t n) {
  std::vector<KvStoredBlock> blocks(n);
  for (size_t i = 0; i < n; ++i) {
    blocks[i].block_hash = prefix_.hash_of(ids[i]);
    blocks[i].tokens = prefix_.tokens_of(ids[i]);
  }
  const uint64_t parent = prefix_.parent_hash_of(ids[0]);
  events_->record_stored(!prefix_.is_first(ids[0]), parent, std::move(blocks));
}

}  // namespace engine
