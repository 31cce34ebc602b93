// Defaults shared by the CLI and the scripts: the bundled model and the executor's batching limits.
import { join } from 'node:path';

import { packageRoot } from '../worker/binding/load-addon.js';

/** The model served when --model is not given: the bundled tiny Llama (random weights until a trained one ships). */
export function defaultModelDir(): string {
  return join(packageRoot(), 'test', 'fixtures', 'models', 'tiny-llama');
}
