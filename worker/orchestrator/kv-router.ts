// The KV-aware router's index: which replica holds which prefix-cache block, rebuilt from each replica's KV cache
// events (stored adds a block, removed deletes it, created — a fresh cache — forgets the replica's blocks). A
// request's prompt is hashed block by block with the engine's chained hash (kv-block-hash.ts) and each replica
// scores the number of leading blocks it holds. Pure.
import type { KvCacheEvent } from '../binding/addon-types.js';
import { promptBlockHashes } from './kv-block-hash.js';

export class KvPrefixIndex {
  private readonly held: Set<string>[];

  constructor(replicas: number) {
    this.held = Array.from({ length: replicas }, () => new Set<string>());
  }

  apply(replica: number, events: readonly KvCacheEvent[]): void {
    const blocks = this.held[replica];
    if (!blocks) return;
    for (const e of events) {
      if (e.type === 'created') blocks.clear();
      else if (e.type === 'stored') for (const b of e.blocks) blocks.add(b.blockHash);
      else if (e.type === 'removed') for (const h of e.blockHashes) blocks.delete(h);
    }
  }

  /** A replica that died: its cache is gone. */
  forget(replica: number): void {
    this.held[replica]?.clear();
  }

  /** Per replica, how many leading full blocks of `tokens` it holds. */
  matches(tokens: readonly number[], tokensPerBlock: number): number[] {
    const hashes = promptBlockHashes(tokens, tokensPerBlock);
    return this.held.map((blocks) => {
      let n = 0;
      while (n < hashes.length && blocks.has(hashes[n]!)) n += 1;
      return n;
    });
  }

  size(replica: number): number {
    return this.held[replica]?.size ?? 0;
  }
}

/** The router's choice among live replicas: the longest cached prefix (kv), then the fewest outstanding requests,
 * then the lowest index. `prefix` is all zeros under least-load. Returns -1 when none is live. */
export function chooseReplica(live: readonly boolean[], outstanding: readonly number[], prefix: readonly number[]): number {
  let best = -1;
  for (let r = 0; r < live.length; r += 1) {
    if (!live[r]) continue;
    if (best < 0 || prefix[r]! > prefix[best]! || (prefix[r] === prefix[best] && outstanding[r]! < outstanding[best]!)) best = r;
  }
  return best;
}
