// The frontend's own CPU cost under load: per request (parse, validate, tokenize, respond) and per streamed token
// (detokenize + SSE write), as the server process's CPU time minus the executor's iteration time (both read from
// the server itself: /proc and trtllm_iteration_seconds_total). Beside it, in the same run: end-to-end requests/s
// at max_tokens=1 and a bare node:http server answering the same JSON, the ceiling. Load: wrk if installed
// (`apt-get install wrk`), else autocannon. Then HTTP against gRPC (KServe v2 ModelInfer / ModelStreamInfer) in the
// same run, both driven by one load generator so the wires are compared under the same client: h2load
// (`apt-get install nghttp2-client`; HTTP/1.1 for HTTP, HTTP/2 with gRPC framing for gRPC), else the node
// closed loop bench/programs/kserve-load.ts. Figures: 1-token requests/s, main-thread CPU per request and per
// streamed token (the frontend's own thread: the executor runs on its native thread).
//   node dist/bench/frontend-overhead.js [--seconds 10] [--connections 16] [--rounds 3] [--wire-only] [--model <dir>]
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';

import { loadSync } from '@grpc/proto-loader';

import { median } from '../launcher/bench-command/statistics.js';
import { packageRoot } from '../worker/common/package-root.js';
import { PROTO_OPTIONS, protoPath } from '../worker/frontend/grpc/proto.js';
import { startServeProcess } from './serve-process.js';

const args = process.argv.slice(2);
const arg = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback;
};
const SECONDS = Number(arg('seconds', '10'));
const CONNECTIONS = Number(arg('connections', '16'));
const ROUNDS = Number(arg('rounds', '3'));             // HTTP-vs-gRPC rounds
const WIRE_ONLY = args.includes('--wire-only');          // only the HTTP-vs-gRPC comparison
const MODEL = arg('model', join(packageRoot(), 'test', 'fixtures', 'models', 'tiny-gpt2'));
const TICKS = 100;  // USER_HZ: /proc CPU times are in 1/100 s
const HAVE_WRK = ['/usr/bin/wrk', '/usr/local/bin/wrk'].some((p) => existsSync(p));
const HAVE_H2LOAD = ['/usr/bin/h2load', '/usr/local/bin/h2load'].some((p) => existsSync(p));

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

/** One gRPC request message as it goes on the wire: the 5-byte gRPC frame header, then the protobuf. */
function grpcFrame(method: 'ModelInfer' | 'ModelStreamInfer', message: unknown): Buffer {
  const definition = loadSync(protoPath(), PROTO_OPTIONS)['inference.GRPCInferenceService'] as Record<string, { requestSerialize(v: unknown): Buffer }>;
  const body = definition[method]!.requestSerialize(message);
  const header = Buffer.alloc(5);
  header.writeUInt32BE(body.length, 1);
  return Buffer.concat([header, body]);
}

