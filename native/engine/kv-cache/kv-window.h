// KV blocks of a sequence whose every layer attends over at most the last `window` positions (model-config.h's
// kv_release_window): once the sequence has computed positions [0, n), its next token (position n) reads from
// n - window + 1 on, so the blocks wholly before that one are released (their table entries become -1). Pure
// arithmetic shared by the executor (what to release), the scheduler (what a step takes, what a lifetime may hold)
// and request validation, so the three agree. window 0: nothing is released.
#pragma once
#include <algorithm>
#include <cstdint>

namespace engine {

inline int64_t kv_blocks_for(int64_t tokens, int32_t tokens_per_block) {
  return tokens <= 0 ? 0 : (tokens + tokens_per_block - 1) / tokens_per_block;
}

// Table entries [0, this) are released once positions [0, num_computed) are computed.
inline int64_t kv_first_kept_block(int64_t num_computed, int32_t window, int32_t tokens_per_block) {
  if (window <= 0) return 0;
  const int64_t first_read = num_computed - window + 1;
  return first_read > 0 ? first_read / tokens_per_block : 0;
}

// Blocks held while covering positions [0, tokens), with positions [0, num_computed) computed before.
inline int64_t kv_blocks_held(int64_t tokens, int64_t num_computed, int32_t window, int32_t tokens_per_block) {
  return kv_blocks_for(tokens, tokens_per_block) - kv_first_kept_block(num_computed, window, tokens_per_block);
}

// The most blocks a sequence holds at once over a lifetime of `lifetime` positions whose chunks never exceed
// `max_chunk` positions: a chunk [p, p + n) reads from p - window + 1, so it spans window - 1 + n positions, which
// straddle at most one block more than they fill. A first chunk is at most the prompt (blocks_for(prompt)).
inline int64_t kv_lifetime_blocks(int64_t lifetime, int64_t max_chunk, int32_t window, int32_t tokens_per_block) {
  const int64_t all = kv_blocks_for(lifetime, tokens_per_block);
  if (window <= 0) return all;
  const int64_t span = static_cast<int64_t>(window) - 1 + std::max<int64_t>(1, max_chunk);
  return std::min(all, kv_blocks_for(span, tokens_per_block) + 1);
}

}  // namespace engine
