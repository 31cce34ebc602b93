#!/usr/bin/env node
// Entry point: the compiled CLI. `bash scripts/bootstrap.sh` builds dist/ (and the native addon) first.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'dist', 'launcher', 'cli.js');
if (!existsSync(cli)) {
  process.stderr.write(`trtllm-launch is not built yet (${cli} is missing): run \`bash scripts/bootstrap.sh\` first\n`);
  process.exit(1);
}
const { main } = await import(pathToFileURL(cli).href);
process.exitCode = await main(process.argv);
