// Finds and loads the compiled addon once, and registers our error class with it.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import type { Addon } from './addon-types.js';
import { TrtllmError } from './errors.js';

const require = createRequire(import.meta.url);

/** The repository root: two levels above this file in source (worker/binding) and three in dist. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i += 1) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    dir = resolve(dir, '..');
  }
  throw new TrtllmError('cannot find the trtllm-launch package root', 'internal');
}

export function addonPath(): string {
  return process.env.TRTLLM_ADDON_PATH ?? join(packageRoot(), 'build', 'native', 'Release', 'trtllm_native.node');
}

let cached: Addon | undefined;

export function loadAddon(): Addon {
  if (cached) return cached;
  const path = addonPath();
  if (!existsSync(path)) {
    throw new TrtllmError(
      `the native addon is not built (${path} is missing); run \`bash scripts/bootstrap.sh\` to build it`,
      'addon_missing',
    );
  }
  const addon = require(path) as Addon;
  addon.setErrorClass(TrtllmError);
  cached = addon;
  return addon;
}
