// Requests that must start in one batch: enqueued while the executor's loop holds, then released, so the loop sees
// all of them at its next iteration however fast it is — the batch a test asserts on (paused requests, prompts
// next to decodes, outputs of a batch against a reference) is then the same on every machine and every run.
import type { NativeRequest, NativeResponse } from '../../worker/binding/addon-types.js';
import type { Executor } from '../../worker/executor/executor.js';

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
