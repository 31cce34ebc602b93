// What orchestrator mode adds per request and per streamed token: the same model served in leader mode
// (`trtllm-launch --model M`, one rank) and in orchestrator mode (`--multi-model` with a one-model repository, the
// model on a spawned worker group), measured in the same run with the same client: sequential 1-token requests
// (end-to-end latency percentiles) and streamed 64-token requests (gaps between tokens). The added latency is the
// difference of the two; the goal is at most 1 ms at p50 per request.
//   node dist/bench/orchestrator-overhead.js [--requests 300] [--streams 20] [--model <dir>]
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { execa, type ResultPromise } from 'execa';

import { percentile as pct } from '../launcher/bench-command/statistics.js';
import { packageRoot } from '../worker/common/package-root.js';
import { freePort } from '../test/helpers/free-port.js';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : fallback;
};
const REQUESTS = Number(arg('--requests', '300'));
const STREAMS = Number(arg('--streams', '20'));
const MODEL = arg('--model', join(packageRoot(), 'test', 'fixtures', 'models', 'tiny-llama'));
const BIN = join(packageRoot(), 'bin', 'trtllm-launch.js');


async function start(args: string[]): Promise<{ child: ResultPromise; base: string }> {
  const port = await freePort();
  const metrics = await freePort();
  const grpc = await freePort();
  const child = execa('node', [BIN, ...args, '--http-port', String(port), '--metrics-port', String(metrics), '--grpc-port', String(grpc), '--threads', '1', '--log-level', 'warn'],
    { reject: false, all: true });
  let all = '';
  await new Promise<void>((resolve, reject) => {
    child.all!.on('data', (c: Buffer) => {
      all += c.toString();
      if (/ready after|Started HTTPService/.test(all)) resolve();
    });
    void child.then(() => reject(new Error(`server exited before ready:\n${all}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i += 1) {
    if ((await fetch(`${base}/v2/health/ready`).catch(() => undefined))?.status === 200) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, base };
}

async function oneToken(base: string, model: string): Promise<number[]> {
  const out: number[] = [];
  const body = JSON.stringify({ text_input: 'What is machine learning?', max_tokens: 1 });
  for (let i = 0; i < REQUESTS + 20; i += 1) {
    const t0 = performance.now();
    const r = await fetch(`${base}/v2/models/${model}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    await r.text();
    if (r.status !== 200) throw new Error(`status ${r.status}`);
    if (i >= 20) out.push(performance.now() - t0);  // the first 20 warm up both sides
  }
  return out;
}

async function streamGaps(base: string, model: string): Promise<number[]> {
  const gaps: number[] = [];
  const body = JSON.stringify({ text_input: 'The jury said', max_tokens: 64 });
  for (let i = 0; i < STREAMS; i += 1) {
    const r = await fetch(`${base}/v2/models/${model}/generate_stream`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const reader = r.body!.getReader();
    let last = 0;
    let buffered = '';
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) break;
      const now = performance.now();
      buffered += new TextDecoder().decode(chunk.value);
      const events = buffered.split('\n\n');
      buffered = events.pop()!;
      for (let e = 0; e < events.length; e += 1) {
        if (last > 0) gaps.push(now - last);
        last = now;
      }
    }
  }
  return gaps;
}

async function measure(label: string, args: string[], model: string) {
  process.stderr.write(`${label}: starting\n`);
  const server = await start(args);
  try {
    process.stderr.write(`${label}: ${REQUESTS} one-token requests, ${STREAMS} streams of 64 tokens\n`);
    const latency = await oneToken(server.base, model);
    const gaps = await streamGaps(server.base, model);
    return { latency, gaps };
  } finally {
    server.child.kill('SIGTERM');
    await server.child;
  }
}

const repo = mkdtempSync(join(tmpdir(), 'trtllm-bench-repo-'));
writeFileSync(join(repo, 'm.yaml'), `model: ${MODEL}\n`);
const leader = await measure('leader mode', ['--model', MODEL], 'ensemble');
const orchestrator = await measure('orchestrator mode', ['--multi-model', '--model-repo', repo, '--oversubscribe'], 'm');

const row = (name: string, xs: number[]) => `| ${name} | ${pct(xs, 50).toFixed(3)} | ${pct(xs, 90).toFixed(3)} | ${pct(xs, 99).toFixed(3)} |`;
const lines = [
  `model ${MODEL}, ${REQUESTS} sequential 1-token requests and ${STREAMS} x 64-token streams per mode`,
  '| measure (ms) | p50 | p90 | p99 |',
  '|---|---|---|---|',
  row('leader mode: request latency', leader.latency),
  row('orchestrator mode: request latency', orchestrator.latency),
  row('leader mode: gap between streamed tokens', leader.gaps),
  row('orchestrator mode: gap between streamed tokens', orchestrator.gaps),
  '',
  `added per request (p50): ${(pct(orchestrator.latency, 50) - pct(leader.latency, 50)).toFixed(3)} ms (goal <= 1 ms); ratio ${(pct(orchestrator.latency, 50) / pct(leader.latency, 50)).toFixed(2)}x leader mode`,
  `added per streamed token (p50): ${(pct(orchestrator.gaps, 50) - pct(leader.gaps, 50)).toFixed(3)} ms`,
];
process.stdout.write(`${lines.join('\n')}\n`);
