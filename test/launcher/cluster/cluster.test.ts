// The real thing: `trtllm-launch --world-size 2` on this machine — mpirun, two ranks, the leader's HTTP port,
// the same outputs as one rank, Ctrl-C that drains and exits 0, a killed rank that brings the cluster down with a
// root cause, a taken port refused before any rank starts, and no process left behind on any path.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

import { execa, type ResultPromise } from 'execa';
import t from 'tap';

import { GrpcClient } from '../../../launcher/client/grpc.js';
import { packageRoot } from '../../../worker/common/package-root.js';
import { fixtureDir } from '../../helpers/fixtures.js';
import { freePort, processesWith } from '../../helpers/processes.js';
import { waitFor } from '../../helpers/wait.js';

const bin = join(packageRoot(), 'bin', 'trtllm-launch.js');
const MODEL = fixtureDir('tiny-llama');

async function startCluster(extra: string[] = []): Promise<{ child: ResultPromise; port: number; metrics: number; grpc: number; output: () => string; ready: Promise<boolean> }> {
  const port = await freePort();
  const metrics = await freePort();
  const grpc = await freePort();
  let all = '';
  const child = execa('node', [bin, '--model', MODEL, '--world-size', '2', '--oversubscribe', '--http-port', String(port), '--metrics-port', String(metrics), '--grpc-port', String(grpc), '--threads', '1', '--tokens-per-block', '16', ...extra],
    { reject: false, all: true, env: { TRTLLM_TEST_MARKER: String(port) } });
  const ready = new Promise<boolean>((resolve) => {
    child.all!.on('data', (chunk: Buffer) => {
      all += chunk.toString();
      if (all.includes('[launcher] ready after')) resolve(true);
    });
    void child.then(() => resolve(false));
  });
  return { child, port, metrics, grpc, output: () => all, ready };
}

