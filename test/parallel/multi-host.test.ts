// Leader mode across two "hosts" without a cluster: two network namespaces joined by veth pairs on a bridge, an
// mpirun hostfile naming them, and an rsh agent that starts each host's daemon inside its namespace. Ranks can
// only talk over TCP on the namespaces' own addresses (no shared memory), and tp=2 must still give HF's outputs.
// Skipped, with the reason, where this machine cannot create namespaces (not root, no CAP_NET_ADMIN).
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { execa } from 'execa';
import t from 'tap';

import { packageRoot } from '../../worker/common/package-root.js';
import { fixtureDir } from '../helpers/fixtures.js';

const tag = `t${process.pid % 10000}`;
const subnet = `10.213.${(process.pid % 200) + 20}`;  // the test hosts' own addresses, nothing else is contacted
const hosts = ['h1', 'h2'];
const bridge = `trbr${tag}`;

async function sh(command: string): Promise<{ ok: boolean; out: string }> {
  const r = await execa('sh', ['-c', command], { reject: false, all: true });
  return { ok: r.exitCode === 0, out: r.all };
}

async function teardown(): Promise<void> {
  for (const [i, h] of hosts.entries()) {
    await sh(`ip netns del trtl-${tag}-${h} 2>/dev/null; ip link del trv${tag}${i} 2>/dev/null`);
  }
  await sh(`ip link del ${bridge} 2>/dev/null`);
}

async function setup(): Promise<string | undefined> {
  const steps = [`ip link add ${bridge} type bridge`, `ip addr add ${subnet}.1/24 dev ${bridge}`, `ip link set ${bridge} up`];
  for (const [i, h] of hosts.entries()) {
    const ns = `trtl-${tag}-${h}`;
    steps.push(
      `ip netns add ${ns}`,
      `ip link add trv${tag}${i} type veth peer name eth0 netns ${ns}`,
      `ip link set trv${tag}${i} master ${bridge} up`,
      `ip -n ${ns} addr add ${subnet}.${i + 2}/24 dev eth0`,
      `ip -n ${ns} link set eth0 up`,
      `ip -n ${ns} link set lo up`,
    );
  }
  for (const step of steps) {
    const r = await sh(step);
    if (!r.ok) return `${step}: ${r.out.trim()}`;
  }
  return undefined;
}

const failure = await setup();
t.teardown(teardown);
const skip = failure ? `cannot create network namespaces here (${failure}); run as root on Linux to include this test` : false;

t.test('tp=2 across two network-namespace hosts matches HF transformers', { skip }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'trtl-netns-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const agent = join(dir, 'rsh-netns.sh');
  // mpirun calls the agent as `<agent> <host> <command...>`: run the command inside that host's namespace.
  writeFileSync(agent, `#!/bin/sh\nhost="$1"; shift\nexec ip netns exec "trtl-${tag}-$host" sh -c "$*"\n`);
  chmodSync(agent, 0o755);
  const hostfile = join(dir, 'hosts');
  writeFileSync(hostfile, hosts.map((h) => `${h} slots=1`).join('\n') + '\n');
  const program = join(packageRoot(), 'dist', 'test', 'programs', 'parallel-check.js');
  const launch = () => execa('mpirun', [
    '-np', '2', '--hostfile', hostfile, '--mca', 'plm_rsh_agent', agent,
    '--mca', 'oob_tcp_if_include', `${subnet}.0/24`, '--mca', 'btl', 'tcp,self', '--mca', 'btl_tcp_if_include', `${subnet}.0/24`,
    '-x', 'OMP_NUM_THREADS=1', '-x', `RESULT_FILE=${join(dir, 'result.txt')}`, 'node', program, fixtureDir('tiny-llama'), '2', '1', 'tiny-llama',
  ], { reject: false, all: true, timeout: 120_000, env: { OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1' } });
  let child = await launch();
  // Open MPI's remote daemon (orted) has been seen to crash while starting inside a namespace (a segfault in its
  // hwloc component), before any rank of ours ran: that is the test host's fault, so it gets two more tries (one
  // was not always enough on a busy 2-core machine, 2026-11-26).
  for (let retry = 1; retry <= 2 && child.exitCode !== 0 && /ORTE was unable to reliably start one or more daemons/.test(child.all ?? ''); retry += 1) {
    t.comment(`orted did not start (${(child.all ?? '').split('\n').find((l) => /Segmentation|signal/.test(l)) ?? 'no reason given'}); try ${retry + 1} of 3`);
    child = await launch();
  }
  t.equal(child.exitCode, 0, 'every rank exits 0');
  // The leader writes its result to a file: mpirun interleaves the ranks' stdout.
  const resultFile = join(dir, 'result.txt');
  const line = existsSync(resultFile) ? readFileSync(resultFile, 'utf8').trim() : undefined;
  if (!line) {
    t.fail(`no result: ${child.all.slice(-2000)}`);
    return;
  }
  const r = JSON.parse(line.slice(7)) as { worldSize: number; greedyMatchesReference: boolean[]; contextLogitsError: number[]; beam2MatchesReference: boolean; kvAllFree: boolean };
  t.equal(r.worldSize, 2);
  t.same(r.greedyMatchesReference, [true, true, true, true], 'greedy = HF transformers');
  t.ok(r.contextLogitsError.every((e) => e < 1e-4), 'context logits within 1e-4');
  t.ok(r.beam2MatchesReference, 'beam search = HF transformers');
  t.ok(r.kvAllFree, 'KV all free');
});
