// Starts a real server (HTTP + metrics on ephemeral ports) on a fixture model for a test file, and small HTTP
// helpers that read SSE streams and Prometheus text.
import type { NativeRequest } from '../../worker/binding/addon-types.js';
import { Executor } from '../../worker/executor/executor.js';
import type { Logger } from '../../worker/log.js';
import type { ServeOptions } from '../../worker/options/serve-options.js';
import { startServer, type RunningServer } from '../../worker/serve.js';
import { fixtureDir } from './fixtures.js';

export { waitFor } from './wait.js';

export interface TestServer {
  server: RunningServer;
  base: string;          // http://127.0.0.1:port
  metricsBase: string;
}

/** `log`: where the server's log lines go (default: stderr at the level of `overrides.logLevel`, else errors). */
export async function startTestServer(
  t: { teardown(fn: () => unknown): void }, overrides: Partial<ServeOptions> = {}, log?: Logger,
): Promise<TestServer> {
  const server = await startServer({
    model: fixtureDir('tiny-gpt2'), host: '127.0.0.1', httpPort: 0, metricsPort: 0, authHealth: false,
    authMetrics: false, maxBodyBytes: 1024 * 1024, drainTimeoutMs: 2000, logLevel: 'error', threads: 1,
    tokensPerBlock: 16, ...overrides,
  }, log);
  t.teardown(() => server.close());
  return { server, base: `http://127.0.0.1:${server.httpPort}`, metricsBase: `http://127.0.0.1:${server.metricsPort}` };
}

/** The executor behind an in-process test server: a local Executor, with its test hold (holdIterations). */
export function localExecutor(server: RunningServer): Executor {
  const executor = server.context.executor;
  if (!(executor instanceof Executor)) throw new Error('the test server does not run a local Executor');
  return executor;
}

/** Every request the executor is given from now on, in order (onEnqueue: told of each after it is queued). */
export function recordRequests(executor: Executor, onEnqueue?: (request: NativeRequest) => void): NativeRequest[] {
  const seen: NativeRequest[] = [];
  const enqueue = executor.enqueue.bind(executor);
  executor.enqueue = (request) => {
    seen.push(request);
    const id = enqueue(request);
    onEnqueue?.(request);
    return id;
  };
  return seen;
}

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: any }> {
  const res = await fetch(url, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } });
  const text = await res.text();
  let json: unknown = text;
  try { json = JSON.parse(text); } catch { /* not JSON: keep the text */ }
  return { status: res.status, json };
}

/** The `data:` payloads of an SSE body, parsed as JSON where they are JSON. */
export function parseSse(body: string): any[] {
  return body.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => {
    const data = e.slice(6);
    try { return JSON.parse(data); } catch { return data; }
  });
}

export async function postSse(url: string, body: unknown): Promise<{ status: number; events: any[] }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, events: parseSse(await res.text()) };
}

export interface Sample { name: string; labels: Record<string, string>; value: number }

/** A strict-enough parser of Prometheus' text format: families with their TYPE, and samples. */
export function parsePrometheus(text: string): { types: Map<string, string>; samples: Sample[] } {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const type = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type) { types.set(type[1]!, type[2]!); continue; }
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`unparseable metrics line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    const value = Number(m[3]);
    if (Number.isNaN(value) && m[3] !== 'NaN') throw new Error(`bad value in: ${line}`);
    samples.push({ name: m[1]!, labels, value });
  }
  return { types, samples };
}


/** The value of metric `name` in the sample whose labels include `labels` (NaN when there is none). Only that
 * metric's lines are read (other families, such as the process's own, may hold values parsePrometheus refuses). */
export async function metricValue(metricsBase: string, name: string, labels: Record<string, string> = { model: 'tensorrt_llm' }): Promise<number> {
  const text = await (await fetch(`${metricsBase}/metrics`)).text();
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    const m = /^(\S+?)\{(.*)\} (\S+)$/.exec(line);
    if (m && m[1] === name && wanted.every((w) => m[2]!.split(',').includes(w))) return Number(m[3]);
  }
  return NaN;
}

/** The models whose nv_inference_pending_request_count is not 0, as "model: value" (empty once every request
 * was answered), and how many models the gauge has. */
export async function leftPending(metricsBase: string): Promise<{ models: number; pending: string[] }> {
  const text = await (await fetch(`${metricsBase}/metrics`)).text();
  const lines = text.split('\n').filter((l) => l.startsWith('nv_inference_pending_request_count{'));
  const pending = lines.filter((l) => !l.endsWith(' 0')).map((l) => `${/model="([^"]*)"/.exec(l)?.[1]}: ${l.split(' ').at(-1)}`);
  return { models: lines.length, pending };
}

/** A server's speculation counters: guesses checked and guesses kept (trtllm_spec_decode_*_tokens_total). */
export async function speculationCounts(metricsBase: string): Promise<{ drafted: number; accepted: number }> {
  return {
    drafted: await metricValue(metricsBase, 'trtllm_spec_decode_draft_tokens_total'),
    accepted: await metricValue(metricsBase, 'trtllm_spec_decode_accepted_tokens_total'),
  };
}