/** The same load over either wire: h2load when installed (one client for both), else the node closed loop. */
function wireLoad(wire: 'http' | 'grpc', address: string, mode: 'unary' | 'stream', maxTokens: number): Load {
  if (!HAVE_H2LOAD) {
    const program = join(packageRoot(), 'dist', 'bench', 'programs', 'kserve-load.js');
    const out = execFileSync('node', [program, wire, address, mode, String(CONNECTIONS), String(SECONDS), String(maxTokens)], { encoding: 'utf8' });
    const r = JSON.parse(out.trim().split('\n').pop()!) as { requests: number; seconds: number; errors: number };
    return { requests: r.requests, seconds: r.seconds, rps: r.requests / r.seconds, errors: r.errors };
  }
  const stream = mode === 'stream';
  const file = join(tmpdir(), `h2load-${process.pid}-${wire}-${mode}.bin`);
  let url: string;
  let headers: string[];
  if (wire === 'http') {
    writeFileSync(file, JSON.stringify({ text_input: 'What is machine learning?', max_tokens: maxTokens, bad_words: '', stop_words: '', ...(stream ? { stream: true } : {}) }));
    url = `http://${address}/v2/models/ensemble/${stream ? 'generate_stream' : 'generate'}`;
    headers = ['--h1', '-H', 'content-type: application/json'];
  } else {
    // Raw tensors, as tritonclient sends them.
    const text = Buffer.from('What is machine learning?');
    const len = Buffer.alloc(4);
    len.writeUInt32LE(text.length);
    writeFileSync(file, grpcFrame(stream ? 'ModelStreamInfer' : 'ModelInfer', {
      model_name: 'ensemble',
      inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1, 1] }, { name: 'max_tokens', datatype: 'INT32', shape: [1, 1] },
        ...(stream ? [{ name: 'stream', datatype: 'BOOL', shape: [1, 1] }] : [])],
      raw_input_contents: [Buffer.concat([len, text]), Buffer.from(Int32Array.from([maxTokens]).buffer), ...(stream ? [Buffer.from([1])] : [])],
    }));
    url = `http://${address}/inference.GRPCInferenceService/${stream ? 'ModelStreamInfer' : 'ModelInfer'}`;
    headers = ['-H', 'content-type: application/grpc', '-H', 'te: trailers'];
  }
  const out = execFileSync('h2load', [...headers, '-D', String(SECONDS), '-c', String(CONNECTIONS), '-t', '1', '-d', file, url], { encoding: 'utf8' });
  const done = Number(/(\d+) succeeded/.exec(out)?.[1] ?? 0);
  const failed = Number(/(\d+) failed/.exec(out)?.[1] ?? 0) + Number(/(\d+) errored/.exec(out)?.[1] ?? 0);
  const took = Number(/finished in ([\d.]+)s/.exec(out)?.[1] ?? SECONDS);
  return { requests: done, seconds: took, rps: done / took, errors: failed };
}

async function startTrtllm(): Promise<{ child: ChildProcess; http: number; grpc: number; metrics: number }> {
  const { child, out } = await startServeProcess(packageRoot(), ['--model', MODEL, '--http-port', '0', '--grpc-port', '0',
    '--metrics-port', '0', '--threads', '1', '--host', '127.0.0.1', '--log-level', 'warn']);
  return {
    child,
    http: Number(/HTTPService at [^:]+:(\d+)/.exec(out)![1]),
    grpc: Number(/GRPCInferenceService at [^:]+:(\d+)/.exec(out)![1]),
    metrics: Number(/Metrics Service at [^:]+:(\d+)/.exec(out)![1]),
  };
}

interface Measured { load: Load; processCpu: number; mainThreadCpu: number; executorSeconds: number; tokens: number; served: number }

async function measure(pid: number, metricsPort: number, url: string, body: string): Promise<Measured> {
  return measureWith(pid, metricsPort, () => load(url, body));
}

