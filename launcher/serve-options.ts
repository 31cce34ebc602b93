// The serve options as commander options, derived from their one definition (worker/options/serve-option-table.ts):
// `serve`, the hidden `rank` command, `config print` and `slurm render|submit` all add the same ones, each with its
// TRTLLM_* environment fallback. Values are parsed here; a configuration file fills in what flags and env leave
// unset (config/).
import { type Command, Option } from 'commander';

import type { OptionDefinition } from '../worker/options/option-definition.js';
import {
  CONFIG_SOURCE_OPTIONS, MULTI_MODEL_OPTIONS, SERVE_OPTIONS, type ServeCliOptions,
} from '../worker/options/serve-option-table.js';
import type { LauncherKind } from './cluster/mpirun-command.js';
import { flagParser, gatheringFlagParser } from './parse-options.js';

export type { LauncherKind };
export type { ConfigSourceOptions, MultiModelOptions, ServeCliOptions } from '../worker/options/serve-option-table.js';

// The launcher's own spelling of the --launcher choices must be the table's.
const sameLaunchers: [LauncherKind, ServeCliOptions['launcher']] extends [ServeCliOptions['launcher'], LauncherKind] ? true : never = true;
void sameLaunchers;

/** One definition as a commander option: its flag and placeholder, help (+ env), parser and default. */
export function commanderOption(d: OptionDefinition): Option {
  const { form } = d.kind;
  const flags = form === 'switch' ? d.flag : form === 'toggle' ? `${d.flag} [bool]` : `${d.flag} ${d.placeholder ?? '<value>'}`;
  // A switch a file may have turned on is a toggle: it must be able to say so.
  const help = form === 'toggle' ? `${d.help}; "${d.flag} false" turns it off` : d.help;
  const option = new Option(flags, help);
  if (d.env) option.env(d.env);  // --help shows "env: TRTLLM_X" from this
  if (form !== 'switch') option.argParser(d.kind.append ? gatheringFlagParser(d.flag, d.kind) : flagParser(d.flag, d.kind));
  if (form === 'toggle') option.preset('true');
  const fallback = d.defaultFrom ? d.defaultFrom() : d.default;
  if (fallback !== undefined) option.default(fallback);
  return option;
}

/** One serve option for another command (`generate`, `bench --offline`): the same flag, check, env and default,
 * with the help said for that command when `help` is given. */
export function serveOption(name: keyof ServeCliOptions, help?: (serveHelp: string) => string): Option {
  const d = SERVE_OPTIONS.find((o) => o.name === name);
  if (!d) throw new Error(`no serve option named ${name}`);
  return commanderOption(help ? { ...d, help: help(d.help) } : d);
}

function addAll(command: Command, definitions: readonly OptionDefinition[]): Command {
  for (const d of definitions) command.addOption(commanderOption(d));
  return command;
}

/** Adds the serve options to a command (the `serve` subcommand, the bare program, `rank` and `config print`). */
export function addServeOptions(command: Command): Command {
  return addAll(command, SERVE_OPTIONS);
}

/** Orchestrator mode (Triton's --multi-model): one orchestrator serving every model of --model-repo. */
export function addMultiModelOptions(command: Command): Command {
  return addAll(command, MULTI_MODEL_OPTIONS);
}

/** Where the configuration comes from: a YAML file, or a model repository holding one (see config/). */
export function addConfigSourceOptions(command: Command): Command {
  return addAll(command, CONFIG_SOURCE_OPTIONS);
}
