// Defaults shared by the CLI and the scripts: the bundled model and the executor's batching limits.
import { join } from 'node:path';

import { packageRoot } from '../worker/common/package-root.js';

/** The model served when --model is not given: the bundled 17M-parameter Llama trained on the Brown corpus
 * (examples/models/brown-llama-17m, made by scripts/train/train_tiny_llama.py). */
export function defaultModelDir(): string {
  return join(packageRoot(), 'examples', 'models', 'brown-llama-17m');
}
