// A rank never outlives the launcher that started it, nor the mpirun, orted or slurmstepd it runs under: an orphaned
// cluster keeps serving and holding its ports, and the next start on them fails (issue 22). Four layers, each
// covering what the one before cannot:
//  1. the launcher runs mpirun/srun under `setpriv --pdeathsig TERM` (launch-plan.ts): when the launcher dies, mpirun
//     ends the job in order — every rank on every host, its session directory and shared memory removed — and srun
//     kills its tasks;
//  2. here, every rank asks the kernel for SIGKILL the moment its parent exits (PR_SET_PDEATHSIG): mpirun on the
//     launcher's host, orted on the others, slurmstepd under srun — so a rank goes with the process that started it,
//     however that one ended (SIGKILL included), on every host, with no launcher needed;
//  3. here, a rank on the launcher's host watches the launcher itself (its pid and start time, so a reused pid is
//     not taken for it): covers a machine without setpriv, and an mpirun that hangs instead of ending;
//  4. the launcher, when it lives on, sweeps its host once mpirun has exited (launcher/cluster/job-sweep.ts).
import { constants, hostname } from 'node:os';

import { loadAddon } from './binding/load-addon.js';
import { LAUNCHER_ENV, launcherAlive, parseLauncherIdentity } from './common/launcher-identity.js';

// Four looks a second: a dead launcher's ranks stop well within a second, for a /proc read each.
const WATCH_MS = 250;

/** Ties this rank's life to its parent and to the launcher (layers 2 and 3 above); call first thing in a rank. */
export function tieToLauncher(env: NodeJS.ProcessEnv = process.env): void {
  loadAddon().setParentDeathSignal(constants.signals.SIGKILL);
  watchLauncher(env);
}

/** Layer 3: SIGKILL to this process once the launcher named in the environment is gone (same host only: a pid
 * means nothing on another one). A launcher not visible from here at the start (another pid namespace, or already
 * gone, when layers 1 and 2 act) is not watched: a rank must never end because it cannot see its launcher. */
export function watchLauncher(env: NodeJS.ProcessEnv = process.env): boolean {
  const launcher = parseLauncherIdentity(env[LAUNCHER_ENV]);
  if (!launcher || launcher.host !== hostname() || !launcherAlive(launcher)) return false;
  const timer = setInterval(() => {
    if (launcherAlive(launcher)) return;
    try {
      process.stderr.write(`the launcher (pid ${launcher.pid} on ${launcher.host}) is gone: this rank stops\n`);
    } catch {
      // nobody may read it any more
    }
    process.kill(process.pid, 'SIGKILL');  // no MPI_Finalize: it would wait for peers that are going too
  }, WATCH_MS);
  timer.unref();
  return true;
}
