// HTTP for the client and bench tools over global fetch, with failures worded for the user: an unreachable
// server names the URL and the socket error, a rejected request names the endpoint, the status and the
// server's own message (KServe's {"error": "..."}).
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';

import { readSse } from './sse.js';
import { ToolError } from './tool-error.js';

/** The root of the server (no trailing slash); accepts `host:port` as Triton's clients do (-u localhost:8000). */
export function normalizeUrl(url: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(url) ? url : `http://${url}`;
  let parsed: URL;
  try {
    parsed = new URL(withScheme);
  } catch {
    throw new ToolError(`--url must be an http(s) URL or host:port, got "${url}"`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ToolError(`--url must use http or https, got "${url}" (for gRPC, add -i grpc and give host:port)`);
  }
  return withScheme.replace(/\/+$/, '');
}

function unreachable(url: string, error: unknown): ToolError {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const why = cause?.code ?? cause?.message ?? (error as Error).message;
  return new ToolError(`cannot reach ${url} (${why}); is the server running and --url right?`);
}

async function send(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (error) {
    if ((error as Error).name === 'AbortError') throw error;
    throw unreachable(url, error);
  }
}

async function rejection(url: string, res: Response): Promise<ToolError> {
  const text = await res.text().catch(() => '');
  let message = text;
  try {
    const body = JSON.parse(text) as { error?: unknown };
    if (typeof body.error === 'string') message = body.error;
    else if (body.error && typeof (body.error as { message?: unknown }).message === 'string') message = (body.error as { message: string }).message;
  } catch { /* not JSON: the text as is */ }
  return new ToolError(`${url} answered ${res.status}: ${message.trim() || res.statusText}`);
}

export async function getJson(url: string, signal?: AbortSignal): Promise<unknown> {
  const res = await send(url, signal ? { signal } : {});
  if (!res.ok) throw await rejection(url, res);
  return res.json();
}

export async function postJson(url: string, body: unknown, signal?: AbortSignal): Promise<unknown> {
  const res = await send(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' }, ...(signal ? { signal } : {}) });
  if (!res.ok) throw await rejection(url, res);
  return res.json();
}

/** POSTs to a generate_stream endpoint and yields its events; an `{"error": ...}` event throws, and so does a
 * connection that breaks before the stream's end (the server died or cut it), as a ToolError naming the URL. */
export async function* postStream(url: string, body: unknown, signal?: AbortSignal): AsyncGenerator<Record<string, unknown>> {
  const res = await send(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' }, ...(signal ? { signal } : {}) });
  if (!res.ok || !res.body) throw await rejection(url, res);
  const events = readSse(res.body);
  for (;;) {
    let next: IteratorResult<unknown>;
    try {
      next = await events.next();
    } catch (error) {
      if ((error as Error).name === 'AbortError') throw error;
      throw new ToolError(`${url}: the connection broke mid-stream (${socketCause(error)}); the server closed it or died`);
    }
    if (next.done) return;
    if (typeof next.value !== 'object' || next.value === null) continue;
    const e = next.value as Record<string, unknown>;
    if (e.error !== undefined) throw new ToolError(`${url} failed mid-stream: ${typeof e.error === 'string' ? e.error : JSON.stringify(e.error)}`);
    yield e;
  }
}

/** undici reports a lost connection as "TypeError: terminated" with the socket's error as its cause. */
function socketCause(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return [cause?.code, cause?.message ?? (error as Error).message].filter(Boolean).join(': ');
}

/**
 * Whether the server still answers at all (any status of /v2/health/live); the socket error when it does not. On a
 * connection of its own (no keep-alive pool): a pooled connection the dead server had left open would fail
 * differently, and one a live server had closed while idle must not pass for a dead server.
 */
export function liveness(base: string): Promise<string | undefined> {
  const url = new URL(`${base}/v2/health/live`);
  const get = url.protocol === 'https:' ? httpsGet : httpGet;
  return new Promise((resolve) => {
    const req = get(url, { agent: false, timeout: 60_000 }, (res) => {
      res.resume();
      resolve(undefined);
    });
    req.once('timeout', () => req.destroy(new Error('no answer within 60 s')));
    req.once('error', (error) => resolve(error.message));
  });
}

/** Waits until /v2/health/ready answers 200, or throws naming the URL. */
export async function checkReady(base: string): Promise<void> {
  const url = `${base}/v2/health/ready`;
  const res = await send(url, {});
  await res.body?.cancel();
  if (res.status !== 200) throw new ToolError(`${url} answered ${res.status}: the server is not ready (loading, warming up or draining)`);
}
