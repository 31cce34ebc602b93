// POST /kv_cache_events (GET too): the KV cache events drained from the executor, as the JSON list trtllm-serve
// returns, so a KV-aware router written for trtllm-serve reads ours. [] when events are off (trtllm-serve's answer
// too). Block hashes are decimal strings: exact 64-bit values, which a JS number is not past 2^53 (addon-types.ts).
// In orchestrator mode every model's events, each asked of its worker group, in model order; each event carries
// "model" (ours, not TensorRT-LLM's) since event ids and hashes are per model.
import type { KvCacheEvent } from '../binding/addon-types.js';
import { type Route, sendJson } from './http-server.js';
import type { ModelCatalog } from './model-catalog.js';

// TensorRT-LLM's defaults for what this engine does not have: one cache level, no retention priorities.
const CACHE_LEVEL = 0;
const DEFAULT_PRIORITY = 35;

/** One event in TensorRT-LLM's KVCacheEventSerializer shape. */
export function kvCacheEventJson(e: KvCacheEvent): Record<string, unknown> {
  let data: Record<string, unknown>;
  switch (e.type) {
    case 'created':
      data = { type: 'created', num_blocks_per_cache_level: [e.numBlocks] };
      break;
    case 'stored':
      data = {
        type: 'stored',
        parent_hash: e.parentHash,
        blocks: e.blocks.map((b) => ({
          type: 'stored_block',
          block_hash: b.blockHash,
          tokens: b.tokens.map((id) => ({ type: 'unique_token', token_id: id, token_extra_id: 0 })),
          lora_id: null,
          cache_level: CACHE_LEVEL,
          priority: DEFAULT_PRIORITY,
        })),
      };
      break;
    case 'removed':
      data = { type: 'removed', block_hashes: e.blockHashes };
      break;
  }
  return { event_id: e.eventId, data, window_size: e.windowSize };
}

export function kvCacheEventRoutes(catalog: ModelCatalog): Route[] {
  const handle: Route['handle'] = async (c) => {
    if (!catalog.multiModel) {
      const ctx = catalog.contexts()[0];
      sendJson(c.res, 200, ctx ? (await ctx.executor.getLatestKvCacheEvents()).map(kvCacheEventJson) : []);
      return;
    }
    // Every group asked at once: the answer waits for the slowest live one (a bounded wait each, remote-executor.ts).
    const perModel = await Promise.all(catalog.contexts().map(async (ctx) => ({
      model: ctx.servedModelName, events: await ctx.executor.getLatestKvCacheEvents(),
    })));
    sendJson(c.res, 200, perModel.flatMap(({ model, events }) => events.map((e) => {
      const { event_id: eventId, ...rest } = kvCacheEventJson(e);
      return { event_id: eventId, model, ...(e.replica === undefined ? {} : { replica: e.replica }), ...rest };
    })));
  };
  return [
    { method: 'POST', path: /^\/kv_cache_events$/, style: 'openai', handle },
    { method: 'GET', path: /^\/kv_cache_events$/, style: 'openai', handle },
  ];
}
