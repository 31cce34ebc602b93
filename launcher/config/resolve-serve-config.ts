// The effective configuration of a parsed command: which file (--config, TRTLLM_CONFIG or the one file of
// --model-repo), read and checked once, merged under the flags and env commander saw. The YAML parser is loaded
// only when there is a file: every rank of a cluster starts through this code and need not pay for it.
import { readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';

import { type Command, InvalidArgumentError } from 'commander';

import type { Backends } from '../../worker/options/device-ids.js';
import type { ConfigSourceOptions } from '../serve-options.js';
import { type CliValue, type ConfigFile, effectiveConfig, type EffectiveConfig } from './effective-config.js';
import { modelRepoFile } from './model-repo.js';
import { isTritonRepo, readTritonRepo } from './triton-repo.js';

export function cliValues(command: Command): CliValue[] {
  const values = command.opts();
  return command.options.filter((o) => o.long !== '--help' && o.long !== '--version').map((o) => ({
    attr: o.attributeName(), flag: o.long ?? o.flags, env: o.envVar, value: values[o.attributeName()],
    source: command.getOptionValueSource(o.attributeName()),
  }));
}

function named(command: Command, attr: string, flag: string, env: string): string {
  return command.getOptionValueSource(attr) === 'env' ? env : flag;
}

function readProblem(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  return code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : code === 'EACCES' ? 'permission denied' : String(error);
}

export async function readConfigFile(path: string, via: string): Promise<ConfigFile> {
  const absolute = resolve(path);
  let text: string;
  try {
    text = readFileSync(absolute, 'utf8');
  } catch (error) {
    throw new InvalidArgumentError(`${via} ${path} cannot be read: ${readProblem(error)}`);
  }
  const { parseConfigText } = await import('./parse-config-file.js');
  const file = parseConfigText(text, absolute);
  const model = file.values.get('model') as string | undefined;
  if (model !== undefined && !statSync(model, { throwIfNoEntry: false })?.isDirectory()) {
    throw new InvalidArgumentError(`model in ${absolute} must be an existing checkpoint directory, got "${model}" (no such directory)`);
  }
  return { ...file, via };
}

/** `build`: the addon's backends where this command will run the ranks (see effectiveConfig). */
export async function resolveServeConfig(command: Command, build?: Backends): Promise<EffectiveConfig> {
  const { config, modelRepo } = command.opts<ConfigSourceOptions>();
  if (config !== undefined && modelRepo !== undefined) {
    throw new InvalidArgumentError(`${named(command, 'config', '--config', 'TRTLLM_CONFIG')} ${config} and ${named(command, 'modelRepo', '--model-repo', 'TRTLLM_MODEL_REPO')} ${modelRepo} both name a configuration: give one`);
  }
  let file: ConfigFile | undefined;
  if (config !== undefined) file = await readConfigFile(config, named(command, 'config', '--config', 'TRTLLM_CONFIG'));
  else if (modelRepo !== undefined) {
    const option = named(command, 'modelRepo', '--model-repo', 'TRTLLM_MODEL_REPO');
    // A Triton TensorRT-LLM repository (tensorrt_llm/config.pbtxt), or a directory of YAML model files.
    file = isTritonRepo(modelRepo) ? { ...readTritonRepo(modelRepo), via: `${option} ${modelRepo}` }
      : await readConfigFile(modelRepoFile(modelRepo, option), `${option} ${modelRepo}`);
  }
  return effectiveConfig(cliValues(command), file, build);
}
