// Flags > env > file > defaults, merged once into a frozen object that also remembers where every value came from
// and whether it has an effect on the backend the ranks will use (pure: commander's values and their sources, the
// file, and what the addon says of its backends in; the effective serve options and their provenance out).
import { type Backends, servingBackend } from '../../worker/options/device-ids.js';
import { SERVE_OPTIONS } from '../../worker/options/serve-option-table.js';
import type { ServeCliOptions } from '../serve-options.js';
import type { FileValues } from './parse-config-file.js';
import { CONFIG_KEYS } from './schema.js';

/** One option as commander parsed it; `source` is commander's getOptionValueSource() (cli, env, default, ...). */
export interface CliValue {
  attr: string;         // 'maxBatchSize'
  flag: string;         // '--max-batch-size'
  env?: string | undefined;
  value: unknown;
  source: string | undefined;
}

export type Source = 'flag' | 'env' | 'file' | 'default';

export interface Setting {
  key: string;                       // the file key, or the flag for options a file cannot set
  flag?: string | undefined;
  value: unknown;                    // undefined: nothing set it (see `unset`)
  source: Source;
  origin: string;                    // the flag, the env variable, the file's path, or 'default'
  ignored?: string | undefined;      // why it has no effect (on this build, with this backend)
  unset?: string | undefined;        // what applies when unset
}

export interface ConfigFile extends FileValues {
  via: string;                       // how it was named: '--config', 'TRTLLM_CONFIG', '--model-repo <dir>'
}

export interface EffectiveConfig {
  readonly options: Readonly<ServeCliOptions>;
  readonly settings: readonly Readonly<Setting>[];
  readonly file?: Readonly<ConfigFile> | undefined;
}

// Values that must not end up on a terminal or in a CI log.
const SECRETS = new Set<string>(SERVE_OPTIONS.filter((d) => d.secret).map((d) => d.name));
// Options that choose the file or the output format, not the served configuration.
const NOT_SETTINGS = new Set(['config', 'modelRepo', 'json']);

function fromCli(c: CliValue): { source: Source; origin: string } | undefined {
  if (c.source === 'cli') return { source: 'flag', origin: c.flag };
  if (c.source === 'env') return { source: 'env', origin: c.env ?? c.flag };
  return undefined;
}

/**
 * `build`: the addon's backends, which decide what --device auto becomes and so which keys have no effect. Without
 * it (no addon here) only the CPU backend, which every build has, is assumed.
 */
export function effectiveConfig(cli: readonly CliValue[], file?: ConfigFile, build?: Backends): EffectiveConfig {
  const byAttr = new Map(cli.map((c) => [c.attr, c]));
  const options: Record<string, unknown> = Object.fromEntries(cli.filter((c) => !NOT_SETTINGS.has(c.attr)).map((c) => [c.attr, c.value]));
  const settings: Setting[] = [];
  const backend = servingBackend(options.device as ServeCliOptions['device'] | undefined, build);
  const shown = (attr: string | undefined, value: unknown) => (attr && SECRETS.has(attr) && value !== undefined ? '(set)' : value);

  for (const spec of CONFIG_KEYS) {
    const c = spec.option ? byAttr.get(spec.option) : undefined;
    const explicit = c && fromCli(c);
    const inFile = file?.values.has(spec.key) ?? false;
    let setting: Setting;
    if (c && explicit) {
      setting = { key: spec.key, flag: c.flag, value: c.value, ...explicit };
    } else if (inFile) {
      const value = file!.values.get(spec.key);
      if (spec.option) options[spec.option] = spec.toOption ? spec.toOption(value) : value;
      setting = { key: spec.key, flag: c?.flag, value, source: 'file', origin: file!.path };
    } else if (c) {
      setting = { key: spec.key, flag: c.flag, value: c.value, source: 'default', origin: 'default' };
    } else {
      continue;  // a key with no flag that the file does not set: nothing to show
    }
    const ignored = setting.value === undefined ? undefined : spec.ignored?.(backend);
    settings.push(Object.freeze({ ...setting, value: shown(spec.option, setting.value), ignored, unset: spec.unset }));
  }
  const covered = new Set(CONFIG_KEYS.map((k) => k.option).filter((o) => o !== undefined));
  for (const c of cli) {
    if (covered.has(c.attr as keyof ServeCliOptions) || NOT_SETTINGS.has(c.attr)) continue;
    const where = fromCli(c) ?? { source: 'default' as const, origin: 'default' };
    settings.push(Object.freeze({ key: c.flag, flag: c.flag, value: shown(c.attr, c.value), ...where }));
  }
  return Object.freeze({
    options: Object.freeze(options as unknown as ServeCliOptions),
    settings: Object.freeze(settings),
    file: file && Object.freeze(file),
  });
}

/** The settings given that have no effect here (this build, this backend): said at startup, never dropped silently. */
export function ignoredSettings(config: EffectiveConfig): readonly Readonly<Setting>[] {
  return config.settings.filter((s) => s.ignored !== undefined);
}
