// The HTTP layer on node:http — no framework: we need a dozen routes, a body limit, SSE and a disconnect signal,
// and node:http gives those with the least per-request cost (the frontend's overhead budget is ~100 µs/request).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { timingSafeEqual } from 'node:crypto';

import { readBody, parseJsonObject } from './http-body.js';
import { errorBody, HttpError, toHttpError } from './http-errors.js';

export type ApiStyle = 'kserve' | 'openai';

export interface RouteContext {
  req: IncomingMessage;
  res: ServerResponse;
  params: string[];                    // the route pattern's capture groups, URI-decoded
  signal: AbortSignal;                 // aborted when the client goes away before the response ends
  json(): Promise<Record<string, unknown>>;
}

export interface Route {
  method: 'GET' | 'POST';
  path: RegExp;
  style: ApiStyle;
  open?: boolean;                      // reachable without the API key (health, when so configured)
  handle(context: RouteContext): Promise<void> | void;
}

export interface HttpServerOptions {
  routes: Route[];
  maxBodyBytes: number;
  apiKey?: string | undefined;
  onError?: (error: unknown, req: IncomingMessage) => void;   // 5xx only: bugs, not bad requests
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) {
    if (!res.writableEnded) res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export function sendError(res: ServerResponse, error: HttpError, style: ApiStyle): void {
  if (res.headersSent) {
    // Mid-stream: the status is gone; say it as one last event, the way SSE clients can see it.
    if (!res.writableEnded) res.end(`data: ${JSON.stringify(errorBody(error, style))}\n\n`);
    return;
  }
  if (error.status === 401) res.setHeader('www-authenticate', 'Bearer');
  sendJson(res, error.status, errorBody(error, style));
}

/** Bearer-token check in constant time, so the key cannot be guessed byte by byte from response times. */
export function authorized(header: string | undefined, apiKey: string): boolean {
  if (!header?.startsWith('Bearer ')) return false;
  const given = Buffer.from(header.slice(7).trim());
  const expected = Buffer.from(apiKey);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

function styleOf(path: string): ApiStyle {
  return path.startsWith('/v1') ? 'openai' : 'kserve';
}

function decodeParams(match: RegExpExecArray): string[] {
  return match.slice(1).map((p) => {
    try {
      return decodeURIComponent(p ?? '');
    } catch {
      throw new HttpError(400, `the path segment ${JSON.stringify(p)} is not valid percent-encoding`);
    }
  });
}

export function createHttpServer(options: HttpServerOptions): Server {
  const server = createServer((req, res) => {
    void dispatch(options, req, res);
  });
  server.keepAliveTimeout = 65_000;  // longer than common load balancers' idle timeout
  return server;
}

async function dispatch(options: HttpServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  let style = styleOf(path);
  try {
    let pathMatched = false;
    for (const route of options.routes) {
      const match = route.path.exec(path);
      if (!match) continue;
      pathMatched = true;
      if (route.method !== req.method) continue;
      style = route.style;
      if (options.apiKey && !route.open && !authorized(req.headers.authorization, options.apiKey)) {
        throw new HttpError(401, 'missing or wrong API key: send the header "Authorization: Bearer <key>"');
      }
      const aborter = new AbortController();
      res.once('close', () => { if (!res.writableFinished) aborter.abort(); });
      await route.handle({
        req, res, params: decodeParams(match), signal: aborter.signal,
        json: async () => parseJsonObject(await readBody(req, options.maxBodyBytes)),
      });
      return;
    }
    if (pathMatched) throw new HttpError(405, `method ${req.method} is not allowed on ${path}`);
    throw new HttpError(404, `no route for ${req.method} ${path}`);
  } catch (error) {
    const http = toHttpError(error);
    if (http.status >= 500 && http.status !== 503) options.onError?.(error, req);
    sendError(res, http, style);
    // A body we refused to read must not be parsed as the next request on this connection.
    if (http.status === 413) res.once('finish', () => req.socket.destroy());
  }
}
