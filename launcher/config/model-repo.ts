// `--model-repo <dir>`: a directory of YAML model files. Serving one model from it is `--config <that file>`;
// several need the orchestrator (`--multi-model`), which is a later issue — so say that rather than pick one.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

import { InvalidArgumentError } from 'commander';

const MODEL_FILE = /\.ya?ml$/i;

/** The one model file among a directory's entries (pure); the error says what was found and what to do. */
export function pickModelFile(dir: string, entries: readonly string[], option = '--model-repo'): string {
  const files = entries.filter((name) => MODEL_FILE.test(name)).sort();
  if (files.length === 0) {
    throw new InvalidArgumentError(`${option} ${dir} has no model files (*.yaml, *.yml)`);
  }
  if (files.length > 1) {
    throw new InvalidArgumentError(
      `${option} ${dir} has ${files.length} model files (${files.join(', ')}): serving several models needs --multi-model, `
      + 'which is not implemented yet; serve one with --config <file>',
    );
  }
  return join(dir, files[0]!);
}

export function modelRepoFile(dir: string, option = '--model-repo'): string {
  let entries: string[];
  try {
    entries = readdirSync(dir, { withFileTypes: true }).filter((e) => e.isFile() || e.isSymbolicLink()).map((e) => e.name);
  } catch (error) {
    throw new InvalidArgumentError(`${option} ${dir} cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)}): it must be a directory of YAML model files`);
  }
  return pickModelFile(dir, entries, option);
}
