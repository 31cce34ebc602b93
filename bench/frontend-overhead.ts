// The frontend's own CPU cost under load: per request (parse, validate, tokenize, respond) and per streamed token
// (detokenize + SSE write), as the server process's CPU time minus the executor's iteration time (both read from
// the server itself: /proc and trtllm_iteration_seconds_total). Beside it, in the same run: end-to-end requests/s
// at max_tokens=1 and a bare node:http server answering the same JSON, the ceiling. Load: wrk if installed
// (`apt-get install wrk`), else autocannon.
//   node dist/bench/frontend-overhead.js [--seconds 10] [--connections 16] [--model <dir>]
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';

import { packageRoot } from '../worker/binding/load-addon.js';

const args = process.argv.slice(2);
const arg = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback;
};
const SECONDS = Number(arg('seconds', '10'));
const CONNECTIONS = Number(arg('connections', '16'));
const MODEL = arg('model', join(packageRoot(), 'test', 'fixtures', 'models', 'tiny-gpt2'));
const TICKS = 100;  // USER_HZ: /proc CPU times are in 1/100 s
const HAVE_WRK = ['/usr/bin/wrk', '/usr/local/bin/wrk'].some((p) => existsSync(p));

/** utime + stime of a process, or of one of its threads (the main thread's tid is the pid), in seconds. */
function cpuSeconds(pid: number, tid?: number): number {
  const stat = readFileSync(tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS;
}

async function scrape(port: number): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { connection: 'close' } })).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (m) out.set(m[1]! + (m[2] ?? ''), Number(m[3]));
  }
  return out;
}
const sum = (m: Map<string, number>, prefix: string) => [...m].filter(([k]) => k.startsWith(prefix)).reduce((a, [, v]) => a + v, 0);

interface Load { requests: number; seconds: number; rps: number; errors: number }

/** Runs the load generator against url with a POST body; returns completed requests and the rate. */
function load(url: string, body: string, seconds = SECONDS): Load {
  if (HAVE_WRK) {
    const script = join(tmpdir(), `wrk-${process.pid}.lua`);
    writeFileSync(script, `wrk.method = "POST"\nwrk.body = ${JSON.stringify(body)}\nwrk.headers["Content-Type"] = "application/json"\n`);
    const out = execFileSync('wrk', ['-t', '2', '-c', String(CONNECTIONS), '-d', `${seconds}s`, '-s', script, url], { encoding: 'utf8' });
    const requests = Number(/(\d+) requests in/.exec(out)?.[1] ?? 0);
    const took = Number(/requests in ([\d.]+)s/.exec(out)?.[1] ?? seconds);
    const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
    return { requests, seconds: took, rps: requests / took, errors: non2xx };
  }
  const out = execFileSync('npx', ['--no-install', 'autocannon', '-j', '-c', String(CONNECTIONS), '-d', String(seconds), '-m', 'POST',
    '-H', 'content-type=application/json', '-b', body, url], { encoding: 'utf8' });
  const r = JSON.parse(out) as { requests: { total: number; average: number }; non2xx: number; duration: number };
  return { requests: r.requests.total, seconds: r.duration, rps: r.requests.total / r.duration, errors: r.non2xx };
}

async function startTrtllm(): Promise<{ child: ChildProcess; http: number; metrics: number }> {
  const child = spawn('node', [join(packageRoot(), 'bin', 'trtllm-launch.js'), '--model', MODEL, '--http-port', '0',
    '--metrics-port', '0', '--threads', '1', '--host', '127.0.0.1', '--log-level', 'warn'], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => { out += c.toString(); if (out.includes('metrics: curl')) resolve(); });
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
  return {
    child,
    http: Number(/HTTPService at [^:]+:(\d+)/.exec(out)![1]),
    metrics: Number(/Metrics Service at [^:]+:(\d+)/.exec(out)![1]),
  };
}

interface Measured { load: Load; processCpu: number; mainThreadCpu: number; executorSeconds: number; tokens: number; served: number }

