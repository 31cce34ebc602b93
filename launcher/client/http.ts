// HTTP for the client and bench tools over global fetch, with failures worded for the user: an unreachable
// server names the URL and the socket error, a rejected request names the endpoint, the status and the
// server's own message (KServe's {"error": "..."}).
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

/** POSTs to a generate_stream endpoint and yields its events; an `{"error": ...}` event throws. */
export async function* postStream(url: string, body: unknown, signal?: AbortSignal): AsyncGenerator<Record<string, unknown>> {
  const res = await send(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' }, ...(signal ? { signal } : {}) });
  if (!res.ok || !res.body) throw await rejection(url, res);
  for await (const event of readSse(res.body)) {
    if (typeof event !== 'object' || event === null) continue;
    const e = event as Record<string, unknown>;
    if (e.error !== undefined) throw new ToolError(`${url} failed mid-stream: ${typeof e.error === 'string' ? e.error : JSON.stringify(e.error)}`);
    yield e;
  }
}

/** Waits until /v2/health/ready answers 200, or throws naming the URL. */
export async function checkReady(base: string): Promise<void> {
  const url = `${base}/v2/health/ready`;
  const res = await send(url, {});
  await res.body?.cancel();
  if (res.status !== 200) throw new ToolError(`${url} answered ${res.status}: the server is not ready (loading, warming up or draining)`);
}
