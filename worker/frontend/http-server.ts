// The HTTP layer on node:http — no framework: we need a dozen routes, a body limit, SSE and a disconnect signal,
// and node:http gives those with the least per-request cost (the frontend's overhead budget is ~100 µs/request).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import type { Socket } from 'node:net';

import { checkJsonContentType } from './content-type.js';
import { readBody } from './http-body.js';
import { ClientGoneError, errorBody, HttpError, toHttpError } from './http-errors.js';
import { parseJsonBody } from './json-parse-pool.js';

export type ApiStyle = 'kserve' | 'openai';

export interface RouteContext {
  req: IncomingMessage;
  res: ServerResponse;
  params: string[];                    // the route pattern's capture groups, URI-decoded
  signal: AbortSignal;                 // aborted when the client goes away before the response ends
  json(): Promise<Record<string, unknown>>;
  /** The body's bytes whatever its Content-Type, under the same size limit: only for a body a browser cannot send
   * without a CORS preflight (KServe's binary inputs say their JSON's length in a header of their own). */
  raw(): Promise<Buffer>;
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
  allowAnyContentType?: boolean | undefined;   // read every body as JSON, whatever its type (content-type.ts)
  onError?: (error: unknown, req: IncomingMessage) => void;   // 5xx only: bugs, not bad requests
  onClientGone?: (message: string) => void;    // a client that left mid-request: a debug line, not an error
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

const BEARER = /^\s*bearer +/i;  // an auth scheme is case-insensitive (RFC 9110 §11.1): "bearer" is "Bearer"

/** Bearer-token check in constant time, so the key cannot be guessed byte by byte from response times. */
export function authorized(header: string | undefined, apiKey: string): boolean {
  const scheme = header === undefined ? null : BEARER.exec(header);
  if (!scheme) return false;
  const given = Buffer.from(header!.slice(scheme[0].length).trim());
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

// A response that went out before the request's body was read (a refusal: 401, 404, 405, 413, 415, ...) leaves the
// rest of the body arriving. Closing the socket then makes the kernel answer those bytes with a reset, and a client
// still writing — most HTTP libraries write the whole body before they read — loses the response to it. So the rest
// is read and dropped, and the connection stays usable; past these bounds the connection is cut instead.
const DISCARD_MAX_BYTES = 64 * 1024 * 1024;
const DISCARD_MAX_MS = 30_000;

function discardBody(req: IncomingMessage): void {
  if (req.complete || req.destroyed) return;
  let left = DISCARD_MAX_BYTES;
  const cut = () => req.socket.destroy();
  const timer = setTimeout(cut, DISCARD_MAX_MS).unref();
  req.on('data', (chunk: Buffer) => {
    left -= chunk.length;
    if (left < 0) cut();
  });
  req.once('close', () => clearTimeout(timer));
  req.resume();
}

/** CONNECT (a proxy tunnel) is no method of ours: 405 on the raw socket — node:http hands a CONNECT request over as
 * a socket and, when nobody takes it, closes it with no answer at all. */
export function refuseConnect(socket: Socket): void {
  const body = JSON.stringify(errorBody(new HttpError(405, 'method CONNECT is not allowed: this server is not a proxy'), 'kserve'));
  socket.on('error', () => {});  // a client gone already: nothing to answer
  socket.setTimeout(DISCARD_MAX_MS, () => socket.destroy());
  socket.end(`HTTP/1.1 405 Method Not Allowed\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`
    + `connection: close\r\n\r\n${body}`);
  socket.resume();  // whatever the client still sends is dropped; the socket closes when both sides have ended
}

export function createHttpServer(options: HttpServerOptions): Server {
  const awaitingContinue = new WeakSet<IncomingMessage>();
  const server = createServer((req, res) => {
    void dispatch(options, req, res, awaitingContinue.has(req));
  });
  // "Expect: 100-continue" (curl sends it with bodies over 1 MiB): the 100 goes out only once the body will be read,
  // so a body refused by its declared size, its type or the key is never sent at all. The request goes on as a
  // 'request' event, which every listener of the server sees (open-responses.ts counts it for a drain).
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    awaitingContinue.add(req);
    server.emit('request', req, res);
  });
  server.on('connect', (_req: IncomingMessage, socket: Socket) => refuseConnect(socket));  // a net.Socket: ours is no TLS server
  server.keepAliveTimeout = 65_000;  // longer than common load balancers' idle timeout
  return server;
}

async function dispatch(options: HttpServerOptions, req: IncomingMessage, res: ServerResponse, expectsContinue: boolean): Promise<void> {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  let style = styleOf(path);
  let continued = false;
  try {
    const allowed: string[] = [];
    for (const route of options.routes) {
      const match = route.path.exec(path);
      if (!match) continue;
      if (route.method !== req.method) {
        allowed.push(route.method);
        continue;
      }
      style = route.style;
      if (options.apiKey && !route.open && !authorized(req.headers.authorization, options.apiKey)) {
        throw new HttpError(401, 'missing or wrong API key: send the header "Authorization: Bearer <key>"');
      }
      const aborter = new AbortController();
      res.once('close', () => { if (!res.writableFinished) aborter.abort(); });
      const read = () => readBody(req, options.maxBodyBytes, () => {
        if (expectsContinue) res.writeContinue();
        continued = true;
      });
      await route.handle({
        req, res, params: decodeParams(match), signal: aborter.signal,
        json: async () => {
          if (!options.allowAnyContentType) checkJsonContentType(req.headers, path);
          return parseJsonBody(await read());
        },
        raw: read,
      });
      discardBody(req);
      return;
    }
    if (allowed.length > 0) {
      res.setHeader('allow', [...new Set(allowed)].join(', '));
      throw new HttpError(405, `method ${req.method} is not allowed on ${path}; allowed: ${[...new Set(allowed)].join(', ')}`);
    }
    throw new HttpError(404, `no route for ${req.method} ${path}`);
  } catch (error) {
    if (error instanceof ClientGoneError) {
      options.onClientGone?.(`${req.method} ${path}: ${error.message}`);
      return;
    }
    const http = toHttpError(error);
    if (http.status >= 500 && http.status !== 503) options.onError?.(error, req);
    // A client that waits for a 100 Continue sends no body now: the connection cannot carry another request.
    if (expectsContinue && !continued && !res.headersSent) res.setHeader('connection', 'close');
    sendError(res, http, style);
    if (!expectsContinue || continued) discardBody(req);
  }
}
