// Orderings tests get from the executor's test hold (Executor.holdIterations): the loop runs exactly what a test
// allows, so what it asserts happens in that order on every machine, however fast or slow.
import type { NativeRequest, NativeResponse } from '../../worker/binding/addon-types.js';
import type { Executor } from '../../worker/executor/executor.js';

/** Requests that must start in one batch: enqueued while the loop holds, then released, so the loop sees all of them
 * at its next iteration — the batch a test asserts on (paused requests, prompts next to decodes, outputs of a batch
 * against a reference) is then the same on every run. */
export function generateTogether(executor: Executor, requests: readonly NativeRequest[]): Promise<NativeResponse[]> {
  executor.holdIterations(0);
  let pending: Promise<NativeResponse>[];
  try {
    pending = requests.map((r) => executor.generate(r));
  } finally {
    executor.holdIterations(-1);
  }
  return Promise.all(pending);
}

/** A streamed request cancelled once its first iteration has answered: the loop holds after that one iteration
 * until the cancel is in, so the request ends `cancelled` after exactly one token. Every response, in order. */
export async function cancelAfterOneIteration(executor: Executor, request: NativeRequest): Promise<NativeResponse[]> {
  executor.holdIterations(1);
  const handle = executor.enqueue({ ...request, streaming: true });
  const seen: NativeResponse[] = [];
  for await (const r of handle) {
    seen.push(r);
    if (seen.length === 1) {
      handle.cancel();
      executor.holdIterations(-1);
    }
  }
  return seen;
}
