// `--dp 2` under Slurm, on a real one-node cluster (munged, slurmctld and slurmd started here): `--no-spawn` inside
// a salloc allocation — srun starts the orchestrator and both replicas' ranks as one step, every answer is HF
// greedy, Ctrl-C drains the whole job with nothing left running (without --no-spawn the launcher refuses, naming the
// option) — and `slurm submit --dp 2`, whose job script does the same, followed to its endpoint and stopped with a
// drain.
// Skipped, with the reason, where the daemons cannot run (not root, Slurm not installed, daemons refusing to start).
import { hostname } from 'node:os';

import { execa } from 'execa';
import t from 'tap';

import { fixtureDir, referenceCases } from '../helpers/fixtures.js';
import { startSlurm } from '../helpers/slurm-cluster.js';
import { processesWith } from '../helpers/processes.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { BIN, freePort, parseSubmit, showJob, trtllm, waitNoProcesses } from '../helpers/slurm-jobs.js';
import { GENEROUS_MS, waitFor } from '../helpers/wait.js';

const node = hostname().split('.')[0]!;
const cluster = await startSlurm({ nodes: [{ name: node, addr: '127.0.0.1' }], cpusPerNode: 8 });
const skip = 'skip' in cluster ? `no Slurm cluster here: ${cluster.skip}` : false;
if ('stop' in cluster) t.teardown(cluster.stop);
const env = 'env' in cluster ? { ...cluster.env } : {};
const MODEL = fixtureDir('tiny-llama');

async function generate(port: number, inputIds: number[], maxTokens: number): Promise<number[]> {
  const r = await fetch(`http://127.0.0.1:${port}/v2/models/tensorrt_llm/generate`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: inputIds, request_output_len: maxTokens }),
  });
  return ((await r.json()) as { output_ids?: number[] }).output_ids ?? [];
}

async function routed(metricsPort: number): Promise<number[]> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  return [0, 1].map((r) => {
    const line = text.split('\n').find((l) => l.startsWith('trtllm_replica_requests_routed_total{') && l.includes(`replica="${r}"`));
    return line === undefined ? Number.NaN : Number(line.slice(line.lastIndexOf(' ') + 1));
  });
}

t.test('inside salloc: --dp 2 --no-spawn runs under srun, both replicas answer HF greedy, Ctrl-C drains every rank', { skip }, async (t) => {
  const alloc = await execa('salloc', ['--no-shell', '--ntasks=3', '--job-name=dp'], { env, reject: false, all: true, timeout: GENEROUS_MS });
  const jobId = /Granted job allocation (\d+)/.exec(alloc.all ?? '')?.[1];
  t.ok(jobId, `salloc granted an allocation${jobId ? '' : ` (${alloc.all})`}`);
  if (!jobId) return;
  t.teardown(() => execa('scancel', [jobId], { env, reject: false }));
  const inAlloc = { ...env, SLURM_JOB_ID: jobId };
  const refused = await execa(process.execPath, [BIN, '--model', MODEL, '--dp', '2', '--dry-run'], { env: inAlloc, reject: false, all: true });
  t.not(refused.exitCode, 0, 'spawning replicas under srun is refused');
  t.match(refused.all, /--dp 2 under srun \(Slurm: --launcher srun, chosen inside a Slurm allocation\).*add --no-spawn/);

  const port = await freePort();
  const metricsPort = await freePort();
  let all = '';
  const launcher = execa(process.execPath, [BIN, '--model', MODEL, '--dp', '2', '--no-spawn', '--tp', '1', '--threads', '1', '--tokens-per-block', '16',
    '--http-port', String(port), '--metrics-port', String(metricsPort), '--grpc-port', String(await freePort()), '--drain-timeout', '10'], { env: inAlloc, reject: false, all: true });
  const ready = await new Promise<boolean>((resolve) => {
    launcher.all!.on('data', (chunk: Buffer) => {
      all += chunk.toString();
      if (/\[launcher\] ready after[^]*Ctrl-C drains and stops every replica/.test(all)) resolve(true);  // the banner's last line
    });
    void launcher.then(() => resolve(false));
  });
  t.ok(ready, `ready${ready ? '' : ` (${all.slice(-3000)})`}`);
  if (!ready) return;
  t.match(all, /\[launcher\] ready after [\d.]+ s: 3 rank\(s\)/, 'srun started the orchestrator and both replicas\' ranks as one step');
  t.match(all, /\[rank 0\] [^\n]*model tiny-llama replica 1: ready on 1 rank\(s\)/, 'replica 1 is job rank 2, linked to the orchestrator');
  t.match(all, /orchestrator ready: 2 of 2 replica\(s\) of tiny-llama serving/);
  // Four at once: the router spreads them over the replicas as it sees their load (which gets which is its choice,
  // not checked here; the mpirun tests pin it down); every answer is HF's.
  const cases = referenceCases('tiny-llama').slice(0, 4);
  const outputs = await Promise.all(cases.map((c) => generate(port, c.input_ids, c.max_new_tokens)));
  cases.forEach((c, i) => t.same(outputs[i]!.slice(c.input_ids.length), c.greedy_output_ids, `${c.name}: = HF greedy`));
  const counts = await routed(metricsPort);
  t.equal(counts[0]! + counts[1]!, cases.length, `every request routed once (${counts})`);
  launcher.kill('SIGINT');
  const result = await launcher;
  const fromDrain = all.slice(Math.max(0, all.lastIndexOf('[launcher] SIGINT')));
  t.equal(result.exitCode, 0, `exit 0 after Ctrl-C${result.exitCode === 0 ? '' : ` (${fromDrain.slice(0, 8000)})`}`);
  t.match(all, /\[launcher\] all ranks stopped cleanly\n/);
  t.same((await waitNoProcesses(`--http-port ${port}`)).map((p) => p.cmd.slice(0, 80)), [], 'no launcher or srun left');
  // The ranks carry the plan (with this port) in their environment.
  const marker = `"httpPort":${port},`;
  await waitFor(() => processesWith(marker, true).length === 0);
  t.same(processesWith(marker, true), [], 'no orchestrator or replica rank left');
});