async function measure(pid: number, metricsPort: number, url: string, body: string): Promise<Measured> {
  const before = await scrape(metricsPort);
  const cpu0 = cpuSeconds(pid);
  const main0 = cpuSeconds(pid, pid);
  const l = load(url, body);
  const cpu1 = cpuSeconds(pid);
  const main1 = cpuSeconds(pid, pid);
  const after = await scrape(metricsPort);
  const delta = (prefix: string) => sum(after, prefix) - sum(before, prefix);
  return {
    load: l, processCpu: cpu1 - cpu0, mainThreadCpu: main1 - main0,
    executorSeconds: delta('trtllm_iteration_seconds_total'), tokens: delta('trtllm_generation_tokens_total'),
    served: delta('nv_inference_request_success'),
  };
}

async function bareCeiling(body: string): Promise<Load> {
  const answer = JSON.stringify({ model_name: 'ensemble', model_version: '1', sequence_end: false, sequence_id: 0, sequence_start: false, text_output: 'What is machine learning? x' });
  // The ceiling runs in a child process like the real server, so both compete with the load generator alike.
  const code = `const http=require('node:http');const a=${JSON.stringify(answer)};http.createServer((q,s)=>{const c=[];q.on('data',d=>c.push(d));q.on('end',()=>{JSON.parse(Buffer.concat(c));s.writeHead(200,{'content-type':'application/json','content-length':Buffer.byteLength(a)});s.end(a)})}).listen(0,'127.0.0.1',function(){console.log(this.address().port)})`;
  const child = spawn('node', ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve) => child.stdout!.once('data', (c: Buffer) => resolve(Number(c.toString().trim()))));
  try {
    return load(`http://127.0.0.1:${port}/v2/models/ensemble/generate`, body);
  } finally {
    child.kill();
  }
}

async function main(): Promise<void> {
  const server = await startTrtllm();
  const pid = server.child.pid!;
  const base = `http://127.0.0.1:${server.http}`;
  const oneToken = JSON.stringify({ text_input: 'What is machine learning?', max_tokens: 1, bad_words: '', stop_words: '' });
  const streamed = JSON.stringify({ text_input: 'What is machine learning?', max_tokens: 64, stream: true });
  try {
    load(`${base}/v2/models/ensemble/generate`, oneToken, 2);  // warm-up: JIT, connections
    const a = await measure(pid, server.metrics, `${base}/v2/models/ensemble/generate`, oneToken);
    const b = await measure(pid, server.metrics, `${base}/v2/models/ensemble/generate_stream`, streamed);
    const ceiling = await bareCeiling(oneToken);
    const perRequest = (a.processCpu - a.executorSeconds) / a.served;
    const perToken = (b.processCpu - b.executorSeconds - perRequest * b.served) / b.tokens;
    const us = (s: number) => `${(s * 1e6).toFixed(1)} µs`;
    const rows = [
      ['tool', HAVE_WRK ? `wrk, ${CONNECTIONS} connections, ${SECONDS} s per run` : `autocannon, ${CONNECTIONS} connections, ${SECONDS} s per run`],
      ['generate, max_tokens=1: requests/s (end to end)', `${a.load.rps.toFixed(0)} (${a.served} served, ${a.load.errors} non-2xx)`],
      ['bare node:http, same JSON: requests/s (ceiling)', ceiling.rps.toFixed(0)],
      ['ratio to the ceiling', `${((100 * a.load.rps) / ceiling.rps).toFixed(1)} %`],
      ['server CPU / request (process − executor iterations)', `${us(a.processCpu / a.served)} − ${us(a.executorSeconds / a.served)} = **${us(perRequest)}** (goal ≤ 100 µs)`],
      ['main JS thread CPU / request (cross-check)', us(a.mainThreadCpu / a.served)],
      ['generate_stream, max_tokens=64: tokens/s', `${(b.tokens / b.load.seconds).toFixed(0)} (${b.served} requests)`],
      ['frontend CPU / streamed token (minus per-request cost)', `**${us(perToken)}** (goal ≤ 10 µs)`],
      ['main JS thread CPU / streamed token (cross-check, incl. per-request)', us(b.mainThreadCpu / b.tokens)],
    ];
    process.stdout.write(`| measure | value |\n|---|---|\n${rows.map(([k, v]) => `| ${k} | ${v} |`).join('\n')}\n`);
    process.stdout.write(`\nmachine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}\n`);
  } finally {
    server.child.kill('SIGTERM');
  }
}

await main();
