// Assembles the served API: every route of the HTTP port, and the metrics port's single route.
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';

import { authorized, createHttpServer, refuseConnect, type Route, sendError } from './http-server.js';
import { HttpError } from './http-errors.js';
import { generateRoutes } from './kserve-generate.js';
import { healthRoutes } from './kserve-health.js';
import { inferRoutes } from './kserve-infer.js';
import { kvCacheEventRoutes } from './kv-cache-events.js';
import type { ModelCatalog } from './model-catalog.js';
import { chatRoutes } from './openai-chat.js';
import { completionsRoutes } from './openai-completions.js';
import { modelsRoutes } from './openai-models.js';
import { type IterationHold, testHookRoutes } from './test-hooks.js';

export interface FrontendOptions {
  apiKey?: string | undefined;
  authHealth: boolean;           // health endpoints need the key too (default: open, for probes)
  authMetrics: boolean;          // /metrics needs the key too (default: open, for Prometheus)
  maxBodyBytes: number;
  allowAnyContentType?: boolean | undefined;   // --allow-any-content-type (content-type.ts)
  onError?: (error: unknown) => void;
  onClientGone?: (message: string) => void;
  testHooks?: IterationHold | undefined;   // only with TRTLLM_TEST_HOOKS=1 (test-hooks.ts)
}

export function frontendRoutes(catalog: ModelCatalog, options: FrontendOptions): Route[] {
  return [
    ...healthRoutes(catalog, !options.authHealth),
    ...generateRoutes(catalog),
    ...inferRoutes(catalog),
    ...modelsRoutes(catalog),
    ...completionsRoutes(catalog),
    ...chatRoutes(catalog),
    ...kvCacheEventRoutes(catalog),
    ...(options.testHooks ? testHookRoutes(options.testHooks) : []),
  ];
}

/** What the metrics port serves: one registry, brought up to date on each scrape. */
export interface MetricsEndpoint {
  registry: { contentType: string };
  scrape(): Promise<string>;
}

export function createFrontendServer(catalog: ModelCatalog, options: FrontendOptions): Server {
  return createHttpServer({
    routes: frontendRoutes(catalog, options),
    maxBodyBytes: options.maxBodyBytes,
    apiKey: options.apiKey,
    allowAnyContentType: options.allowAnyContentType,
    ...(options.onError ? { onError: options.onError } : {}),
    ...(options.onClientGone ? { onClientGone: options.onClientGone } : {}),
  });
}

/** The metrics port: GET /metrics in Prometheus' text format (what Triton serves on 8002). */
export function createMetricsServer(metrics: MetricsEndpoint, options: Pick<FrontendOptions, 'apiKey' | 'authMetrics'>): Server {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics') return sendError(res, new HttpError(404, `no route for ${req.method} ${path}; metrics are at /metrics`), 'kserve');
    if (req.method !== 'GET') {
      res.setHeader('allow', 'GET');
      return sendError(res, new HttpError(405, `method ${req.method} is not allowed on /metrics`), 'kserve');
    }
    if (options.apiKey && options.authMetrics && !authorized(req.headers.authorization, options.apiKey)) {
      return sendError(res, new HttpError(401, 'missing or wrong API key: send the header "Authorization: Bearer <key>"'), 'kserve');
    }
    metrics.scrape().then((text) => {
      res.writeHead(200, { 'content-type': metrics.registry.contentType });
      res.end(text);
    }, (error: unknown) => sendError(res, new HttpError(500, `metrics collection failed: ${String(error)}`), 'kserve'));
  });
  server.on('connect', (_req, socket: Socket) => refuseConnect(socket));
  server.keepAliveTimeout = 65_000;  // outlives a scrape interval, so scrapers reuse their connection
  return server;
}
