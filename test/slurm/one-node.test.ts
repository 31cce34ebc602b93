// Serving as a Slurm job on a real one-node cluster (munged, slurmctld and slurmd started here): `slurm render`
// prints a script Slurm accepts, `slurm submit` follows the job to its endpoint, the seeds' curl gets what one
// rank answers, `slurm stop` drains and ends the job cleanly with nothing left running; a job that cannot serve is
// reported with the lines that say why; the time limit's signal drains the job too.
// Skipped, with the reason, where the daemons cannot run (not root, Slurm not installed, daemons refusing to start).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';

import { execa } from 'execa';
import t from 'tap';

import { fixtureDir, referenceCases } from '../helpers/fixtures.js';
import { GENEROUS_MS, waitFor } from '../helpers/wait.js';
import { startSlurm } from '../helpers/slurm-cluster.js';
import { freePort, oneRankAnswer, parseSubmit, processesWith, SEEDS_BODY, seedsCurl, showJob, trtllm, waitFinal, waitNoProcesses } from '../helpers/slurm-jobs.js';

const MODEL = fixtureDir('tiny-llama');

/** Seconds the job has run (scontrol's RunTime, [D-]HH:MM:SS). */
async function jobRunSeconds(env: Record<string, string>, jobId: string): Promise<number> {
  const r = await execa('scontrol', ['show', 'job', '-o', jobId], { env, reject: false });
  const m = /RunTime=(?:(\d+)-)?(\d+):(\d+):(\d+)/.exec(r.stdout ?? '');
  if (!m) throw new Error(`no RunTime in: ${r.stdout}`);
  const [d, h, min, sec] = m.slice(1).map((x) => Number(x ?? 0)) as [number, number, number, number];
  return ((d * 24 + h) * 60 + min) * 60 + sec;
}
const node = hostname().split('.')[0]!;
// The node's address is loopback: the test reaches the leader the way a login node would, through NodeAddr.
const cluster = await startSlurm({ nodes: [{ name: node, addr: '127.0.0.1' }], cpusPerNode: 8 });
const skip = 'skip' in cluster ? `no Slurm cluster here: ${cluster.skip}` : false;
if ('stop' in cluster) t.teardown(cluster.stop);

