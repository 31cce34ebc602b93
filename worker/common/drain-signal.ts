// The launcher's drain request to a leader it cannot signal itself — one on another host under Open MPI's mpirun:
// SIGUSR2 to mpirun, which forwards it to every process of the job. (A SIGTERM to mpirun would not do: mpirun passes
// it on and follows with SIGKILL after odls_base_sigkill_timeout, which the launcher sets to 0.) The leader or the
// orchestrator drains on it as on SIGTERM; every other rank process must outlive it, and Node's default for SIGUSR2
// ends the process.
export const DRAIN_SIGNAL = 'SIGUSR2';

/** Called first thing in every rank process: the forwarded drain request never ends one by itself. */
export function surviveDrainSignal(): void {
  process.on(DRAIN_SIGNAL, () => {});
}