async function generate(port: number, body: object): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(`http://127.0.0.1:${port}/v2/models/tensorrt_llm/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, json: await r.json() as Record<string, unknown> };
}

t.test('world size 2: serves what one rank serves; Ctrl-C drains and exits 0 with nothing left behind', async (t) => {
  const cluster = await startCluster();
  t.ok(await cluster.ready, `ready (output: ${cluster.output().slice(-1500)})`);
  t.ok(await waitFor(() => /\[rank 0\] /.test(cluster.output())), 'rank-prefixed output');
  // The banner follows the ready line in writes of its own: the chunk that carried "ready after" may end before it.
  t.ok(await waitFor(() => /curl -X POST localhost:\d+\/v2\/models\/ensemble\/generate/.test(cluster.output())), 'prints how to query it');
  const reference = JSON.parse(readFileSync(join(MODEL, 'reference.json'), 'utf8')) as { cases: { input_ids: number[]; greedy_output_ids: number[] }[] };
  for (const c of reference.cases.slice(0, 2)) {
    const r = await generate(cluster.port, { input_ids: c.input_ids, request_output_len: 16 });
    t.equal(r.status, 200);
    t.same((r.json.output_ids as number[]).slice(c.input_ids.length), c.greedy_output_ids, 'tp=2 greedy = HF transformers');
  }
  const text = await fetch(`http://127.0.0.1:${cluster.port}/v2/models/ensemble/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text_input: 'What is machine learning?', max_tokens: 8, bad_words: '', stop_words: '' }) });
  t.equal(text.status, 200, "the seeds' curl body works");
  // OpenAI completions through the cluster give the text the Triton route gives (both greedy).
  const triton = await (await fetch(`http://127.0.0.1:${cluster.port}/v2/models/ensemble/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text_input: 'The jury said', max_tokens: 8, exclude_input_in_output: true }) })).json() as { text_output: string };
  const openai = await (await fetch(`http://127.0.0.1:${cluster.port}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'tiny-llama', prompt: 'The jury said', max_tokens: 8, temperature: 0 }) })).json() as { choices?: { text: string }[] };
  t.equal(openai.choices?.[0]?.text, triton.text_output, 'OpenAI completion = Triton generate');
  // The leader's gRPC port: the same tokens through ModelStreamInfer.
  const grpc = new GrpcClient(`127.0.0.1:${cluster.grpc}`);
  const c0 = reference.cases[0]!;
  const call = grpc.stream();
  call.send({ model: 'tensorrt_llm', inputs: [
    { name: 'input_ids', datatype: 'INT32', shape: [1, c0.input_ids.length], data: c0.input_ids },
    { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [16] },
    { name: 'streaming', datatype: 'BOOL', shape: [1, 1], data: [true] },
  ] });
  const streamed: number[] = [];
  for await (const r of call.responses) {
    streamed.push(...((r.outputs.find((o) => o.name === 'output_ids')?.data ?? []) as number[]));
    if (r.final) call.end();
  }
  grpc.close();
  t.same(streamed, c0.greedy_output_ids, 'gRPC on the leader: tp=2 greedy = HF transformers, streamed');
  const scrape = await (await fetch(`http://127.0.0.1:${cluster.metrics}/metrics`)).text();
  t.match(scrape, /nv_trt_llm_kv_cache_block_metrics\{/);
  const marker = String(cluster.port);
  t.ok(processesWith(`--http-port ${marker}`).length >= 2, 'ranks are running');
  cluster.child.kill('SIGINT');
  const result = await cluster.child;
  t.equal(result.exitCode, 0, `exit 0 after Ctrl-C (${cluster.output().slice(-600)})`);
  t.match(cluster.output(), /all ranks stopped cleanly/);
  t.ok(await waitFor(() => processesWith(`--http-port ${marker}`).length === 0), 'no rank or mpirun left');
  t.same(processesWith(`--http-port ${marker}`).map((p) => p.cmd.slice(0, 60)), []);
});

for (const victim of ['follower', 'mpirun'] as const) {
  t.test(`SIGKILL of ${victim === 'mpirun' ? 'mpirun itself' : 'a follower rank'} stops the cluster with a root cause and no orphans`, async (t) => {
    const cluster = await startCluster();
    t.ok(await cluster.ready, 'ready');
    // The leader's pid line comes through mpirun, readiness directly: the follower is told apart once it is here.
    t.ok(await waitFor(() => /leader pid \d+ on /.test(cluster.output())), 'the leader said its pid');
    const marker = `--http-port ${cluster.port}`;
    const all = processesWith(marker);
    const target = victim === 'mpirun'
      ? all.find((p) => /(^|\/)(mpirun|mpiexec|orterun) /.test(p.cmd))
      : all.find((p) => p.cmd.startsWith(process.execPath) && p.cmd.includes(' rank ') && !cluster.output().includes(`leader pid ${p.pid} on `));
    t.ok(target, `found the ${victim} (${target?.cmd.slice(0, 80)})`);
    // How fast it goes down is measured in bench/ (launcher-overhead); here: that it does, and how it reports it.
    process.kill(target!.pid, 'SIGKILL');
    const result = await cluster.child;
    t.not(result.exitCode, 0, `non-zero exit (${result.exitCode})`);
    if (victim === 'follower') t.match(cluster.output(), /Root cause:\n\s+rank 1 on \S+: killed by signal 9/);
    else t.match(cluster.output(), /Root cause:/);
    await waitFor(() => processesWith(marker).length === 0);
    t.same(processesWith(marker).map((p) => p.cmd.slice(0, 60)), [], 'no process left');
  });
}

t.test('a taken port is refused before any rank starts; --dry-run prints the plan', async (t) => {
  const blocker = createServer();
  const port = await new Promise<number>((resolve) => blocker.listen(0, '0.0.0.0', () => resolve((blocker.address() as { port: number }).port)));
  t.teardown(() => blocker.close());
  const r = await execa('node', [bin, '--model', MODEL, '--world-size', '2', '--http-port', String(port)], { reject: false, all: true });
  t.equal(r.exitCode, 2);
  t.match(r.all, new RegExp(`--http-port ${port} on 0\\.0\\.0\\.0 is not free`));
  const dry = await execa('node', [bin, '--model', MODEL, '--tp', '2', '--pp', '2', '--oversubscribe', '--dry-run'], { reject: false, all: true });
  t.equal(dry.exitCode, 0);
  t.match(dry.stdout, /mpirun -np 4 --tag-output --bind-to none --mca odls_base_sigkill_timeout 0 --oversubscribe/);
  t.match(dry.stdout, / rank --tp 2 --pp 2 --model /);
  t.match(dry.stdout, /rank 0: tp_rank 0, pp_rank 0; leader: HTTP 0\.0\.0\.0:8000, gRPC :8001, metrics :8002/);
  t.match(dry.stdout, /rank 3: tp_rank 1, pp_rank 1; follower: no ports/);
  const noSrun = await execa(process.execPath, [bin, '--model', MODEL, '--world-size', '2', '--launcher', 'srun', '--dry-run'], { reject: false, all: true, env: { PATH: '/nonexistent-bin-dir' }, extendEnv: true });
  t.equal(noSrun.exitCode, 2);
  t.match(noSrun.all, /--launcher srun: srun is not on PATH; run inside a Slurm allocation/);
  const cuda = await execa('node', [bin, '--model', MODEL, '--device', 'cuda', '--dry-run'], { reject: false, all: true });
  t.equal(cuda.exitCode, 2);
  t.match(cuda.all, /--device cuda: the CUDA backend is not built into this addon \(.+\); use --device cpu or auto/);
  const bad = await execa('node', [bin, '--world-size', '3', '--tp', '2', '--pp', '2'], { reject: false, all: true });
  t.not(bad.exitCode, 0);
  t.match(bad.all, /--world-size 3 does not equal --tp 2 x --pp 2 = 4/);
});
