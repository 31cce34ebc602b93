// `--dp 2` for real: two replicas of tiny-llama spawned by one orchestrator under mpirun, behind one model name.
// Outputs equal HF greedy (as one rank's do); least-load spreads requests over both replicas, round-robin takes
// them in turn; --router kv sends a prompt sharing a cached prefix to the replica that holds it (seen in the
// per-replica routed and reused-block gauges, never in timings); a dead replica stops the cluster, or with
// --isolate-failures only itself; --dry-run shows both replicas; bad values are refused naming the option and value.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { execa } from 'execa';
import t, { type Test } from 'tap';

import { packageRoot } from '../../worker/common/package-root.js';
import { fixtureDir, referenceCases } from '../helpers/fixtures.js';
import { startLauncher } from '../helpers/launched-cluster.js';
import { freePort, processesWith } from '../helpers/processes.js';
import { postJson, waitFor } from '../helpers/serving.js';
import { tempDir } from '../helpers/temp-dir.js';

const bin = join(packageRoot(), 'bin', 'trtllm-launch.js');
const MODEL = fixtureDir('tiny-llama');
const ids = (n: number, salt: number) => Array.from({ length: n }, (_, i) => 3 + ((i * 7 + salt * 13) % 200));

async function startDp(extra: string[]) {
  const port = await freePort();
  const metricsPort = await freePort();
  const grpcPort = await freePort();
  const started = startLauncher(['--model', MODEL, '--dp', '2', '--tp', '1', '--oversubscribe', '--threads', '1', '--tokens-per-block', '16',
    '--grpc-port', String(grpcPort), '--http-port', String(port), '--metrics-port', String(metricsPort), '--drain-timeout', '5', ...extra]);
  const pid = (replica: number) => {
    const m = new RegExp(`model tiny-llama replica ${replica}: ready on 1 rank\\(s\\) \\(pid (\\d+)@`).exec(started.output());
    return m ? Number(m[1]) : undefined;
  };
  return { ...started, base: `http://127.0.0.1:${port}`, metrics: `http://127.0.0.1:${metricsPort}`, marker: `"httpPort":${port},`, pid };
}

/** Per replica, the value of a `replica`-labelled family. */
async function perReplica(metrics: string, name: string): Promise<number[]> {
  const text = await (await fetch(`${metrics}/metrics`)).text();
  return [0, 1].map((r) => {
    const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(`replica="${r}"`));
    return line === undefined ? Number.NaN : Number(line.slice(line.lastIndexOf(' ') + 1));
  });
}

async function tokens(base: string, inputIds: number[], maxTokens: number) {
  return postJson(`${base}/v2/models/tensorrt_llm/generate`, { input_ids: inputIds, request_output_len: maxTokens });
}

/** A replica frozen (SIGSTOP) holds what is routed to it outstanding for as long as the test needs: routing is then
 * observed without depending on how fast a request runs. */
async function frozen<T>(pid: number, body: () => Promise<T>): Promise<T> {
  process.kill(pid, 'SIGSTOP');
  try {
    return await body();
  } finally {
    process.kill(pid, 'SIGCONT');
  }
}

async function outstanding(metrics: string, expected: number[]): Promise<boolean> {
  return waitFor(async () => JSON.stringify(await perReplica(metrics, 'trtllm_replica_outstanding_requests')) === JSON.stringify(expected));
}

async function noneLeft(t: Test, marker: string): Promise<void> {
  await waitFor(() => processesWith(marker, true).length === 0);
  t.same(processesWith(marker, true), [], 'no process of the job is left');
}

