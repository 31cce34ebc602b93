// Finds and loads the compiled addon once, and registers our error class with it.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

import type { Addon } from './addon-types.js';
import { TrtllmError } from '../common/errors.js';
import { packageRoot } from '../common/package-root.js';

const require = createRequire(import.meta.url);

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
