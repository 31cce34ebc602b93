// Options written back as argv, the way commander reads them again: for the ranks of a cluster (rankArguments, from
// the option table) and for a job script (slurm/serve-args.ts). Pure.
import { SERVE_OPTIONS } from '../worker/options/serve-option-table.js';
import type { ServeCliOptions } from './serve-options.js';

/** One option's value: a switch alone when on; a value that looks like an option glued to its flag, or a parser takes
 * it for the next option. */
export function flagArgv(flag: string, isSwitch: boolean, value: unknown): string[] {
  if (value === undefined || (value === false && isSwitch)) return [];
  if (isSwitch) return [flag];
  return String(value).startsWith('-') ? [`${flag}=${String(value)}`] : [flag, String(value)];
}

/** The serve options a rank gets as flags: those the table marks 'argv'. The grid (--tp, --pp) comes from the launch
 * plan, and the API key travels in the environment, not on `ps`. */
export function rankArguments(options: Readonly<ServeCliOptions>): string[] {
  return SERVE_OPTIONS.filter((d) => d.rank === 'argv').flatMap((d) => flagArgv(d.flag, d.kind.form === 'switch', options[d.name]));
}
