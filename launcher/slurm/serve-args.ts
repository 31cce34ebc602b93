// The serve options a job script passes on to the launcher: those the user set (flag or env), as flags, with
// paths made absolute and the API key left to the environment. Reads commander's option metadata; no I/O.
import { isAbsolute, resolve } from 'node:path';

import { Command, type Option } from 'commander';

import { addConfigSourceOptions, addServeOptions } from '../serve-options.js';

// Written by the renderer itself (tp, pp, model, log dir, srun arguments with the container's), or never written
// into a file (the key, --dry-run).
const NOT_FORWARDED = new Set(['worldSize', 'tp', 'pp', 'model', 'logDir', 'srunArgs', 'apiKey', 'dryRun']);
const PATHS = new Set(['hostfile', 'config', 'modelRepo']);

let serveNames: Set<string> | undefined;
/** The attribute names of the serve options (and --config/--model-repo), as the serve command defines them. */
export function serveOptionNames(): Set<string> {
  serveNames ??= new Set(addConfigSourceOptions(addServeOptions(new Command())).options.map((o) => o.attributeName()));
  return serveNames;
}

/** One option's value as argv, the way commander reads it back. */
export function optionArgv(option: Option, value: unknown): string[] {
  const flag = option.long ?? option.flags;
  if (value === undefined || value === false && option.isBoolean()) return [];
  if (option.isBoolean()) return [flag];
  // A value that looks like an option must be glued to its flag, or a parser takes it for the next option.
  return String(value).startsWith('-') ? [`${flag}=${String(value)}`] : [flag, String(value)];
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
    if (command.getOptionValueSource(name) !== 'cli' || name === 'apiKey') continue;
    const value = values[name];
    if (Array.isArray(value)) for (const v of value) out.push(...optionArgv(option, v));
    else out.push(...optionArgv(option, value));
  }
  return out;
}
