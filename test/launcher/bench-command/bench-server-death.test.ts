// `trtllm-launch bench` when the server dies under it, with real processes: a server (TRTLLM_TEST_HOOKS) holds its
// loop, so the bench's requests are in flight — the warm-up's, or the measured ones — when the test kills it with
// SIGKILL. Either way the bench ends with one clear line naming the URL and what happened, and a non-zero exit; a
// run in which every request failed is a non-zero exit too, never a "result".
import { join } from 'node:path';

import { execa, type ResultPromise } from 'execa';
import t from 'tap';

import { runBench, type BenchOptions } from '../../../launcher/bench-command/bench-run.js';
import { packageRoot } from '../../../worker/common/package-root.js';
import { fixtureDir } from '../../helpers/fixtures.js';
import { startTestServer } from '../../helpers/serving.js';
import { waitFor } from '../../helpers/wait.js';

const bin = join(packageRoot(), 'bin', 'trtllm-launch.js');

/** A one-rank server in its own process, its loop held before any iteration (nothing it is sent can finish). */
async function heldServer(t: { teardown(fn: () => unknown): void }): Promise<{ child: ResultPromise; base: string; grpc: string; active: () => Promise<number> }> {
  const child = execa(process.execPath, [bin, '--model', fixtureDir('tiny-gpt2'), '--world-size', '1', '--host', '127.0.0.1',
    '--http-port', '0', '--metrics-port', '0', '--grpc-port', '0', '--threads', '1'], { reject: false, all: true, env: { TRTLLM_TEST_HOOKS: '1' } });
  t.teardown(() => { child.kill('SIGKILL'); });
  let out = '';
  const ports = await new Promise<[string, string, string] | undefined>((resolve) => {
    child.all!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const port = (service: string) => new RegExp(`Started ${service} at [\\d.]+:(\\d+)`).exec(out)?.[1];
      const [http, metrics, grpc] = [port('HTTPService'), port('Metrics Service'), port('GRPCInferenceService')];
      if (http && metrics && grpc && out.includes('metrics: curl')) resolve([http, metrics, grpc]);
    });
    void child.then(() => resolve(undefined));
  });
  if (!ports) throw new Error(`the server did not start: ${out}`);
  const base = `http://127.0.0.1:${ports[0]}`;
  const held = await fetch(`${base}/test/hold`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ iterations: 0 }) });
  if (held.status !== 200) throw new Error(`POST /test/hold answered ${held.status}`);
  const active = async () => Number(/^nv_trt_llm_request_metrics\{[^}]*request_type="active"[^}]*\} (\S+)$/m
    .exec(await (await fetch(`http://127.0.0.1:${ports[1]}/metrics`)).text())?.[1]);
  return { child, base, grpc: `127.0.0.1:${ports[2]}`, active };
}

// What a connection to a killed server meets: refused once its port is gone, reset if it was still being torn down.
const GONE = '[^)]*(ECONNREFUSED|ECONNRESET|socket hang up)[^)]*';
// gRPC reports what its channel last met, which depends on where the channel was in its reconnect cycle when the
// server died: the socket error, or grpc-js's own words for a failed (re)connect.
const GRPC_GONE = '[^)]*(ECONNREFUSED|ECONNRESET|socket hang up|Failed to connect|Connection dropped)[^)]*';

const bench = (base: string, args: string[]) => execa(process.execPath, [bin, 'bench', 'token-norm-dist', '-u', base,
  '--input-mean', '8', '--output-mean', '4', '--no-progress', ...args], { reject: false, all: true });

t.test('the server dies during the warm-up: a clear error naming the URL, exit 1, no stack trace', async (t) => {
  const server = await heldServer(t);
  const run = bench(server.base, ['--num-requests', '4', '--warmup-requests', '2']);
  t.ok(await waitFor(async () => (await server.active()) === 1), 'the first warm-up request is in flight');
  server.child.kill('SIGKILL');
  const r = await run;
  t.equal(r.exitCode, 1, r.exitCode === 1 ? 'exit 1' : r.all);
  t.match(r.stderr, new RegExp(`^trtllm-launch bench: the server at ${server.base} went away during the warm-up \\(${GONE}\\); ` +
    `warm-up request 1 of 2 failed: ${server.base}/v2/models/tensorrt_llm/generate_stream: the connection broke mid-stream`));
  t.notMatch(r.all, /SocketError|\n\s+at /, 'one line, no stack trace');
});

for (const protocol of ['http', 'grpc'] as const) {
  t.test(`the server dies during the measurement (-i ${protocol}): the run stops with a clear error naming it, exit 1`, async (t) => {
    const server = await heldServer(t);
    const where = protocol === 'http' ? server.base : `${server.grpc} (gRPC)`;
    const run = bench(protocol === 'http' ? server.base : server.grpc, ['-i', protocol, '--num-requests', '40', '--concurrency', '3', '--warmup-requests', '0']);
    t.ok(await waitFor(async () => (await server.active()) === 3), 'three measured requests are in flight');
    server.child.kill('SIGKILL');
    const r = await run;
    t.equal(r.exitCode, 1, r.exitCode === 1 ? 'exit 1' : r.all);
    t.match(r.stderr, new RegExp(`^trtllm-launch bench: the server at ${where.replace(/[()]/g, '\\$&')} went away during the measurement ` +
      `\\(${protocol === 'http' ? GONE : GRPC_GONE}\\) after [0-3] of 40 requests had ended; the first failed request: `));
    t.notMatch(r.stdout, /Successful requests/, 'no summary passed off as a result');
  });
}

function options(url: string, o: Partial<BenchOptions> = {}): BenchOptions {
  return {
    url, protocol: 'http', offline: false, model: fixtureDir('tiny-gpt2'), numRequests: 3, arrivals: 'exponential',
    warmupRequests: 0, inputMean: 8, inputStdev: 0, outputMean: 4, outputStdev: 0, numConversations: 8, numTurns: 4, systemPromptLen: 0,
    seed: 1, endId: -1, json: false, perfTolerance: 0.1, progress: false, ...o,
  };
}

t.test('every request failed (the server is alive but refuses them all): exit 1 and the reason', async (t) => {
  const { base } = await startTestServer(t);
  const lines: string[] = [];
  // Longer than tiny-gpt2's 128 positions: the server refuses each request with a 400.
  const result = await runBench('token-norm-dist', options(base, { outputMean: 1000 }), { out: (l) => lines.push(l), info: (l) => lines.push(l) });
  t.equal(result.exitCode, 1);
  t.match(result.summary, { total_requests: 3, successful_requests: 0, failed_requests: 3 });
  t.match(lines.join('\n'), new RegExp(`\\[ERROR\\] every request failed \\(3 of 3\\) against ${base}: .*answered 400`));
  const some = await runBench('token-norm-dist', options(base, { outputMean: 2 }), { out: () => {}, info: () => {} });
  t.equal(some.exitCode, 0, 'a run with successes exits 0');
});
