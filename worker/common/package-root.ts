// The installed package's root directory, where the launcher finds package.json, bin/, examples/ (the bundled model),
// the proto file and the built addon. Shared by the launcher and the worker, so it lives outside worker/binding (which
// only the worker's addon loading needs).
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { TrtllmError } from './errors.js';

/** The repository root: two levels above this file in source (worker/common) and three in dist. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i += 1) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    dir = resolve(dir, '..');
  }
  throw new TrtllmError('cannot find the trtllm-launch package root', 'internal');
}

/** The model served when --model is not given: the bundled 17M-parameter Llama trained on the Brown corpus
 * (examples/models/brown-llama-17m, made by scripts/train/train_tiny_llama.py). */
export function defaultModelDir(): string {
  return join(packageRoot(), 'examples', 'models', 'brown-llama-17m');
}
