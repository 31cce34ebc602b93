// `trtllm-launch --world-size N`: the I/O around the launch plan (launch-plan.ts) — find mpirun or srun, check the
// ports, then print the plan (--dry-run) or run and supervise it.
import { accessSync, constants, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { hostname } from 'node:os';
import { delimiter, join } from 'node:path';

import { execa } from 'execa';

import { TrtllmError } from '../../worker/common/errors.js';
import { ownIdentity } from '../../worker/common/launcher-identity.js';
import { packageRoot } from '../../worker/common/package-root.js';
import { type LaunchPlanOptions, planLaunch, portChecks, type RankStarter } from './launch-plan.js';
import { type MpiFlavor, mpiFlavor, srunMpiPlugin } from './mpirun-command.js';
import { holdAfterPortCheck, portCheckHoldEnabled } from './port-check-hold.js';
import { superviseCluster } from './supervise.js';

export interface ClusterOptions extends LaunchPlanOptions {
  startupTimeoutSeconds: number;
  drainTimeoutSeconds: number;
  logDir?: string | undefined;
  dryRun: boolean;
  launcher?: 'mpirun' | 'srun';
}

/** Fails before any rank starts when a port is taken (by another cluster, typically). */
async function checkPortFree(host: string, port: number, option: string): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const server = createServer();
    server.once('error', (error: NodeJS.ErrnoException) => {
      reject(new TrtllmError(
        `${option} ${port} on ${host} is not free (${error.code}); another cluster may be running there: stop it or pick another port`,
        'invalid_argument',
      ));
    });
    server.listen(port, host, () => server.close(() => resolve()));
  });
}

/** mpirun on PATH, looked up here rather than by a shell: one process less on the way to ready. */
function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** srun and the MPI plugin this Slurm offers (pmix, else pmi2), inside an allocation. */
async function findSrun(): Promise<{ path: string; plugin: string }> {
  const path = onPath('srun');
  if (!path) {
    throw new TrtllmError('--launcher srun: srun is not on PATH; run inside a Slurm allocation (salloc/sbatch) or use --launcher mpirun', 'not_found');
  }
  const list = await execa(path, ['--mpi=list'], { reject: false, all: true });
  const plugin = srunMpiPlugin(list.all);
  if (plugin === 'none') {
    throw new TrtllmError(`--launcher srun: this Slurm offers neither pmix nor pmi2 (\`srun --mpi=list\` said: ${list.all.trim().replace(/\s+/g, ' ').slice(0, 300)}); ` +
      'the ranks could not join one MPI world. Ask your administrator for the pmix plugin, or use --launcher mpirun inside the allocation', 'unsupported');
  }
  return { path, plugin };
}

/** The rank step's drain request when the leader runs on another node (see superviseCluster). */
function signalStep(step: string): void {
  const scancel = onPath('scancel');
  if (scancel) void execa(scancel, ['--signal=TERM', step], { reject: false });
}

/** Under srun, a node's name as Slurm reaches it (NodeAddr): where names do not resolve from the launcher's host
 * (a login node, say), the address still does. Looked up once per node, in the background; the name meanwhile. */
function slurmAddresses(): (node: string) => string {
  const known = new Map<string, string>();
  const scontrol = onPath('scontrol');
  return (node) => {
    if (!known.has(node)) {
      known.set(node, node);
      if (scontrol) {
        void execa(scontrol, ['show', 'node', '-o', node], { reject: false }).then((r) => {
          const addr = / NodeAddr=(\S+)/.exec(r.stdout ?? '')?.[1];
          if (addr) known.set(node, addr);
        });
      }
    }
    return known.get(node)!;
  };
}

/** util-linux's setpriv, when it knows --pdeathsig (2.33 and later): srun then ends with the launcher
 * (launch-plan.ts, underParentDeathSignal). Without it the ranks' own watch of the launcher covers that. */
async function findSetpriv(): Promise<string | undefined> {
  const path = onPath('setpriv');
  if (!path) return undefined;
  const help = await execa(path, ['--help'], { reject: false, all: true });
  return help.all.includes('--pdeathsig') ? path : undefined;
}

async function findMpirun(): Promise<{ path: string; flavor: MpiFlavor }> {
  const path = onPath('mpirun');
  if (!path) {
    throw new TrtllmError('mpirun is not on PATH: install Open MPI (apt-get install openmpi-bin) or use --launcher none with --world-size 1', 'not_found');
  }
  const version = await execa(path, ['--version'], { reject: false, all: true });
  return { path, flavor: mpiFlavor(version.all) };
}

export async function launchCluster(options: ClusterOptions): Promise<number> {
  const launcher = options.launcher ?? 'mpirun';
  // The port checks overlap finding the launcher; both finish before any rank starts.
  const checks = options.dryRun ? [] : portChecks(options, launcher).map((c) => checkPortFree(options.host, c.port, c.option));
  const setpriv = launcher === 'srun' ? findSetpriv() : undefined;
  const starter: RankStarter = launcher === 'srun'
    ? { kind: 'srun', ...(await Promise.all([findSrun(), ...checks]))[0] }
    : { kind: 'mpirun', ...(await Promise.all([findMpirun(), ...checks]))[0] };
  const launcherIdentity = ownIdentity();
  const plan = planLaunch(options, {
    starter, packageRoot: packageRoot(), nodePath: process.execPath, isRoot: process.getuid?.() === 0, hostname: hostname(), env: process.env,
    setpriv: await setpriv, launcherIdentity,
  });
  if (options.dryRun) {
    for (const line of plan.dryRunLines) process.stdout.write(`${line}\n`);
    return 0;
  }
  if (portCheckHoldEnabled()) await holdAfterPortCheck();
  const addressOf = launcher === 'srun' ? slurmAddresses() : (host: string) => host;
  return superviseCluster({
    file: plan.file, args: plan.args, env: plan.env, worldSize: plan.np, launcher: plan.launcher,
    ...(plan.ranksShown === undefined ? {} : { ranksShown: plan.ranksShown }),
    ...(plan.leaderReportsExit ? { leaderReportsExit: true } : {}),
    stdinLifeline: plan.stdinLifeline,
    readyUrl: (leaderHost) => plan.readyUrl(leaderHost === undefined ? undefined : addressOf(leaderHost)),
    readyBanner: plan.readyBanner,
    startupTimeoutMs: options.startupTimeoutSeconds * 1000,
    drainTimeoutMs: options.drainTimeoutSeconds * 1000,
    logDir: options.logDir,
    signalLeaderStep: signalStep, forwardDrain: starter.kind === 'mpirun' && starter.flavor === 'openmpi',
    launcherIdentity, openMpiFiles: starter.kind === 'mpirun' && starter.flavor === 'openmpi',
  });
}
