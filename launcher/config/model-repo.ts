// `--model-repo <dir>`: a directory of YAML model files. Serving one model from it is `--config <that file>`;
// several need the orchestrator (`--multi-model`), which serves them all — so say that rather than pick one.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

import { InvalidArgumentError } from 'commander';

const MODEL_FILE = /\.ya?ml$/i;

/** The one model file among a directory's entries (pure); the error says what was found and what to do. */
export function pickModelFile(dir: string, entries: readonly string[], option = '--model-repo'): string {
  const files = entries.filter((name) => MODEL_FILE.test(name)).sort();
  if (files.length === 0) {
    throw new InvalidArgumentError(`${option} ${dir} has no model files (*.yaml, *.yml) and is not a Triton model repository (no tensorrt_llm/config.pbtxt)`);
  }
  if (files.length > 1) {
    throw new InvalidArgumentError(
      `${option} ${dir} has ${files.length} model files (${files.join(', ')}): serve them all with --multi-model, `
      + 'or one of them with --config <file>',
    );
  }
  return join(dir, files[0]!);
}

function repoEntries(dir: string, option: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true }).filter((e) => e.isFile() || e.isSymbolicLink()).map((e) => e.name);
  } catch (error) {
    throw new InvalidArgumentError(`${option} ${dir} cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)}): it must be a directory of YAML model files`);
  }
}

export function modelRepoFile(dir: string, option = '--model-repo'): string {
  return pickModelFile(dir, repoEntries(dir, option), option);
}

/** --multi-model: every model file of the repository, in name order (the first one also answers Triton's names);
 * `required` false: none is no error. */
export function modelRepoFiles(dir: string, option = '--model-repo', required = true): string[] {
  const files = repoEntries(dir, option).filter((name) => MODEL_FILE.test(name)).sort();
  if (files.length === 0 && required) throw new InvalidArgumentError(`${option} ${dir} has no model files (*.yaml, *.yml)`);
  return files.map((name) => join(dir, name));
}
