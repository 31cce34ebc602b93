// The LoRA options: --lora-modules (YAML lora.modules), the adapters a server reads at startup, each a name (what an
// OpenAI request's "model" names) and a Hugging Face PEFT directory; and how the LoRA options go together. The option
// holds the adapters as "name=dir" texts in the order given, which is also how a rank gets them back as one flag
// ("a=/x,b=/y"); their task ids (the seeds' lora_task_id) are 1, 2, ... in that order. Pure, but for
// loraModuleDirsProblem, which looks at the directories.
import { statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';

import type { Checked, ValueKind } from './value-kinds.js';

export const LORA_MODULES_FLAG = '--lora-modules';

/** One preloaded adapter as the server serves it. */
export interface ServedAdapter {
  name: string;
  taskId: number;     // 1, 2, ... in the order --lora-modules gave them
  dir: string;        // absolute
}

// A name is what an OpenAI request's "model" says and what /v1/models/{id} puts in a path: no separator of ours
// (',' between entries, '=' before the directory), no '/', no whitespace.
const NAME = /^[^\s,=/]+$/;
const ENTRY_RULE = 'must be name=dir entries (a PEFT adapter directory under a name without spaces, commas or slashes), separated by commas or given as separate arguments';
const FILE_RULE = 'must be a list of "name=dir" strings, a list of {name, path} mappings, or a mapping of name to path';

const pass = <T>(value: T): Checked<T> => ({ ok: true, value });
const fail = (rule: string): Checked<never> => ({ ok: false, rule });

/** One entry's name and directory (trimmed), or undefined when it is not name=dir with a name of the rule above. */
function splitEntry(text: string): { name: string; dir: string } | undefined {
  const eq = text.indexOf('=');
  if (eq < 0) return undefined;
  return entryOf(text.slice(0, eq), text.slice(eq + 1));
}

function entryOf(name: unknown, dir: unknown): { name: string; dir: string } | undefined {
  if (typeof name !== 'string' || typeof dir !== 'string') return undefined;
  const n = name.trim();
  const d = dir.trim();
  return NAME.test(n) && d !== '' ? { name: n, dir: d } : undefined;
}

const entryText = (e: { name: string; dir: string }) => `${e.name}=${e.dir}`;

function uniqueNames(entries: readonly { name: string; dir: string }[]): Checked<readonly string[]> {
  const seen = new Set<string>();
  for (const { name } of entries) {
    if (seen.has(name)) return fail(`must name each adapter once (${JSON.stringify(name)} is given twice)`);
    seen.add(name);
  }
  return pass(Object.freeze(entries.map(entryText)));
}

function entriesFromText(text: string): Checked<readonly string[]> {
  const entries = text.split(',').filter((p) => p.trim() !== '').map(splitEntry);
  if (entries.length === 0 || entries.some((e) => e === undefined)) return fail(ENTRY_RULE);
  return uniqueNames(entries as { name: string; dir: string }[]);
}

const isMapping = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A file's three forms: ["sql=ckpt/sql"], [{name: sql, path: ckpt/sql}], {sql: ckpt/sql}. */
function entriesFromFile(value: unknown): Checked<readonly string[]> {
  let entries: ({ name: string; dir: string } | undefined)[];
  if (Array.isArray(value)) {
    entries = value.map((v) => {
      if (typeof v === 'string') return splitEntry(v);
      const fields = isMapping(v) && Object.keys(v).every((k) => k === 'name' || k === 'path');
      return fields ? entryOf(v.name, v.path) : undefined;
    });
  } else if (isMapping(value)) {
    entries = Object.entries(value).map(([name, dir]) => entryOf(name, dir));
  } else {
    return fail(FILE_RULE);
  }
  if (entries.length === 0 || entries.some((e) => e === undefined)) return fail(FILE_RULE);
  return uniqueNames(entries as { name: string; dir: string }[]);
}

/** The kind of --lora-modules: a flag given several values (`--lora-modules a=/x b=/y`) or several times gathers them,
 * in order. */
export const loraModulesKind: ValueKind<readonly string[]> = {
  form: 'value',
  fromText: entriesFromText,
  fromFile: entriesFromFile,
  append: (previous, next) => uniqueNames([...previous, ...next].map((e) => splitEntry(e)!)),
};

/** A file's entries with their directories relative to the file (as its model and draft_model are). */
export function loraModulesRelativeTo(entries: readonly string[], base: string): readonly string[] {
  return Object.freeze(entries.map((e) => {
    const { name, dir } = splitEntry(e)!;
    return `${name}=${resolve(base, dir)}`;
  }));
}

/** The adapters with their task ids (1, 2, ... in order) and absolute directories. */
export function servedAdapters(entries: readonly string[] | undefined): ServedAdapter[] {
  return (entries ?? []).map((e, i) => {
    const { name, dir } = splitEntry(e)!;
    return { name, taskId: i + 1, dir: resolve(dir) };
  });
}

/** What is wrong with the adapters' directories, naming the option, the entry and what to do; undefined when each is
 * there and holds adapter_config.json (what makes it a PEFT adapter). Whether an adapter fits the model is the
 * engine's check when it reads it. Made by the launcher before any rank starts and by the serving rank itself. */
export function loraModuleDirsProblem(entries: readonly string[] | undefined): string | undefined {
  for (const adapter of servedAdapters(entries)) {
    const entry = `${LORA_MODULES_FLAG} ${entries![adapter.taskId - 1]!}`;
    const stat = statSync(adapter.dir, { throwIfNoEntry: false });
    if (!stat?.isDirectory()) {
      return `${entry}: ${adapter.dir} ${stat ? 'is not a directory' : 'does not exist'}; give a Hugging Face PEFT adapter directory (adapter_config.json and adapter_model.safetensors, as peft's save_pretrained writes them)`;
    }
    if (!statSync(join(adapter.dir, 'adapter_config.json'), { throwIfNoEntry: false })?.isFile()) {
      return `${entry}: ${adapter.dir} has no adapter_config.json; give a Hugging Face PEFT adapter directory (as peft's save_pretrained writes it)`;
    }
  }
  return undefined;
}

/** The OpenAI names of the base model (leader mode's catalog takes these for it too): an adapter cannot have them. */
const BASE_ALIASES = ['ensemble', 'tensorrt_llm_bls'];

export interface LoraSettings {
  loraModules?: readonly string[] | undefined;
  enableLora?: boolean | undefined;
  maxLoras?: number | undefined;
  loraCacheOptimalAdapterSize?: number | undefined;
  loraCacheMaxAdapterSize?: number | undefined;
  loraCacheGpuMemoryFraction?: number | undefined;
  loraCacheHostMemoryBytes?: number | undefined;
  model?: string | undefined;
  servedModelName?: string | undefined;
}

const CACHE_FLAGS: readonly [keyof LoraSettings, string][] = [
  ['maxLoras', '--max-loras'], ['loraCacheOptimalAdapterSize', '--lora-cache-optimal-adapter-size'],
  ['loraCacheMaxAdapterSize', '--lora-cache-max-adapter-size'], ['loraCacheGpuMemoryFraction', '--lora-cache-gpu-memory-fraction'],
  ['loraCacheHostMemoryBytes', '--lora-cache-host-memory-bytes'],
];

/** Whether LoRA is on: --enable-lora, or implied by --lora-modules. */
export function loraEnabled(o: LoraSettings): boolean {
  return o.enableLora === true || (o.loraModules?.length ?? 0) > 0;
}

/** What is wrong with the LoRA options together, naming them and what to do; undefined when they agree. Checked
 * before any rank starts and by the serving rank itself. */
export function loraProblem(o: LoraSettings): string | undefined {
  const modules = o.loraModules ?? [];
  if (modules.length > 0 && o.enableLora === false) {
    return `${LORA_MODULES_FLAG} ${modules.join(',')} serves LoRA adapters, which --enable-lora false turns off: drop one of them`;
  }
  const cache = CACHE_FLAGS.find(([name]) => o[name] !== undefined);
  if (cache && !loraEnabled(o)) {
    return `${cache[1]} ${String(o[cache[0]])} sizes the LoRA adapter cache, but LoRA is off: add --enable-lora or ${LORA_MODULES_FLAG}, or drop it`;
  }
  const { loraCacheOptimalAdapterSize: optimal, loraCacheMaxAdapterSize: max } = o;
  if (optimal !== undefined && max !== undefined && optimal > max) {
    return `--lora-cache-optimal-adapter-size ${optimal} exceeds --lora-cache-max-adapter-size ${max}: the rank the slots are sized for must be one the cache accepts; lower the first or raise the second`;
  }
  const base = o.servedModelName ?? (o.model === undefined ? undefined : basename(resolve(o.model)));
  const taken = servedAdapters(modules).find((a) => a.name === base || BASE_ALIASES.includes(a.name));
  if (taken) {
    return `${LORA_MODULES_FLAG} ${modules[taken.taskId - 1]}: the name ${JSON.stringify(taken.name)} is the base model's (an OpenAI request naming it runs the base); give the adapter another name`;
  }
  return undefined;
}
