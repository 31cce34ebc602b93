// The serve options a job script passes on to the launcher: those the user set (flag or env), as flags, with
// paths made absolute and the API key left to the environment. Which options are forwarded, and which are paths,
// the option table says (worker/options/serve-option-table.ts); reads commander's values and sources; no I/O.
import { isAbsolute, resolve } from 'node:path';

import type { Command, Option } from 'commander';

import { CONFIG_SOURCE_OPTIONS, SERVE_OPTIONS } from '../../worker/options/serve-option-table.js';
import { flagArgv } from '../option-argv.js';

const DEFINITIONS = [...SERVE_OPTIONS, ...CONFIG_SOURCE_OPTIONS];
// Written by the renderer itself (tp, pp, model, log dir, srun arguments with the container's), or never written
// into a file (the key, --dry-run).
const NOT_FORWARDED = new Set<string>(DEFINITIONS.filter((d) => d.job !== undefined).map((d) => d.name));
const PATHS = new Set<string>(DEFINITIONS.filter((d) => d.path).map((d) => d.name));
const SECRETS = new Set<string>(DEFINITIONS.filter((d) => d.secret).map((d) => d.name));

/** The attribute names of the serve options (and --config/--model-repo), as the serve command defines them. */
export function serveOptionNames(): Set<string> {
  return new Set(DEFINITIONS.map((d) => d.name));
}

/** One option's value as argv, the way commander reads it back. */
export function optionArgv(option: Option, value: unknown): string[] {
  return flagArgv(option.long ?? option.flags, option.isBoolean(), value);
}

/** Serve options the user set on `command` (flag or env), ready for the job's launcher command line. */
export function forwardedServeArgs(command: Command, cwd: string): string[] {
  const names = serveOptionNames();
  const values = command.opts();
  const out: string[] = [];
  for (const option of command.options) {
    const name = option.attributeName();
    if (!names.has(name) || NOT_FORWARDED.has(name)) continue;
    const source = command.getOptionValueSource(name);
    if (source !== 'cli' && source !== 'env') continue;
    let value = values[name];
    if (PATHS.has(name) && typeof value === 'string' && !isAbsolute(value)) value = resolve(cwd, value);
    out.push(...optionArgv(option, value));
  }
  return out;
}

/** Options given on the command line, as argv (what a script header records to re-render it; never the key). */
export function givenArgv(command: Command): string[] {
  const values = command.opts();
  const out: string[] = [];
  for (const option of command.options) {
    const name = option.attributeName();
    if (command.getOptionValueSource(name) !== 'cli' || SECRETS.has(name)) continue;
    const value = values[name];
    if (Array.isArray(value)) for (const v of value) out.push(...optionArgv(option, v));
    else out.push(...optionArgv(option, value));
  }
  return out;
}