const work = mkdtempSync(join(tmpdir(), 'trtl-slurm-jobs-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
const env = 'env' in cluster ? { ...cluster.env } : {};
const common = ['--model', MODEL, '--threads', '1', '--tokens-per-block', '16', '--output-dir', 'logs'];

// Submitted first, without following, so it starts while the other tests run. Its time limit is cut short only once
// it serves (the last test): Slurm sends the drain signal on its own schedule — a periodic pass, up to a minute
// off the nominal moment — so a limit fixed at submission could signal a job still starting on a busy machine.
let timed: { jobId?: string | undefined; port: number } | undefined;
if (!skip) {
  const port = await freePort();
  const r = await trtllm(['slurm', 'submit', ...common, '--world-size', '2', '--http-port', String(port), '--metrics-port', String(await freePort()), '--grpc-port', String(await freePort()),
    '--job-name', 'timed', '--time', '30', '--drain-timeout', '30', '--no-follow'], work, env);
  timed = { jobId: parseSubmit(r.all ?? '').jobId, port };
}

t.test('slurm render prints a script that bash parses and Slurm accepts', { skip }, async (t) => {
  const r = await trtllm(['slurm', 'render', ...common, '--world-size', '2', '--http-port', '8000', '--job-name', 'render-check'], work, env);
  t.equal(r.exitCode, 0, r.exitCode === 0 ? 'exit 0' : r.all);
  const script = r.stdout;
  t.comment(script);
  t.ok(script.startsWith('#!/bin/bash\n'), 'a bash script');
  t.match(script, /\n#SBATCH --nodes=1\n#SBATCH --ntasks-per-node=2\n/, 'one task per rank');
  t.match(script, /\n#SBATCH --signal=B:TERM@60\n/, 'the time limit drains first');
  t.match(script, /\nexec \S+ \S+trtllm-launch\.js serve \\\n  --tp 2 --pp 1 \\\n  --model \S+tiny-llama \\\n/);
  const syntax = await execa('bash', ['-n'], { input: script, reject: false, all: true });
  t.equal(syntax.exitCode, 0, `bash -n: ${syntax.all}`);
  // --test-only: slurmctld checks every directive against the cluster and says where it would run, without a job.
  const accepted = await execa('sbatch', ['--test-only'], { input: script, cwd: work, env, reject: false, all: true });
  t.equal(accepted.exitCode, 0, `sbatch --test-only: ${accepted.all}`);
  t.match(accepted.all, new RegExp(`using 2 processors on nodes ${node}`));
});

t.test('submit: endpoint printed, the seeds\' curl answers as one rank does; stop drains and leaves nothing', { skip }, async (t) => {
  const port = await freePort();
  const metricsPort = await freePort();
  const marker = `--http-port ${port}`;
  // TRTLLM_TEST_HOOKS: the leader takes /test/hold, so the drain below starts with every request queued.
  const r = await trtllm(['slurm', 'submit', ...common, '--world-size', '2', '--http-port', String(port), '--metrics-port', String(metricsPort), '--grpc-port', String(await freePort()),
    '--job-name', 'serve', '--drain-timeout', '60', '--max-batch-size', '1'], work, { ...env, TRTLLM_TEST_HOOKS: '1' });
  t.equal(r.exitCode, 0, `submit exit 0${r.exitCode === 0 ? '' : ` (${r.all?.slice(-2500)})`}`);
  const job = parseSubmit(r.all ?? '');
  t.ok(job.jobId, 'printed the job id');
  t.match(r.all, /job \d+: RUNNING on /, 'shows the job starting');
  t.equal(job.host, node, 'the endpoint names the node');
  t.equal(job.addr, '127.0.0.1', 'and its address');
  t.equal(job.port, port);
  if (!job.jobId || !job.addr) return;
  const out = readFileSync(join(work, 'logs', `serve-${job.jobId}.out`), 'utf8');
  t.match(out, new RegExp(`slurm step ${job.jobId}\\.0: task 0 of 2 on ${node} \\(local 0\\) = MPI rank 0, device cpu`));
  t.match(out, new RegExp(`slurm step ${job.jobId}\\.0: task 1 of 2 on ${node} \\(local 1\\) = MPI rank 1, device cpu`));

  const curl = await seedsCurl(`${job.addr}:${port}`);
  t.ok(curl.ok, `the seeds' curl answers${curl.ok ? '' : ` (${curl.raw.slice(0, 300)})`}`);
  t.equal(curl.json?.text_output, await oneRankAnswer(SEEDS_BODY), 'tp=2 under srun = one rank');
  for (const c of referenceCases('tiny-llama').slice(0, 2)) {
    const g = await fetch(`http://${job.addr}:${port}/v2/models/tensorrt_llm/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: c.input_ids, request_output_len: c.greedy_output_ids.length }) });
    t.same(((await g.json()) as { output_ids: number[] }).output_ids.slice(c.input_ids.length), c.greedy_output_ids, `${c.name}: greedy = HF transformers`);
  }
  t.ok(processesWith(marker).length >= 3, 'launcher and two ranks running');

  // Requests queued when the stop comes must still finish: a stop is a drain. The leader's loop holds, so all 16 are
  // queued (the leader counts them active) before the stop is sent; the drain lifts the hold and runs them.
  const leader = `http://${job.addr}:${port}`;
  t.equal((await fetch(`${leader}/test/hold`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ iterations: 0 }) })).status, 200, 'the leader holds');
  const body = (i: number) => JSON.stringify({ text_input: `The jury said ${i}`, max_tokens: 100, exclude_input_in_output: true });
  // Each answer settles into a value at once: a failed request is an assertion below, never an unhandled rejection
  // that ends the file before the job's log is shown.
  const requests = Array.from({ length: 16 }, (_, i) => fetch(`${leader}/v2/models/ensemble/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body(i) })
    .then(async (res) => ({ status: res.status, text: ((await res.json()) as { text_output?: string }).text_output ?? '' }),
      (error: unknown) => ({ status: 0, text: `${String(error)} (${String((error as { cause?: unknown }).cause)})` })));
  const active = async () => Number(/^nv_trt_llm_request_metrics\{[^}]*request_type="active"[^}]*\} (\S+)$/m.exec(await (await fetch(`http://${job.addr}:${metricsPort}/metrics`)).text())?.[1]);
  t.ok(await waitFor(async () => (await active()) === 16), 'all 16 requests queued at the leader');
  const stop = await trtllm(['slurm', 'stop', job.jobId], work, env);
  t.equal(stop.exitCode, 0, `stop exit 0${stop.exitCode === 0 ? '' : ` (${stop.all})`}`);
  t.match(stop.all, new RegExp(`job ${job.jobId} stopped cleanly: COMPLETED, exit code 0:0`));
  const answers = await Promise.all(requests);
  const after = readFileSync(join(work, 'logs', `serve-${job.jobId}.out`), 'utf8');
  const failed = answers.filter((a) => a.status !== 200);
  t.same(answers.map((a) => a.status), answers.map(() => 200),
    `every queued and running request finished${failed.length === 0 ? '' : ` (${failed[0]!.text}; the job said:\n${after.slice(-4000)})`}`);
  t.ok(answers.every((a) => a.text.length > 0), 'each with its text');
  t.match(after, /\[launcher\] SIGTERM: draining the leader/);
  t.match(after, /\[launcher\] all ranks stopped cleanly/);
  t.same((await waitNoProcesses(marker)).map((p) => p.cmd.slice(0, 80)), [], 'no launcher, srun or rank left');
  const info = await showJob(env, job.jobId);
  t.equal(info?.state, 'COMPLETED');
});

t.test('a job that cannot serve: submit reports the failure and the lines that explain it', { skip }, async (t) => {
  const port = await freePort();
  // tiny-llama has 4 attention heads: 3 tensor-parallel ranks cannot split them.
  const r = await trtllm(['slurm', 'submit', ...common, '--tp', '3', '--http-port', String(port), '--metrics-port', String(await freePort()), '--grpc-port', String(await freePort()), '--job-name', 'bad'], work, env);
  t.equal(r.exitCode, 1, 'non-zero exit');
  t.comment(r.all);
  t.match(r.all, /job \d+ ended before the leader was ready: FAILED \(exit code \d+:\d+/);
  t.match(r.all, /the lines that explain it:\n\s+Root cause:\n\s+rank \d on \S+: exit code 2/);
  t.match(r.all, /attention heads|heads/i, 'the rank\'s own error message');
  t.same((await waitNoProcesses(`--http-port ${port}`)).map((p) => p.cmd.slice(0, 80)), [], 'nothing left');
});

t.test('tasks that cannot join one MPI world are refused, not served as many rank 0s', { skip }, async (t) => {
  const port = await freePort();
  // srun takes the last --mpi it is given: no PMI at all, so each task would start MPI alone.
  const r = await trtllm(['slurm', 'submit', ...common, '--world-size', '2', '--srun-args=--mpi=none', '--http-port', String(port), '--metrics-port', String(await freePort()), '--grpc-port', String(await freePort()), '--job-name', 'nompi'], work, env);
  t.equal(r.exitCode, 1, 'non-zero exit');
  t.match(r.all, /job \d+ ended before the leader was ready: FAILED/);
  t.match(r.all, /srun started 2 tasks but MPI sees a world of 1 \(srun --mpi=none\)/);
  t.notMatch(r.all, /Started HTTPService/, 'no rank served');
  t.same((await waitNoProcesses(`--http-port ${port}`)).map((p) => p.cmd.slice(0, 80)), [], 'nothing left');
});

t.test('bad sbatch options are refused before anything is submitted', { skip }, async (t) => {
  const nodes = await trtllm(['slurm', 'submit', ...common, '--world-size', '2', '--nodes', '3'], work, env);
  t.equal(nodes.exitCode, 2);
  t.match(nodes.all, /--nodes 3 does not divide tp 2 x pp 1 = 2 ranks/);
  const partition = await trtllm(['slurm', 'submit', ...common, '--world-size', '2', '--partition', 'nosuch'], work, env);
  t.equal(partition.exitCode, 1);
  t.match(partition.all, /sbatch refused the job: .*invalid partition/i);
  const stop = await trtllm(['slurm', 'stop', 'abc'], work, env);
  t.equal(stop.exitCode, 2);
  t.match(stop.all, /job id must be a number such as 1234, got "abc"/);
});

t.test('the time limit\'s signal drains the job before Slurm ends it', { skip }, async (t) => {
  t.ok(timed?.jobId, 'the timed job was submitted');
  if (!timed?.jobId) return;
  const log = join(work, 'logs', `timed-${timed.jobId}.out`);
  const serving = () => { try { return /\[launcher\] ready after/.test(readFileSync(log, 'utf8')); } catch { return false; } };
  t.ok(await waitFor(serving, 5 * GENEROUS_MS), 'the timed job serves');
  // Now the limit (Slurm keeps whole minutes): at least the drain signal's lead (--drain-timeout 30 + 30 s) plus
  // 30 s away. The signal can only come after this point, and however late Slurm's periodic pass sends it, the
  // idle leader's drain has time to end the job before the limit.
  const runSeconds = await jobRunSeconds(env, timed.jobId);
  const minutes = Math.ceil((runSeconds + 60 + 30) / 60);
  const update = await execa('scontrol', ['update', `JobId=${timed.jobId}`, `TimeLimit=${minutes}`], { env, reject: false, all: true });
  t.equal(update.exitCode, 0, `scontrol update TimeLimit=${minutes}: ${update.all}`);
  const info = await waitFinal(env, timed.jobId, 5 * GENEROUS_MS);
  t.equal(info?.state, 'COMPLETED', `ended by its own drain, not by TIMEOUT (${info?.state} ${info?.exitCode})`);
  t.equal(info?.exitCode, '0:0');
  const out = readFileSync(log, 'utf8');
  t.match(out, /\[launcher\] ready after/, 'it served first');
  t.match(out, /\[launcher\] SIGTERM: draining the leader \(up to 30 s\)/);
  t.match(out, /\[launcher\] all ranks stopped cleanly/);
  t.same((await waitNoProcesses(`--http-port ${timed.port}`)).map((p) => p.cmd.slice(0, 80)), [], 'nothing left');
});
