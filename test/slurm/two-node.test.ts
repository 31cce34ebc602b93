// Serving across two Slurm nodes: two slurmd, each in its own network namespace with its own hostname and address,
// a controller on the namespaces' bridge, and a `--nodes 2 --tp 2` job from `slurm submit`: one rank on each node,
// talking over TCP between the namespaces' addresses, must answer what one rank answers. Then a plain scancel ends
// the job (at once, as Slurm's srun does) with nothing left in either namespace. And the interactive way: inside
// a salloc allocation, the launcher on the login side (this machine's own namespace) runs the ranks on the nodes
// with srun, and Ctrl-C drains the leader that runs on another host. And `--dp 2 --nodes 2`: the orchestrator and
// replica 0 on h1, replica 1 on h2, both answering HF greedy, stopped with a drain.
// Skipped, with the reason, where this machine cannot create namespaces or run the Slurm daemons.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { execa } from 'execa';
import t from 'tap';

import { fixtureDir, referenceCases } from '../helpers/fixtures.js';
import { createNetnsHosts, netnsPids } from '../helpers/netns-hosts.js';
import { processesWith as processesCarrying } from '../helpers/processes.js';
import { pidsNamed, slurmUnavailable, startSlurm } from '../helpers/slurm-cluster.js';
import { GENEROUS_MS, waitFor } from '../helpers/wait.js';
import { BIN, freePort, oneRankAnswer, parseSubmit, processesWith, SEEDS_BODY, seedsCurl, showJob, trtllm, waitFinal, waitNoProcesses } from '../helpers/slurm-jobs.js';

const tag = `s${process.pid % 10000}`;
const subnet = `10.214.${(process.pid % 200) + 20}`;

let skip: string | false = false;
let cluster: Awaited<ReturnType<typeof startSlurm>> | undefined;
let hostsReady: Awaited<ReturnType<typeof createNetnsHosts>> | undefined;
const unavailable = await slurmUnavailable();
if (unavailable) skip = `no Slurm cluster here: ${unavailable}`;
else {
  hostsReady = await createNetnsHosts(tag, subnet, ['h1', 'h2']);
  if ('skip' in hostsReady) skip = hostsReady.skip;
  else {
    const nodes = hostsReady.hosts.map((h) => ({ name: h.name, addr: h.addr, netns: h.netns }));
    cluster = await startSlurm({ nodes, controllerAddr: hostsReady.bridgeAddr, cpusPerNode: 2 });
    if ('skip' in cluster) skip = `no Slurm cluster here: ${cluster.skip}`;
  }
}
// Daemons first, then the namespaces they live in.
t.teardown(async () => {
  if (cluster && 'stop' in cluster) await cluster.stop();
  if (hostsReady && 'remove' in hostsReady) await hostsReady.remove();
});

