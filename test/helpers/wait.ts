// Waiting for a state, never for a time: a test that needs "the rank is gone" or "the KV cache is free" polls for
// exactly that, with a bound so generous (a minute) that only a real failure — a hang, a leak — ever reaches it,
// however busy the machine is. The bound is not a speed requirement; speed is measured in bench/.
export const GENEROUS_MS = 60_000;
/** The same kind of bound for a whole command that starts a cluster (a Slurm job, mpirun and its ranks loading a
 *  model) and runs it: on a busy 2-core machine that alone can take minutes. */
export const LAUNCH_MS = 300_000;

/** Polls `check` until it holds; false only when it still does not hold after `ms`. */
export async function waitFor(check: () => boolean | Promise<boolean>, ms = GENEROUS_MS): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return check();
}
