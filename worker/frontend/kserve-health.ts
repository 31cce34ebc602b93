// KServe v2 health and metadata: liveness, readiness (every rank loaded and warmed up), server and model metadata,
// model readiness and config.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { packageRoot } from '../common/package-root.js';
import { type Route, sendJson } from './http-server.js';
import { requireReady, type ModelCatalog } from './model-catalog.js';
import { modelConfigJson, modelMetadata, type ServedModel } from './model-repository.js';
import type { ServingContext } from './serving-context.js';

const VERSION = (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
const MODEL = '([^/]+)';
const VERSION_PART = '(?:/versions/([^/]+))?';

/** GET /v2 and gRPC ServerMetadata: who we are and the extensions we serve. */
export function serverMetadata(): { name: string; version: string; extensions: string[] } {
  return { name: 'trtllm-launch', version: VERSION, extensions: ['model_configuration', 'generate', 'statistics'] };
}

/** GET .../config and gRPC ModelConfig: the model's Triton-style config with this server's limits. */
export function modelConfigFor(ctx: ServingContext, model: ServedModel): ReturnType<typeof modelConfigJson> {
  return modelConfigJson(model, {
    maxBatchSize: ctx.maxBatchSize, maxBeamWidth: ctx.executor.limits.maxBeamWidth, vocabSize: ctx.executor.modelConfig.vocabSize,
  });
}

export function healthRoutes(catalog: ModelCatalog, openHealth: boolean): Route[] {
  const empty = (status: number) => (c: { res: import('node:http').ServerResponse }) => {
    c.res.writeHead(status, { 'content-length': 0 });
    c.res.end();
  };
  return [
    { method: 'GET', path: /^\/v2\/health\/live$/, style: 'kserve', open: openHealth, handle: empty(200) },
    {
      method: 'GET', path: /^\/v2\/health\/ready$/, style: 'kserve', open: openHealth,
      handle: (c) => empty(catalog.serverReady() ? 200 : 503)(c),
    },
    {
      method: 'GET', path: /^\/v2\/?$/, style: 'kserve',
      handle: (c) => sendJson(c.res, 200, serverMetadata()),
    },
    {
      method: 'GET', path: new RegExp(`^/v2/models/${MODEL}${VERSION_PART}/ready$`), style: 'kserve', open: openHealth,
      handle: (c) => {
        const { ctx } = catalog.resolve(c.params[0]!, c.params[1]);
        empty(ctx.isReady() ? 200 : 503)(c);
      },
    },
    {
      method: 'GET', path: new RegExp(`^/v2/models/${MODEL}${VERSION_PART}/config$`), style: 'kserve',
      handle: (c) => {
        const { ctx, model } = catalog.resolve(c.params[0]!, c.params[1]);
        requireReady(ctx, model.name);
        sendJson(c.res, 200, modelConfigFor(ctx, model));
      },
    },
    {
      method: 'GET', path: new RegExp(`^/v2/models/${MODEL}${VERSION_PART}$`), style: 'kserve',
      handle: (c) => {
        const { ctx, model } = catalog.resolve(c.params[0]!, c.params[1]);
        requireReady(ctx, model.name);  // Triton answers metadata of an unavailable model with an error, not stale data
        sendJson(c.res, 200, modelMetadata(model));
      },
    },
    {
      // KServe's repository extension: every model with its state, and why an unavailable one is so.
      method: 'POST', path: /^\/v2\/repository\/index$/, style: 'kserve',
      handle: (c) => sendJson(c.res, 200, catalog.index()),
    },
  ];
}
