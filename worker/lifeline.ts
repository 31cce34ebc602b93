// A rank never outlives the launcher that started it, nor the mpirun, orted or slurmstepd it runs under: an orphaned
// cluster keeps serving and holding its ports, and the next start on them fails (issue 22). Four layers, each
// covering what the others cannot:
//  1. the launcher's death reaches the job once, through what starts it. mpirun: its stdin is a pipe from the
//     launcher that is never written, which mpirun forwards to rank 0 wherever rank 0 runs; its end (the kernel
//     closes it when the launcher dies, kill -9 included) makes rank 0 stop, and mpirun then ends the job in order —
//     every rank on every host, its session directory and shared memory removed. (Not setpriv --pdeathsig TERM on
//     mpirun: the kernel sends that signal once per launcher thread that dies, and mpirun takes a second SIGTERM
//     within 5 s as "force": it exits at once, leaving its files.) srun: it runs under setpriv --pdeathsig TERM,
//     and answers every SIGTERM by killing its tasks (launch-plan.ts);
//  2. every rank asks the kernel for SIGKILL the moment its parent exits (PR_SET_PDEATHSIG): mpirun on the
//     launcher's host, orted on the others, slurmstepd under srun — a rank goes with the process that started it,
//     however that one ended, on every host, with no launcher needed;
//  3. a rank on the launcher's host watches the launcher itself (its pid and start time, so a reused pid is not taken
//     for it): covers a rank 0 that cannot read its stdin (hung), and every follower of this host;
//  4. the launcher, when it lives on, sweeps its host once mpirun/srun has exited (launcher/cluster/job-sweep.ts).
import { readFileSync } from 'node:fs';
import { constants, hostname } from 'node:os';

import { loadAddon } from './binding/load-addon.js';
import { LAUNCHER_ENV, launcherAlive, LIFELINE_STDIN_ENV, parseLauncherIdentity } from './common/launcher-identity.js';

// Four looks a second: a dead launcher's ranks stop well within a second, for a /proc read each.
const WATCH_MS = 250;

/** Ties this rank's life to its parent and to the launcher (layers 2 and 3 above); call first thing in a rank. */
export function tieToLauncher(env: NodeJS.ProcessEnv = process.env): void {
  loadAddon().setParentDeathSignal(constants.signals.SIGKILL);
  watchLauncher(env);
}

/** Stops this process now: no MPI_Finalize, which would wait for peers that are going too. */
function stop(why: string): never {
  try {
    process.stderr.write(`${why}: this rank stops\n`);
  } catch {
    // nobody may read it any more
  }
  process.kill(process.pid, 'SIGKILL');
  throw new Error('unreachable');
}

/** Whether this process's parent was started with the same launcher identity: then the parent (mpirun) is the
 * launcher's child, in this pid namespace, and a launcher pid that is not alive here really is gone. */
function parentLaunchedBy(identity: string): boolean {
  try {
    return `\0${readFileSync(`/proc/${process.ppid}/environ`, 'utf8')}`.includes(`\0${LAUNCHER_ENV}=${identity}\0`);
  } catch {
    return false;
  }
}

/** Layer 3: SIGKILL to this process once the launcher named in the environment is gone (same host only: a pid
 * means nothing on another one). A launcher not visible from here (another pid namespace) is not watched: a rank must
 * never end because it cannot see its launcher; one that died before this rank started is told from that by the
 * parent (see parentLaunchedBy). */
export function watchLauncher(env: NodeJS.ProcessEnv = process.env): boolean {
  const identity = env[LAUNCHER_ENV];
  const launcher = parseLauncherIdentity(identity);
  if (!launcher || launcher.host !== hostname()) return false;
  const gone = `the launcher (pid ${launcher.pid} on ${launcher.host}) is gone`;
  if (!launcherAlive(launcher)) {
    if (parentLaunchedBy(identity!)) stop(gone);
    return false;
  }
  const timer = setInterval(() => {
    if (!launcherAlive(launcher)) stop(gone);
  }, WATCH_MS);
  timer.unref();
  return true;
}

/** Layer 1 under mpirun, for the process mpirun gives the launcher's stdin (rank 0 of the job it started: the leader,
 * the orchestrator): that stdin ends when the launcher dies. Nothing is ever written to it; it is read only to see its
 * end, and does not keep the process alive. */
export function watchLauncherStdin(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env[LIFELINE_STDIN_ENV] !== '1') return false;
  const stdin = process.stdin as NodeJS.ReadStream & { unref?: () => void };
  stdin.on('data', () => {});
  stdin.once('end', () => stop('the launcher\'s stdin pipe closed (the launcher is gone)'));
  stdin.once('error', () => stop('the launcher\'s stdin pipe failed (the launcher is gone)'));
  stdin.unref?.();
  return true;
}