t.test('slurm submit --dp 2: the job script runs the orchestrator and both replicas; stop drains it', { skip }, async (t) => {
  const work = mkdtempSync(join(tmpdir(), 'trtl-slurm-dp-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const port = await freePort();
  const metricsPort = await freePort();
  const r = await trtllm(['slurm', 'submit', '--model', MODEL, '--dp', '2', '--threads', '1', '--tokens-per-block', '16', '--output-dir', 'logs',
    '--http-port', String(port), '--metrics-port', String(metricsPort), '--grpc-port', String(await freePort()), '--job-name', 'dp', '--drain-timeout', '20'], work, env);
  t.equal(r.exitCode, 0, `submit exit 0${r.exitCode === 0 ? '' : ` (${r.all?.slice(-3000)})`}`);
  t.match(r.all, /submitted batch job \d+: 2 replicas of tp 1 x pp 1 \+ the orchestrator = 3 tasks on 1 node\(s\)/);
  const job = parseSubmit(r.all ?? '');
  t.ok(job.jobId, 'printed the job id');
  t.equal(job.port, port, 'the endpoint it followed to');
  if (!job.jobId) return;
  t.teardown(() => execa('scancel', [job.jobId!], { env, reject: false }));
  for (const c of referenceCases('tiny-llama').slice(0, 2)) {
    const out = await generate(port, c.input_ids, c.max_new_tokens);
    t.same(out.slice(c.input_ids.length), c.greedy_output_ids, `${c.name}: = HF greedy`);
  }
  const counts = await routed(metricsPort);
  t.equal(counts[0]! + counts[1]!, 2, `routed through the replicas (${counts})`);
  const stop = await trtllm(['slurm', 'stop', job.jobId], work, env);
  t.equal(stop.exitCode, 0, `stop exit 0${stop.exitCode === 0 ? '' : ` (${stop.all})`}`);
  t.match(stop.all, new RegExp(`job ${job.jobId} stopped cleanly: COMPLETED, exit code 0:0`));
  const info = await showJob(env, job.jobId);
  t.equal(info?.state, 'COMPLETED');
  const marker = `"httpPort":${port},`;
  await waitFor(() => processesWith(marker, true).length === 0);
  t.same(processesWith(marker, true), [], 'no orchestrator or replica rank left');
});