t.test('--dry-run shows the orchestrator and both replicas; bad values are refused naming option and value', async (t) => {
  const dry = await execa('node', [bin, '--model', MODEL, '--dp', '2', '--tp', '1', '--device', 'cpu', '--oversubscribe', '--dry-run'], { reject: false });
  t.equal(dry.exitCode, 0, dry.stderr);
  t.match(dry.stdout, /mpirun -np 1 .*--enable-recovery/);
  t.match(dry.stdout, /rank 0: orchestrator; .*spawns 2 replica\(s\) of tiny-llama; router least-load; a dead replica stops the cluster/);
  t.match(dry.stdout, /tiny-llama replica 0: tp 1 x pp 1 \(spawned\), rank 1 of the job/);
  t.match(dry.stdout, /tiny-llama replica 1: tp 1 x pp 1 \(spawned\), rank 2 of the job/);
  const cases: [string[], RegExp][] = [
    [['--dp', '0'], /--dp must be an integer >= 1, got "0"/],
    [['--dp', '2', '--router', 'foo'], /--router must be one of least-load, kv, round-robin, got "foo"/],
    [['--dp', '2', '--router', 'kv'], /--router kv needs --enable-kv-cache-reuse/],
    [['--router', 'kv', '--enable-kv-cache-reuse'], /--router kv applies to data-parallel replicas: add --dp/],
    [['--dp', '2', '--launcher', 'srun'], /--dp 2 under srun \(Slurm.*add --no-spawn to start every replica's ranks with srun up front/],
    [['--dp', '2', '--srun-args=--exclusive'], /--srun-args applies to --dp 2 only under srun/],
    [['--dp', '2', '--world-size', '3'], /--world-size 3 is not a multiple of --dp 2/],
  ];
  for (const [args, message] of cases) {
    const r = await execa('node', [bin, '--model', MODEL, '--oversubscribe', '--dry-run', ...args], { reject: false });
    t.not(r.exitCode, 0, `${args.join(' ')}: refused`);
    t.match(r.stderr, message, args.join(' '));
  }
  const render = await execa('node', [bin, 'slurm', 'render', '--model', MODEL, '--dp', '2'], { reject: false });
  t.equal(render.exitCode, 0, render.stderr);
  t.match(render.stdout, /#SBATCH --ntasks-per-node=3\n[^]*--dp 2 \\\n  --no-spawn$/, 'slurm render --dp: the orchestrator task and --no-spawn');
  const twoNodes = await execa('node', [bin, 'slurm', 'render', '--model', MODEL, '--dp', '2', '--nodes', '2'], { reject: false });
  t.equal(twoNodes.exitCode, 0, twoNodes.stderr);
  t.match(twoNodes.stdout, /#SBATCH --nodes=2\n[^]*#SBATCH --ntasks-per-node=2\n/, 'slurm render --dp 2 --nodes 2: a replica and a slot a node');
  const threeNodes = await execa('node', [bin, 'slurm', 'render', '--model', MODEL, '--dp', '2', '--nodes', '3'], { reject: false });
  t.match(threeNodes.stderr, /--nodes 3 does not divide --dp 2 x tp 1 x pp 1 = 2 ranks/);
  // YAML parallel.dp, the same plan.
  const dir = tempDir('trtllm-dp-');
  writeFileSync(join(dir, 'm.yaml'), `model: ${MODEL}\nparallel: { dp: 2, tp: 1 }\n`);
  const yaml = await execa('node', [bin, '--config', join(dir, 'm.yaml'), '--device', 'cpu', '--oversubscribe', '--dry-run'], { reject: false });
  t.equal(yaml.exitCode, 0, yaml.stderr);
  t.match(yaml.stdout, /tiny-llama replica 1: tp 1 x pp 1 \(spawned\)/, 'parallel.dp in a --config file');
  // --no-spawn: mpirun starts the orchestrator and both replicas' ranks.
  const noSpawn = await execa('node', [bin, '--model', MODEL, '--dp', '2', '--tp', '1', '--device', 'cpu', '--oversubscribe', '--no-spawn', '--dry-run'], { reject: false });
  t.equal(noSpawn.exitCode, 0, noSpawn.stderr);
  t.match(noSpawn.stdout, /mpirun -np 3 .*--enable-recovery/);
  t.match(noSpawn.stdout, /rank 0: orchestrator; .*links to 2 replica\(s\) of tiny-llama/);
  t.match(noSpawn.stdout, /tiny-llama replica 1: tp 1 x pp 1 \(started by mpirun\), rank 2 of the job/);
  const kv = await execa('node', [bin, '--model', MODEL, '--dp', '2', '--router', 'kv', '--enable-kv-cache-reuse', '--oversubscribe', '--dry-run'], { reject: false });
  t.equal(kv.exitCode, 0, kv.stderr);
  t.match(kv.stderr, /--router kv: each replica records KV cache events \(--kv-cache-event-buffer-max-size 16384, set for it\)/);
  t.match(kv.stdout, /router kv/);
});

t.test('least-load: HF greedy outputs through both replicas, requests spread over them; a dead replica stops the cluster', async (t) => {
  const cluster = await startDp([]);
  t.teardown(() => { cluster.child.kill('SIGKILL'); });
  t.ok(await cluster.ready, `ready (output: ${cluster.output().slice(-2000)})`);
  t.same(await perReplica(cluster.metrics, 'trtllm_replica_ready'), [1, 1], 'both replicas ready');
  t.ok(await waitFor(() => cluster.pid(0) !== undefined && cluster.pid(1) !== undefined), 'the replicas\' pids are known');
  // Spawned replicas are not pinned (Open MPI binds a small spawned job to one core each otherwise): each may run
  // on every CPU this test may.
  const cpus = (pid: number | 'self') => /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  for (const r of [0, 1]) t.equal(cpus(cluster.pid(r)!), cpus('self'), `replica ${r} runs unbound`);
  const [c0, ...rest] = referenceCases('tiny-llama');
  const answers = await frozen(cluster.pid(0)!, async () => {
    // Both idle: the first goes to replica 0 (the lowest index), which holds it; the next one to replica 1.
    const first = tokens(cluster.base, c0!.input_ids, c0!.max_new_tokens).then((r) => ({ c: c0!, r }));
    t.ok(await outstanding(cluster.metrics, [1, 0]), 'the first request waits on replica 0');
    const second = rest.map(async (c) => ({ c, r: await tokens(cluster.base, c.input_ids, c.max_new_tokens) }));
    t.ok(await waitFor(async () => (await perReplica(cluster.metrics, 'trtllm_replica_requests_routed_total'))[1]! >= 1), 'replica 1 got one');
    return [first, ...second];
  });
  for (const { c, r } of await Promise.all(answers)) {
    t.equal(r.status, 200);
    t.same((r.json.output_ids as number[]).slice(c.input_ids.length), c.greedy_output_ids, `${c.name}: = HF greedy (= one rank)`);
  }
  const routed = await perReplica(cluster.metrics, 'trtllm_replica_requests_routed_total');
  t.equal(routed[0]! + routed[1]!, 4, `every request routed once (${routed})`);
  t.ok(routed[0]! >= 1 && routed[1]! >= 1, `both replicas served (${routed})`);
  // Sequentially, idle replicas: every answer still equals HF.
  for (const c of referenceCases('tiny-llama')) {
    const r = await tokens(cluster.base, c.input_ids, c.max_new_tokens);
    t.same((r.json.output_ids as number[]).slice(c.input_ids.length), c.greedy_output_ids, `${c.name} again`);
  }

  t.ok(await waitFor(() => cluster.pid(1) !== undefined), 'replica 1\'s pid is known');
  process.kill(cluster.pid(1)!, 'SIGKILL');
  const result = await cluster.child;
  t.not(result.exitCode, 0, `exit code ${result.exitCode}`);
  t.match(cluster.output(), /Root cause:\n\s+rank 0: --dp without --isolate-failures: model tiny-llama replica 1 failed: its rank 0 \(pid \d+ on \S+\) exited/);
  await noneLeft(t, cluster.marker);
});

t.test('--router kv: a prompt sharing cached blocks goes to the replica holding them', async (t) => {
  const cluster = await startDp(['--router', 'kv', '--enable-kv-cache-reuse']);
  t.teardown(() => { cluster.child.kill('SIGKILL'); });
  t.ok(await cluster.ready, `ready (output: ${cluster.output().slice(-2000)})`);
  t.ok(await waitFor(() => cluster.pid(0) !== undefined), 'replica 0\'s pid is known');
  // Replica 0 holds an unrelated request: P goes to replica 1 (no prefix anywhere; fewer outstanding).
  const p = ids(48, 1);
  const held = await frozen(cluster.pid(0)!, async () => {
    const x = tokens(cluster.base, ids(20, 4), 2);
    t.ok(await outstanding(cluster.metrics, [1, 0]), 'the unrelated request waits on replica 0');
    t.equal((await tokens(cluster.base, p, 2)).status, 200, 'P answered by replica 1');
    return { x };  // (not the promise itself: returning it would wait for the frozen replica)
  });
  t.equal((await held.x).status, 200);
  const afterP = await perReplica(cluster.metrics, 'trtllm_replica_requests_routed_total');
  t.same(afterP, [1, 1], 'one request on each replica');
  const r = 1;
  t.ok(await outstanding(cluster.metrics, [0, 0]), 'both idle');
  // The router learns P's blocks from replica 1's events; reading them through the endpoint feeds the same index,
  // so once they are seen the choice below does not depend on how fast a replica answers the router's poll.
  const seen: any[] = [];
  t.ok(await waitFor(async () => {
    seen.push(...await (await fetch(`${cluster.base}/kv_cache_events`, { method: 'POST' })).json() as any[]);
    return seen.some((e) => e.replica === r && e.data.type === 'stored');
  }), 'P\'s stored blocks reported by replica 1');
  const reusedBefore = await perReplica(cluster.metrics, 'trtllm_replica_kv_cache_reused_blocks');
  // Both idle: least-load would pick replica 0; kv picks the replica with P's blocks.
  const q = [...p.slice(0, 32), ...ids(20, 7)];
  const answer = await tokens(cluster.base, q, 2);
  t.equal(answer.status, 200);
  const afterQ = await perReplica(cluster.metrics, 'trtllm_replica_requests_routed_total');
  t.equal(afterQ[r]! - afterP[r]!, 1, `Q went to replica ${r}, where P ran (routed ${afterP} -> ${afterQ})`);
  // (Replicas report their KV stats twice a second: wait for the report, not for a time.)
  let reused = reusedBefore;
  await waitFor(async () => (reused = await perReplica(cluster.metrics, 'trtllm_replica_kv_cache_reused_blocks'))[r]! - reusedBefore[r]! >= 2);
  t.ok(reused[r]! - reusedBefore[r]! >= 2, `replica ${r} reused P's two shared blocks (${reusedBefore} -> ${reused})`);
  t.equal(reused[1 - r], reusedBefore[1 - r], 'the other replica reused nothing');
  // The events stay readable by an external router, each with its replica.
  const events = await (await fetch(`${cluster.base}/kv_cache_events`, { method: 'POST' })).json() as any[];
  t.ok(events.some((e) => e.replica === r && e.data.type === 'stored'), 'stored events tagged with the replica');
  cluster.child.kill('SIGTERM');
  t.equal((await cluster.child).exitCode, 0, 'SIGTERM drains and exits 0');
  await noneLeft(t, cluster.marker);
});

t.test('--isolate-failures: a dead replica\'s request fails naming it, the other keeps serving', async (t) => {
  const cluster = await startDp(['--isolate-failures']);
  t.teardown(() => { cluster.child.kill('SIGKILL'); });
  t.ok(await cluster.ready, `ready (output: ${cluster.output().slice(-2000)})`);
  t.ok(await waitFor(() => cluster.pid(0) !== undefined && cluster.pid(1) !== undefined), 'the replicas\' pids are known');
  const c = referenceCases('tiny-llama')[0]!;
  const first = await frozen(cluster.pid(0)!, async () => {
    const a = tokens(cluster.base, c.input_ids, c.max_new_tokens);  // replica 0, which holds it
    t.ok(await outstanding(cluster.metrics, [1, 0]));
    await frozen(cluster.pid(1)!, async () => {
      const b = tokens(cluster.base, c.input_ids, c.max_new_tokens);  // replica 1, killed while it holds it
      t.ok(await outstanding(cluster.metrics, [1, 1]));
      process.kill(cluster.pid(1)!, 'SIGKILL');
      const cut = await b;
      t.equal(cut.status, 503, 'the dead replica\'s request fails');
      t.match(cut.json.error, /model 'tiny-llama' replica 1 is not available: its rank 0 \(pid \d+ on \S+\) exited/, 'naming it');
    }).catch(() => undefined);  // (SIGCONT to a dead process)
    return { a };  // (not the promise itself: returning it would wait for the frozen replica)
  });
  const a = await first.a;
  t.same((a.json.output_ids as number[]).slice(c.input_ids.length), c.greedy_output_ids, 'replica 0\'s request completes');
  t.ok(await waitFor(async () => (await perReplica(cluster.metrics, 'trtllm_replica_ready'))[1] === 0), 'replica 1 is dropped');
  for (let i = 0; i < 3; i += 1) {
    const r = await tokens(cluster.base, c.input_ids, c.max_new_tokens);
    t.same((r.json.output_ids as number[]).slice(c.input_ids.length), c.greedy_output_ids, 'replica 0 keeps serving');
  }
  t.equal((await fetch(`${cluster.base}/v2/health/ready`)).status, 200, 'the model stays ready while a replica serves');
  cluster.child.kill('SIGTERM');
  t.equal((await cluster.child).exitCode, 0);
  await noneLeft(t, cluster.marker);
});

t.test('--no-spawn: mpirun starts both replicas\' ranks up front; the same answers through both; round-robin; a clean stop', async (t) => {
  const cluster = await startDp(['--no-spawn', '--router', 'round-robin']);
  t.teardown(() => { cluster.child.kill('SIGKILL'); });
  t.ok(await cluster.ready, `ready (output: ${cluster.output().slice(-2000)})`);
  t.match(cluster.output(), /ready after [\d.]+ s: 3 rank\(s\)/, 'mpirun started the orchestrator and both replicas\' ranks');
  t.same(await perReplica(cluster.metrics, 'trtllm_replica_ready'), [1, 1], 'both replicas ready');
  t.ok(await waitFor(() => cluster.pid(0) !== undefined && cluster.pid(1) !== undefined), 'the replicas\' pids are known');
  const [c0, c1] = referenceCases('tiny-llama');
  const answers = await frozen(cluster.pid(0)!, async () => {
    // Replica 0 holds the first; round-robin sends the second to replica 1.
    const first = tokens(cluster.base, c0!.input_ids, c0!.max_new_tokens);
    t.ok(await outstanding(cluster.metrics, [1, 0]), 'the first request waits on replica 0');
    const second = await tokens(cluster.base, c1!.input_ids, c1!.max_new_tokens);
    return { first, second };
  });
  t.same((answers.second.json.output_ids as number[]).slice(c1!.input_ids.length), c1!.greedy_output_ids, `${c1!.name} through replica 1 = HF greedy`);
  const first = await answers.first;
  t.same((first.json.output_ids as number[]).slice(c0!.input_ids.length), c0!.greedy_output_ids, `${c0!.name} through replica 0 = HF greedy`);
  t.same(await perReplica(cluster.metrics, 'trtllm_replica_requests_routed_total'), [1, 1], 'one request each');
  // One at a time to idle replicas (where least-load would always pick replica 0): each in turn.
  t.ok(await outstanding(cluster.metrics, [0, 0]), 'both idle');
  for (const expected of [[2, 1], [2, 2], [3, 2]]) {
    const r = await tokens(cluster.base, c0!.input_ids, c0!.max_new_tokens);
    t.same((r.json.output_ids as number[]).slice(c0!.input_ids.length), c0!.greedy_output_ids, `${c0!.name} = HF greedy`);
    t.same(await perReplica(cluster.metrics, 'trtllm_replica_requests_routed_total'), expected, `round-robin: routed ${expected}`);
  }
  cluster.child.kill('SIGTERM');
  t.equal((await cluster.child).exitCode, 0, 'SIGTERM drains and exits 0');
  t.match(cluster.output(), /all ranks stopped cleanly/);
  await noneLeft(t, cluster.marker);
});
