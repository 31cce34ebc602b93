// The configuration file's keys: every serve option with a file key (worker/options/serve-option-table.ts: its
// check, what applies when unset, on which backend it has no effect), plus the keys a file may hold without setting
// an option — read by --multi-model itself, or accepted for compatibility with Triton's model files — each with why
// it has no effect here, so that `config print` and the serve banner say so instead of dropping it silently.
import { SERVE_OPTIONS, type ServeCliOptions } from '../../worker/options/serve-option-table.js';
import { type Checked, participantIdsKind, toggleKind } from '../../worker/options/value-kinds.js';

export type Backend = 'cpu' | 'cuda';

export interface ConfigKey {
  key: string;                        // dotted path in the file: 'batching.max_batch_size'
  option?: keyof ServeCliOptions;     // the serve option it sets; absent: accepted and ignored
  check: (value: unknown) => Checked;
  toOption?: (value: unknown) => unknown;   // the checked value as the option holds it, when they differ
  ignored?: (backend: Backend) => string | undefined;   // why a set value has no effect with this backend
  unset?: string;                     // what applies when nothing sets it (the executor's default)
}

/** The file's mappings, in the order the file's keys are listed (errors, `config print`); top-level keys first. */
const SECTION_ORDER = ['parallel', 'batching', 'kv_cache', 'decoding', 'lora', 'serving'];

const always = (why: string) => () => why;

const FILE_ONLY: readonly ConfigKey[] = [
  { key: 'participant_ids', check: participantIdsKind.fromFile, ignored: always('used only by --multi-model --no-spawn (the job ranks of this model)') },
  { key: 'serving.exclude_input_in_output', check: toggleKind.fromFile, ignored: always('ignored: not applied server-wide yet; requests set exclude_input_in_output themselves') },
  { key: 'serving.decoupled', check: toggleKind.fromFile, ignored: always('ignored: ensemble and tensorrt_llm always allow streaming (decoupled) responses') },
];

const FROM_OPTIONS: readonly ConfigKey[] = SERVE_OPTIONS.filter((d) => d.file !== undefined).map((d) => {
  const { key, unset, cpuIgnores } = d.file!;
  return {
    key, option: d.name, check: d.kind.fromFile, unset,
    ...(d.kind.fileToOption ? { toOption: d.kind.fileToOption } : {}),
    ...(cpuIgnores ? { ignored: (backend: Backend) => (backend === 'cpu' ? `ignored on the CPU backend (${cpuIgnores})` : undefined) } : {}),
  };
});

const sectionOf = (key: string) => (key.includes('.') ? key.split('.')[0]! : '');

function inFileOrder(keys: readonly ConfigKey[]): ConfigKey[] {
  for (const k of keys) {
    if (sectionOf(k.key) !== '' && !SECTION_ORDER.includes(sectionOf(k.key))) throw new Error(`file key ${k.key}: its section is not in SECTION_ORDER`);
  }
  return ['', ...SECTION_ORDER].flatMap((s) => keys.filter((k) => sectionOf(k.key) === s));
}

export const CONFIG_KEYS: readonly ConfigKey[] = inFileOrder([...FROM_OPTIONS, ...FILE_ONLY]);

const BY_KEY = new Map(CONFIG_KEYS.map((k) => [k.key, k]));

export function configKey(key: string): ConfigKey | undefined {
  return BY_KEY.get(key);
}

/** The mappings of the file ('batching', ...) and the names allowed at its top level. */
export const SECTIONS: readonly string[] = SECTION_ORDER.filter((s) => CONFIG_KEYS.some((k) => sectionOf(k.key) === s));
export const TOP_LEVEL_NAMES: readonly string[] = [...CONFIG_KEYS.filter((k) => !k.key.includes('.')).map((k) => k.key), ...SECTIONS];

export function sectionKeys(section: string): string[] {
  return CONFIG_KEYS.filter((k) => k.key.startsWith(`${section}.`)).map((k) => k.key.slice(section.length + 1));
}
