// A real Slurm cluster for one test file: its own munged, slurmctld and slurmd(s) (Debian's slurm-wlm), with
// state, spool, logs and munge key under a temporary directory and ports nobody else uses. A node is either this
// machine, or a "host" of its own: a network namespace with its own address, plus its own hostname (UTS
// namespace) and its own Slurm TmpFS (mount namespace). stop() cancels every job, stops the daemons, kills anything
// left in the namespaces and removes it all. Where this machine cannot run it, `skip` says why.
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';

import { execa, type ResultPromise } from 'execa';

import { GENEROUS_MS, waitFor } from './wait.js';
import { freePort } from './free-port.js';

export interface SlurmNodeSpec {
  name: string;
  addr: string;
  netns?: string | undefined;   // run this node's slurmd inside that network namespace
}

export interface SlurmCluster {
  dir: string;
  conf: string;
  env: Record<string, string>;  // what a client command needs: SLURM_CONF
  nodes: SlurmNodeSpec[];
  daemonLogs(): string;
  stop(): Promise<void>;
}

const BINARIES = ['munged', 'munge', 'slurmctld', 'slurmd', 'sbatch', 'salloc', 'srun', 'scontrol', 'scancel', 'squeue', 'sinfo'];


async function sh(command: string): Promise<{ ok: boolean; out: string }> {
  const r = await execa('sh', ['-c', command], { reject: false, all: true });
  return { ok: r.exitCode === 0, out: r.all ?? '' };
}

