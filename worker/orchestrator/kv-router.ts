// The KV-aware router's index: which replica holds which prefix-cache block, from each replica's KV cache events
// (stored adds a block, removed deletes it, created — a fresh cache — forgets the replica's blocks) and from the
// router's own routing (a routed prompt's blocks are noted at once: events arrive later). A
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

  /** The router's own note, before any event says so: a prompt routed to `replica` will have its full blocks
   * stored there as the replica computes it (a later `removed` or `created` event corrects it). */
  add(replica: number, hashes: readonly string[]): void {
    const blocks = this.held[replica];
    if (blocks) for (const h of hashes) blocks.add(h);
  }

  /** A replica that died: its cache is gone. */
  forget(replica: number): void {
    this.held[replica]?.clear();
  }

  /** Per replica, how many leading full blocks of `tokens` it holds. */
  matches(tokens: readonly number[], tokensPerBlock: number): number[] {
    return this.matchHashes(promptBlockHashes(tokens, tokensPerBlock));
  }

  /** Per replica, how many of `hashes` (a prompt's full blocks, first first) it holds from the first on. */
  matchHashes(hashes: readonly string[]): number[] {
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

/** The router's choice among live replicas: the longest cached prefix, then the fewest outstanding requests, then
 * the lowest index (least-load passes `prefix` all zeros). Returns -1 when none is live. */
export function chooseReplica(live: readonly boolean[], outstanding: readonly number[], prefix: readonly number[]): number {
  let best = -1;
  for (let r = 0; r < live.length; r += 1) {
    if (!live[r]) continue;
    if (best < 0 || prefix[r]! > prefix[best]! || (prefix[r] === prefix[best] && outstanding[r]! < outstanding[best]!)) best = r;
  }
  return best;
}

/** The kv router's choice among live replicas, in KV blocks of work: a replica's cost is the blocks of this prompt
 * it would have to compute (those its cache lacks) plus the new work its requests in flight brought (their uncached
 * prompt blocks and asked-for outputs), so a cached prefix wins only while the replica holding it is not busier by
 * more than the prefix saves — routing every conversation of a shared system prompt to one replica would leave the
 * other idle.
 * Ties: the longer prefix, then fewer requests in flight, then the lowest index. -1 when none is live. */
export function chooseByCost(live: readonly boolean[], promptBlocks: number, prefix: readonly number[], loadBlocks: readonly number[],
  outstanding: readonly number[]): number {
  let best = -1;
  let bestCost = Infinity;
  for (let r = 0; r < live.length; r += 1) {
    if (!live[r]) continue;
    const cost = promptBlocks - prefix[r]! + loadBlocks[r]!;
    const better = cost < bestCost || (cost === bestCost && (prefix[r]! > prefix[best]!
      || (prefix[r] === prefix[best] && outstanding[r]! < outstanding[best]!)));
    if (best < 0 || better) {
      best = r;
      bestCost = cost;
    }
  }
  return best;
}

/** round-robin: the first live replica after `last` (cyclically); -1 when none is live. */
export function nextReplica(live: readonly boolean[], last: number): number {
  for (let i = 1; i <= live.length; i += 1) {
    const r = (((last + i) % live.length) + live.length) % live.length;
    if (live[r]) return r;
  }
  return -1;
}
