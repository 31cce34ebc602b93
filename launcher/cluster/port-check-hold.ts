// A test hook, set only by the environment (TRTLLM_TEST_HOLD_AFTER_PORT_CHECK=1; never a flag or a config key): the
// launcher stops between its check that the ports are free and the start of the ranks, says so, and goes on at the
// first line on its stdin. A test takes a port in exactly that window — the race a user meets when another server
// starts meanwhile — ordered by acknowledgements instead of by the clock. Without the variable nothing changes: the
// check runs as it always does, right before the ranks start.
import { createInterface } from 'node:readline';

export const PORT_CHECK_HOLD_ENV = 'TRTLLM_TEST_HOLD_AFTER_PORT_CHECK';

/** What the launcher prints when it holds (the test waits for this line). */
export const PORT_CHECK_HOLD_LINE = '[launcher] test hold: the ports were checked free; going on at a line on stdin';

export function portCheckHoldEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return env[PORT_CHECK_HOLD_ENV] === '1';
}

/** Says it holds, then waits for one line (or the end) of `input`. */
export async function holdAfterPortCheck(input: NodeJS.ReadableStream = process.stdin, out: (line: string) => void = (l) => process.stdout.write(`${l}\n`)): Promise<void> {
  out(PORT_CHECK_HOLD_LINE);
  const lines = createInterface({ input });
  await new Promise<void>((resolve) => {
    lines.once('line', () => resolve());
    lines.once('close', () => resolve());
  });
  lines.close();
}