/** Why this machine cannot run a Slurm cluster for tests, or undefined when it can try. */
export async function slurmUnavailable(): Promise<string | undefined> {
  if (process.platform !== 'linux') return `Slurm tests need Linux (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return 'Slurm tests start munged, slurmctld and slurmd as root: run the tests as root to include them';
  const missing: string[] = [];
  for (const b of BINARIES) if (!(await sh(`command -v ${b}`)).ok) missing.push(b);
  if (missing.length > 0) {
    return `Slurm is not installed (${missing.join(', ')} not on PATH): scripts/bootstrap.sh installs slurmctld slurmd slurm-client munge as root`;
  }
  return undefined;
}

/** pids of the processes now running whose command name is `name` (slurmstepd, say). */
export function pidsNamed(name: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2)[0];
      if (state === 'Z') continue;
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === name) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function slurmConf(dir: string, controller: { name: string; addr?: string | undefined }, ports: { ctld: number; d: number }, nodes: SlurmNodeSpec[], cpus: number): string {
  const munge = join(dir, 'munge', 'munge.sock');
  return [
    '# Written by test/helpers/slurm-cluster.ts for one test file; removed with it.',
    'ClusterName=trtltest',
    `SlurmctldHost=${controller.name}${controller.addr ? `(${controller.addr})` : ''}`,
    `SlurmctldPort=${ports.ctld}`,
    `SlurmdPort=${ports.d}`,
    'AuthType=auth/munge',
    'CredType=cred/munge',
    `AuthInfo=socket=${munge}`,
    'SlurmUser=root',
    'SlurmdUser=root',
    `StateSaveLocation=${join(dir, 'state')}`,
    `SlurmdSpoolDir=${join(dir, 'spool')}/%n`,
    `SlurmctldPidFile=${join(dir, 'slurmctld.pid')}`,
    `SlurmdPidFile=${join(dir, 'slurmd-%n.pid')}`,
    `SlurmctldLogFile=${join(dir, 'log', 'slurmctld.log')}`,
    `SlurmdLogFile=${join(dir, 'log', 'slurmd-%n.log')}`,
    // Each node's PMIx client directories live under TmpFS; a namespace node gets its own (a mount namespace).
    `TmpFS=${join(dir, 'nodetmp')}`,
    // No cgroups needed: processes are tracked through their parents, tasks are not bound.
    'ProctrackType=proctrack/linuxproc',
    'TaskPlugin=task/none',
    'JobAcctGatherType=jobacct_gather/none',
    'AccountingStorageType=accounting_storage/none',
    'SelectType=select/cons_tres',
    'SelectTypeParameters=CR_CPU',
    'MpiDefault=none',
    'ReturnToService=2',
    'JobRequeue=0',
    'MailProg=/bin/true',
    // Nodes declare the CPUs the tests need, whatever this machine has.
    'SlurmdParameters=config_overrides',
    'KillWait=5',
    ...nodes.map((n) => `NodeName=${n.name} NodeAddr=${n.addr} CPUs=${cpus} RealMemory=1000 State=UNKNOWN`),
    `PartitionName=debug Nodes=${nodes.map((n) => n.name).join(',')} Default=YES MaxTime=INFINITE State=UP`,
    '',
  ].join('\n');
}

export interface StartOptions {
  nodes: SlurmNodeSpec[];
  controllerAddr?: string | undefined;
  cpusPerNode: number;
}

/** Starts the cluster; `{ skip }` with the reason (and the daemons' last log lines) when it cannot come up here. */
export async function startSlurm(options: StartOptions): Promise<SlurmCluster | { skip: string }> {
  const unavailable = await slurmUnavailable();
  if (unavailable) return { skip: unavailable };
  const dir = mkdtempSync(join(tmpdir(), 'trtl-slurm-'));
  for (const sub of ['munge', 'state', 'log', 'nodetmp', ...options.nodes.flatMap((n) => [join('spool', n.name), `nodetmp-${n.name}`])]) {
    mkdirSync(join(dir, sub), { recursive: true });
  }
  chmodSync(join(dir, 'munge'), 0o700);
  const key = join(dir, 'munge', 'munge.key');
  writeFileSync(key, randomBytes(1024), { mode: 0o400 });
  const conf = join(dir, 'slurm.conf');
  const controller = { name: hostname().split('.')[0]!, addr: options.controllerAddr };
  writeFileSync(conf, slurmConf(dir, controller, { ctld: await freePort(), d: await freePort() }, options.nodes, options.cpusPerNode));
  const env = { SLURM_CONF: conf };
  const daemons: ResultPromise[] = [];
  const stepdsBefore = new Set(pidsNamed('slurmstepd'));

  const daemonLogs = (): string => {
    const parts: string[] = [];
    for (const f of existsSync(join(dir, 'log')) ? readdirSync(join(dir, 'log')) : []) {
      parts.push(`--- ${f}\n${readFileSync(join(dir, 'log', f), 'utf8').split('\n').slice(-15).join('\n')}`);
    }
    return parts.join('\n');
  };

  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    // Jobs first: their steps end within KillWait, and no slurmstepd outlives the daemons.
    const jobs = await execa('squeue', ['-h', '-o', '%A'], { env, reject: false });
    const ids = (jobs.stdout ?? '').split('\n').map((s) => s.trim()).filter((s) => s !== '');
    if (ids.length > 0) {
      await execa('scancel', ids, { env, reject: false });
      await waitFor(async () => ((await execa('squeue', ['-h', '-o', '%A'], { env, reject: false })).stdout ?? '').trim() === '');
    }
    for (const d of [...daemons].reverse()) d.kill('SIGTERM');
    await Promise.race([Promise.all(daemons), new Promise((r) => setTimeout(r, 5000))]);
    for (const d of daemons) d.kill('SIGKILL');
    await Promise.all(daemons);
    // Whatever a job left behind: any process still in a node's namespace, any slurmstepd we started.
    for (const n of options.nodes) {
      if (!n.netns) continue;
      const pids = await execa('ip', ['netns', 'pids', n.netns], { reject: false });
      for (const pid of (pids.stdout ?? '').split('\n').filter((p) => /^\d+$/.test(p))) {
        try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone */ }
      }
    }
    for (const pid of pidsNamed('slurmstepd')) {
      if (stepdsBefore.has(pid)) continue;
      try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    }
    rmSync(dir, { recursive: true, force: true });
  };

  const spawn = (file: string, args: string[]) => {
    const child = execa(file, args, { env, reject: false, stdin: 'ignore', stdout: 'ignore', stderr: 'ignore', cleanup: true });
    daemons.push(child);
    return child;
  };
  spawn('munged', ['-F', '--force', `--socket=${join(dir, 'munge', 'munge.sock')}`, `--key-file=${key}`,
    `--log-file=${join(dir, 'log', 'munged.log')}`, `--pid-file=${join(dir, 'munge', 'munged.pid')}`, `--seed-file=${join(dir, 'munge', 'munged.seed')}`]);
  // slurmctld authenticates through munge from its first moment: start it once munged listens.
  await waitFor(() => existsSync(join(dir, 'munge', 'munge.sock')) || daemons.some((d) => d.exitCode !== null));
  spawn('slurmctld', ['-D', '-f', conf]);
  for (const n of options.nodes) {
    if (n.netns) {
      // nsenter joins only the network namespace (ip netns exec would also remount /sys and hide the cgroup mounts
      // slurmd looks at); unshare gives the node its hostname and its own TmpFS. Each step execs the next, so
      // the child is slurmd itself.
      const script = `hostname ${n.name} && mount --bind ${join(dir, `nodetmp-${n.name}`)} ${join(dir, 'nodetmp')} && exec slurmd -D -f ${conf} -N ${n.name}`;
      spawn('nsenter', [`--net=/run/netns/${n.netns}`, 'unshare', '--uts', '--mount', '--propagation', 'private', 'sh', '-c', script]);
    } else {
      spawn('slurmd', ['-D', '-f', conf, '-N', n.name]);
    }
  }
  // Up when every node is idle: registered with the controller, which accepts jobs for it.
  const deadline = Date.now() + GENEROUS_MS;
  let states = '';
  while (Date.now() < deadline) {
    const r = await execa('sinfo', ['-h', '-N', '-o', '%N %t'], { env, reject: false, all: true });
    states = (r.all ?? '').trim();
    const lines = states.split('\n').filter((l) => l !== '');
    if (lines.length === options.nodes.length && lines.every((l) => / idle$/.test(l))) {
      return { dir, conf, env, nodes: options.nodes, daemonLogs, stop };
    }
    if (daemons.some((d) => d.exitCode !== null)) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  const logs = daemonLogs();
  await stop();
  const reason = `the Slurm daemons did not come up here (sinfo: ${states || 'no answer'})\n${logs}`;
  if (process.env.TRTLLM_REQUIRE_SLURM === '1') throw new Error(reason);
  return { skip: reason };
}