async function measureWith(pid: number, metricsPort: number, run: () => Load): Promise<Measured> {
  const before = await scrape(metricsPort);
  const cpu0 = cpuSeconds(pid);
  const main0 = cpuSeconds(pid, pid);
  const l = run();
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
  const us = (s: number) => `${(s * 1e6).toFixed(1)} µs`;
  try {
    // The HTTP frontend's own cost (wrk or autocannon), against a bare node:http ceiling.
    if (!WIRE_ONLY) {
      load(`${base}/v2/models/ensemble/generate`, oneToken, 2);  // warm-up: JIT, connections
      const a = await measure(pid, server.metrics, `${base}/v2/models/ensemble/generate`, oneToken);
      const b = await measure(pid, server.metrics, `${base}/v2/models/ensemble/generate_stream`, streamed);
      const ceiling = await bareCeiling(oneToken);
      const perRequest = (a.processCpu - a.executorSeconds) / a.served;
      const perToken = (b.processCpu - b.executorSeconds - perRequest * b.served) / b.tokens;
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
    }

    // HTTP against gRPC under the same load generator. h2load counts an HTTP 200 as success, and gRPC failures
    // are HTTP 200 too, so the server's own success counter is reported beside the rate.
    const wires = { http: `127.0.0.1:${server.http}`, grpc: `127.0.0.1:${server.grpc}` } as const;
    wireLoad('grpc', wires.grpc, 'unary', 1);  // warm-up: the gRPC path's JIT
    // Main JS thread CPU: the frontend's thread (parsing, tokenizing, encoding, the wire); the executor has its own
    // thread, so its time (which other load on the machine stretches) is not in it.
    const mainPerRequest = (m: Measured) => m.mainThreadCpu / m.served;
    const mainPerToken = (m: Measured, perReq: number) => (m.mainThreadCpu - perReq * m.served) / m.tokens;
    interface Figures { rps: number; req: number; tps: number; tok: number; failed: number; served: number }
    const rounds: Record<'http' | 'grpc', Figures>[] = [];
    // Rounds alternate the wires, so drift in the machine's load hits both alike; medians are reported.
    for (let r = 0; r < ROUNDS; r += 1) {
      const round = {} as Record<'http' | 'grpc', Figures>;
      for (const wire of ['http', 'grpc'] as const) {
        const u = await measureWith(pid, server.metrics, () => wireLoad(wire, wires[wire], 'unary', 1));
        const st = await measureWith(pid, server.metrics, () => wireLoad(wire, wires[wire], 'stream', 64));
        const req = mainPerRequest(u);
        round[wire] = { rps: u.load.rps, req, tps: st.tokens / st.load.seconds, tok: mainPerToken(st, req), failed: u.load.errors + st.load.errors, served: u.served + st.served };
      }
      rounds.push(round);
      process.stderr.write(`round ${r + 1}/${ROUNDS}: ${JSON.stringify(round)}\n`);
    }
    const med = (wire: 'http' | 'grpc', k: keyof Figures) => median(rounds.map((r) => r[wire][k]));
    const ratio = (k: keyof Figures) => `${median(rounds.map((r) => r.grpc[k] / r.http[k])).toFixed(2)}×`;
    const wireRows = [
      ['load', `${HAVE_H2LOAD ? 'h2load (HTTP/1.1; gRPC on HTTP/2)' : 'kserve-load.js'}, ${CONNECTIONS} connections, ${SECONDS} s per run, median of ${ROUNDS} alternating rounds`, '', ''],
      ['ensemble, max_tokens=1: requests/s (generate / ModelInfer)', med('http', 'rps').toFixed(0), med('grpc', 'rps').toFixed(0), ratio('rps')],
      ['main JS thread CPU / request', us(med('http', 'req')), us(med('grpc', 'req')), ratio('req')],
      ['ensemble, max_tokens=64 streamed: tokens/s (generate_stream / ModelStreamInfer)', med('http', 'tps').toFixed(0), med('grpc', 'tps').toFixed(0), ratio('tps')],
      ['main JS thread CPU / streamed token (minus per-request cost)', us(med('http', 'tok')), us(med('grpc', 'tok')), ratio('tok')],
      ['requests the server counted as successful / h2load failures (all rounds)', `${rounds.reduce((n, r) => n + r.http.served, 0)} / ${rounds.reduce((n, r) => n + r.http.failed, 0)}`, `${rounds.reduce((n, r) => n + r.grpc.served, 0)} / ${rounds.reduce((n, r) => n + r.grpc.failed, 0)}`, ''],
    ];
    process.stdout.write(`\n| HTTP vs gRPC | HTTP | gRPC | gRPC / HTTP |\n|---|---|---|---|\n${wireRows.map((r) => `| ${r.join(' | ')} |`).join('\n')}\n`);
    process.stdout.write(`\nmachine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}\n`);
  } finally {
    server.child.kill('SIGTERM');
  }
}

await main();
