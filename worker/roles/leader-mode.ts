// One rank of a leader-mode cluster (`trtllm-launch rank`, started by mpirun or srun for the launcher): rank 0 leads —
// it serves the frontend and its executor decides every iteration — and the other ranks follow its plans. Errors
// propagate; the command that started the process reports them.
import { hostname } from 'node:os';

import { loadAddon } from '../binding/load-addon.js';
import { leaderPidLine } from '../common/status-lines.js';
import { tieToLauncher, watchLauncherStdin } from '../lifeline.js';
import { servingBackend } from '../options/device-ids.js';
import { followerOptions } from '../options/executor-options.js';
import type { ServeCliOptions } from '../options/serve-option-table.js';
import { serveOptions } from '../options/serve-options-from-cli.js';
import type { ServeOptions } from '../options/serve-options.js';
import { initRank } from '../rank.js';
import { reportLiveness } from './liveness-report.js';

/** Takes this process's role from its MPI rank and runs it to the end; the exit code. */
export async function runRank(options: Readonly<ServeCliOptions>): Promise<number> {
  tieToLauncher();  // before MPI starts: from here on, this rank goes with whatever started it
  const info = initRank();
  // Every rank says when its liveness watch reports: a stall, or a hang that ends the gang (named in the root cause).
  if (info.worldSize > 1) reportLiveness(loadAddon());
  if (info.worldRank === 0) watchLauncherStdin();  // mpirun gives the launcher's lifeline to rank 0 alone
  // On the CPU backend GPU ids are ignored (the launcher said so), so a list shorter than this host's ranks is no
  // error there. Decided here, by this rank's own addon and GPUs: the launcher's host may have none.
  const own = servingBackend(options.device, loadAddon().buildInfo()) === 'cpu' ? { ...options, gpuDeviceIds: undefined } : options;
  // The grid comes from the launcher's plan (--tp/--pp); this rank's GPU from --gpu-device-ids by its local rank.
  const serve = serveOptions(own, { tp: options.tp ?? 1, pp: options.pp ?? 1 }, info.localRank);
  return info.worldRank === 0 ? lead(serve) : follow(serve);
}

/** Rank 0: the frontend and the scheduling executor, until SIGINT/SIGTERM drains it. */
async function lead(serve: ServeOptions): Promise<number> {
  // The supervisor signals this pid to drain the cluster (when it runs on the launcher's host).
  process.stdout.write(`${leaderPidLine(process.pid, hostname())}\n`);
  // The frontend's modules are loaded by the leader only: followers start faster without them.
  const { serveUntilSignal } = await import('../serve.js');
  return serveUntilSignal(serve);
}

/** Ranks 1..N-1: load a shard and apply the leader's plans until it releases them. */
async function follow(serve: ServeOptions): Promise<number> {
  // Followers stop when the leader releases them after its drain; a signal from mpirun must not cut that short.
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});
  await loadAddon().runFollower(serve.model, followerOptions(serve));
  return 0;
}
