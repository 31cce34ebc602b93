// Which rank this process is: MPI is started only when an MPI launcher (mpirun's ORTE/PRRTE, MPICH's hydra, or
// srun with a PMI plugin) left its environment behind, so a plain `node` start never tries to reach a runtime.
import type { CommInfo } from './binding/addon-types.js';
import { loadAddon } from './binding/load-addon.js';

const MPI_ENV_HINTS = ['OMPI_COMM_WORLD_SIZE', 'PMI_SIZE', 'PMIX_RANK', 'PMI_RANK'] as const;

/** True when an MPI launcher started this process (pure: reads only `env`). */
export function startedByMpi(env: NodeJS.ProcessEnv): boolean {
  return MPI_ENV_HINTS.some((name) => env[name] !== undefined);
}

/** Starts MPI when this process is one of several ranks; a single-rank CommInfo otherwise. */
export function initRank(env: NodeJS.ProcessEnv = process.env): CommInfo {
  return loadAddon().commInit(startedByMpi(env));
}
