// The trtllm-launch command line. Subcommands register themselves; `main` returns the exit code.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { Command } from 'commander';

import { packageRoot } from '../worker/common/package-root.js';
import { registerConfig } from './config-command.js';
import { registerBench } from './bench-command/bench-command.js';
import { registerClient } from './client/client-command.js';
import { registerGenerate } from './generate-command.js';
import { registerServe } from './serve-command.js';
import { registerSlurm } from './slurm/slurm-command.js';
import { normalizeTritonSpellings } from './triton-spellings.js';

export function buildProgram(): Command {
  const pkg = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string };
  const program = new Command('trtllm-launch')
    .description('Launch and supervise an LLM serving cluster under mpirun or srun')
    .version(pkg.version);
  registerServe(program);
  registerGenerate(program);
  registerClient(program);
  registerBench(program);
  registerConfig(program);
  registerSlurm(program);
  return program;
}

export async function main(argv: string[]): Promise<number> {
  const { argv: normalized, notes } = normalizeTritonSpellings(argv.slice(2));
  for (const note of notes) process.stderr.write(`trtllm-launch: ${note}\n`);
  await buildProgram().parseAsync([...argv.slice(0, 2), ...normalized]);
  return typeof process.exitCode === 'number' ? process.exitCode : 0;
}
