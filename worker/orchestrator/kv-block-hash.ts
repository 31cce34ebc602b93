// The engine's chained KV block hash (native/engine/kv-cache/kv-block-hash.cpp) in TypeScript, bit for bit: the
// KV-aware router hashes a prompt's full blocks here and looks them up among the block_hash values its replicas
// reported in their `stored` events. 64-bit arithmetic in BigInt; hashes are decimal strings, as events carry them.
const MASK = (1n << 64n) - 1n;
const GOLDEN = 0x9e3779b97f4a7c15n;

/** The parent of a sequence's first block (the engine's kv_root_block_hash). */
export const KV_ROOT_BLOCK_HASH = 0x6a09e667f3bcc908n;

function avalanche(x: bigint): bigint {
  x ^= x >> 30n;
  x = (x * 0xbf58476d1ce4e5b9n) & MASK;
  x ^= x >> 27n;
  x = (x * 0x94d049bb133111ebn) & MASK;
  x ^= x >> 31n;
  return x;
}

/** Hash of the block holding `tokens` whose parent block hashes to `parent` (KV_ROOT_BLOCK_HASH for the first). */
export function kvBlockHash(parent: bigint, tokens: readonly number[]): bigint {
  let h = avalanche(parent ^ ((GOLDEN * BigInt(tokens.length + 1)) & MASK));
  for (let i = 0; i < tokens.length; i += 1) {
    const t = BigInt(tokens[i]! >>> 0);  // the engine's static_cast<uint32_t>(int32)
    h = avalanche(h ^ ((t + (BigInt(i) << 32n)) & MASK));
  }
  return h;
}

/** The hashes (decimal strings) of a prompt's full blocks, first block first; a partial last block has none. */
export function promptBlockHashes(tokens: readonly number[], tokensPerBlock: number): string[] {
  const out: string[] = [];
  let parent = KV_ROOT_BLOCK_HASH;
  for (let start = 0; start + tokensPerBlock <= tokens.length; start += tokensPerBlock) {
    parent = kvBlockHash(parent, tokens.slice(start, start + tokensPerBlock));
    out.push(parent.toString());
  }
  return out;
}