t.test('--nodes 2 --tp 2: one rank per namespace node, the answers of one rank; scancel leaves nothing', { skip }, async (t) => {
  if (!cluster || !('stop' in cluster) || !hostsReady || !('remove' in hostsReady)) return;
  const env = { ...cluster.env };
  const work = mkdtempSync(join(tmpdir(), 'trtl-slurm-2n-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const port = await freePort();
  const marker = `--http-port ${port}`;
  const stepdsBefore = new Set(pidsNamed('slurmstepd'));

  const r = await trtllm(['slurm', 'submit', '--model', fixtureDir('tiny-llama'), '--nodes', '2', '--tp', '2', '--threads', '1', '--tokens-per-block', '16',
    '--http-port', String(port), '--metrics-port', String(await freePort()), '--grpc-port', String(await freePort()), '--output-dir', 'logs', '--job-name', 'two'], work, env);
  t.equal(r.exitCode, 0, `submit exit 0${r.exitCode === 0 ? '' : ` (${r.all?.slice(-2500)})\n${cluster.daemonLogs()}`}`);
  const job = parseSubmit(r.all ?? '');
  t.match(r.all, /job \d+: RUNNING on h\[1-2\]/, 'both nodes allocated');
  t.equal(job.host, 'h1', 'the leader runs on the first node');
  t.equal(job.addr, `${subnet}.2`, 'reached at that node\'s own address');
  if (!job.jobId || !job.addr) return;

  const out = readFileSync(join(work, 'logs', `two-${job.jobId}.out`), 'utf8');
  t.match(out, new RegExp(`slurm step ${job.jobId}\\.0: task 0 of 2 on h1 \\(local 0\\) = MPI rank 0`), 'rank 0 on h1');
  t.match(out, new RegExp(`slurm step ${job.jobId}\\.0: task 1 of 2 on h2 \\(local 0\\) = MPI rank 1`), 'rank 1 on h2');
  const [h1, h2] = hostsReady.hosts;
  const inNs = async (netns: string) => new Set(await netnsPids(netns));
  const ranks = processesWith(marker).filter((p) => p.cmd.startsWith(process.execPath) && p.cmd.includes(' rank '));
  const ns1 = await inNs(h1!.netns);
  const ns2 = await inNs(h2!.netns);
  t.equal(ranks.filter((p) => ns1.has(p.pid)).length, 1, 'one rank process in h1\'s namespace');
  t.equal(ranks.filter((p) => ns2.has(p.pid)).length, 1, 'one rank process in h2\'s namespace');
  // The ranks' connection to each other: TCP between the two namespace addresses.
  const sockets = await execa('ip', ['netns', 'exec', h2!.netns, 'ss', '-tnp'], { reject: false, all: true });
  t.match(sockets.stdout, new RegExp(`${subnet.replace(/\./g, '\\.')}\\.3:\\d+\\s+${subnet.replace(/\./g, '\\.')}\\.2:\\d+\\s+users:\\(\\("node"`), 'rank 1 talks to h1 over TCP');

  const curl = await seedsCurl(`${job.addr}:${port}`);
  t.ok(curl.ok, `the seeds' curl answers${curl.ok ? '' : ` (${curl.raw.slice(0, 300)})`}`);
  t.equal(curl.json?.text_output, await oneRankAnswer(SEEDS_BODY), 'tp=2 across two nodes = one rank');
  for (const c of referenceCases('tiny-llama').slice(0, 2)) {
    const g = await fetch(`http://${job.addr}:${port}/v2/models/tensorrt_llm/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: c.input_ids, request_output_len: c.greedy_output_ids.length }) });
    t.same(((await g.json()) as { output_ids: number[] }).output_ids.slice(c.input_ids.length), c.greedy_output_ids, `${c.name}: greedy = HF transformers`);
  }

  const cancel = await execa('scancel', [job.jobId], { env, reject: false, all: true });
  t.equal(cancel.exitCode, 0, cancel.all);
  const info = await waitFinal(env, job.jobId);
  t.equal(info?.state, 'CANCELLED', 'scancel ended the job');
  t.same((await waitNoProcesses(marker)).map((p) => p.cmd.slice(0, 80)), [], 'no launcher, srun or rank left');
  // The step daemons finish after the job is reported final: wait for them before looking into the namespaces.
  const stepds = () => pidsNamed('slurmstepd').filter((p) => !stepdsBefore.has(p));
  await waitFor(() => stepds().length === 0);
  t.same(stepds(), [], 'no slurmstepd left');
  for (const h of hostsReady.hosts) {
    const left = async () => (await netnsPids(h.netns)).map((pid) => {
      try { return readFileSync(`/proc/${pid}/comm`, 'utf8').trim(); } catch { return 'gone'; }
    }).filter((c) => c !== 'gone');
    await waitFor(async () => JSON.stringify(await left()) === '["slurmd"]');
    t.same(await left(), ['slurmd'], `only slurmd left in ${h.name}'s namespace`);
  }
});

t.test('inside salloc from the login side: srun runs the ranks on the nodes, Ctrl-C drains the remote leader', { skip }, async (t) => {
  if (!cluster || !('stop' in cluster) || !hostsReady || !('remove' in hostsReady)) return;
  const env = { ...cluster.env };
  const alloc = await execa('salloc', ['--no-shell', '--nodes=2', '--ntasks-per-node=1', '--job-name=alloc'], { env, reject: false, all: true, timeout: GENEROUS_MS });
  const jobId = /Granted job allocation (\d+)/.exec(alloc.all ?? '')?.[1];
  t.ok(jobId, `salloc granted an allocation${jobId ? '' : ` (${alloc.all})`}`);
  if (!jobId) return;
  t.teardown(() => execa('scancel', [jobId], { env, reject: false }));
  const port = await freePort();
  let all = '';
  const launcher = execa(process.execPath, [BIN, '--model', fixtureDir('tiny-llama'), '--tp', '2', '--threads', '1', '--tokens-per-block', '16',
    '--http-port', String(port), '--metrics-port', String(await freePort()), '--grpc-port', String(await freePort()), '--drain-timeout', '10'], { env: { ...env, SLURM_JOB_ID: jobId }, reject: false, all: true });
  const ready = await new Promise<boolean>((resolve) => {
    launcher.all!.on('data', (chunk: Buffer) => {
      all += chunk.toString();
      if (/\[launcher\] ready after[^]*Ctrl-C[^\n]*drains and stops every rank/.test(all)) resolve(true);  // the banner's last line
    });
    void launcher.then(() => resolve(false));
  });
  t.ok(ready, `ready${ready ? '' : ` (${all.slice(-2000)})`}`);
  t.match(all, new RegExp(`serving on http://h1:${port} `), 'the endpoint names the leader\'s node');
  t.match(all, /slurm step \d+\.\d+: task 1 of 2 on h2 /);
  const curl = await seedsCurl(`${subnet}.2:${port}`);
  t.equal(curl.json?.text_output, await oneRankAnswer(SEEDS_BODY), 'tp=2 = one rank');
  launcher.kill('SIGINT');
  const result = await launcher;
  // On failure: everything from the drain on, srun's own lines included (the task that failed and how), not a tail.
  const fromDrain = all.slice(Math.max(0, all.lastIndexOf('[launcher] SIGINT')));
  t.equal(result.exitCode, 0, `exit 0 after Ctrl-C${result.exitCode === 0 ? '' : ` (${fromDrain.slice(0, 8000)})`}`);
  t.match(all, /\[rank 0\] .*SIGTERM: draining/, 'the leader on h1 drained');
  t.match(all, /\[launcher\] all ranks stopped cleanly\n/);
  t.same((await waitNoProcesses(`--http-port ${port}`)).map((p) => p.cmd.slice(0, 80)), [], 'no srun or rank left');
});

t.test('--dp 2 --nodes 2: the orchestrator and replica 0 on h1, replica 1 on h2; HF greedy through both; a drain stops it', { skip }, async (t) => {
  if (!cluster || !('stop' in cluster) || !hostsReady || !('remove' in hostsReady)) return;
  const env = { ...cluster.env };
  const work = mkdtempSync(join(tmpdir(), 'trtl-slurm-2n-dp-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const port = await freePort();
  const metricsPort = await freePort();
  const r = await trtllm(['slurm', 'submit', '--model', fixtureDir('tiny-llama'), '--nodes', '2', '--dp', '2', '--tp', '1', '--threads', '1',
    '--tokens-per-block', '16', '--router', 'round-robin', '--http-port', String(port), '--metrics-port', String(metricsPort),
    '--grpc-port', String(await freePort()), '--output-dir', 'logs', '--job-name', 'dp2n', '--drain-timeout', '20'], work, env);
  t.equal(r.exitCode, 0, `submit exit 0${r.exitCode === 0 ? '' : ` (${r.all?.slice(-2500)})\n${cluster.daemonLogs()}`}`);
  const job = parseSubmit(r.all ?? '');
  t.equal(job.host, 'h1', 'the orchestrator runs on the first node');
  if (!job.jobId || !job.addr) return;
  t.teardown(() => execa('scancel', [job.jobId!], { env, reject: false }));
  // Where each replica's rank runs, as the orchestrator reports it (pid@host; each node has its own hostname).
  const out = readFileSync(join(work, 'logs', `dp2n-${job.jobId}.out`), 'utf8');
  t.match(out, /replica 0: ready on 1 rank\(s\) \(pid \d+@h1\)/, 'replica 0 on h1, beside the orchestrator');
  t.match(out, /replica 1: ready on 1 rank\(s\) \(pid \d+@h2\)/, 'replica 1 on h2');
  for (const c of referenceCases('tiny-llama')) {
    const g = await fetch(`http://${job.addr}:${port}/v2/models/tensorrt_llm/generate`, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input_ids: c.input_ids, request_output_len: c.greedy_output_ids.length }) });
    t.same(((await g.json()) as { output_ids: number[] }).output_ids.slice(c.input_ids.length), c.greedy_output_ids, `${c.name}: greedy = HF transformers`);
  }
  const text = await (await fetch(`http://${job.addr}:${metricsPort}/metrics`)).text();
  const routed = [0, 1].map((i) => Number(/ (\d+)$/.exec(text.split('\n').find((l) => l.startsWith('trtllm_replica_requests_routed_total{') && l.includes(`replica="${i}"`)) ?? '')?.[1]));
  t.ok(routed[0]! >= 1 && routed[1]! >= 1, `round-robin: both nodes' replicas served (${routed})`);
  const stop = await trtllm(['slurm', 'stop', job.jobId], work, env);
  t.equal(stop.exitCode, 0, `stop exit 0${stop.exitCode === 0 ? '' : ` (${stop.all})`}`);
  t.match(stop.all, new RegExp(`job ${job.jobId} stopped cleanly: COMPLETED, exit code 0:0`));
  t.equal((await showJob(env, job.jobId))?.state, 'COMPLETED');
  t.same((await waitNoProcesses(`--http-port ${port}`)).map((p) => p.cmd.slice(0, 80)), [], 'no launcher or srun left');
  const marker = `"httpPort":${port},`;  // in every rank's plan (its environment)
  await waitFor(() => processesCarrying(marker, true).length === 0);
  t.same(processesCarrying(marker, true).map((p) => p.cmd.slice(0, 80)), [], 'no orchestrator or replica rank left');
});
