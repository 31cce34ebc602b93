// A configuration file's text → its checked values, keyed by dotted key (pure). Every problem in the file is
// reported at once, each naming the key, the file and the value received (in the words of the key's kind, the same
// as its flag's); unknown keys get a did-you-mean.
import { dirname, resolve } from 'node:path';

import { InvalidArgumentError } from 'commander';
import { parseDocument } from 'yaml';

import { loraModulesRelativeTo } from '../../worker/options/lora-options.js';
import { closest } from './did-you-mean.js';
import { configKey, SECTIONS, sectionKeys, TOP_LEVEL_NAMES } from './schema.js';

// Keys naming directories (checkpoints, LoRA adapters): relative to the file, so a model file and its checkpoints
// can move together.
const RELATIVE_TO_FILE: Readonly<Record<string, (value: unknown, base: string) => unknown>> = {
  'model': (v, base) => resolve(base, v as string),
  'decoding.draft_model': (v, base) => resolve(base, v as string),
  'decoding.medusa_heads': (v, base) => resolve(base, v as string),
  'decoding.eagle_heads': (v, base) => resolve(base, v as string),
  'lora.modules': (v, base) => loraModulesRelativeTo(v as readonly string[], base),
};

export interface FileValues {
  path: string;
  values: ReadonlyMap<string, unknown>;   // 'batching.max_batch_size' → 8
  notes?: readonly string[];              // what the file holds that sets nothing (a Triton repository's, triton-repo.ts)
}

/** A received value as an error message quotes it: strings quoted, everything else as JSON. */
export function showValue(value: unknown): string {
  if (typeof value === 'string') return `"${value}"`;
  if (value === undefined) return 'nothing';
  return JSON.stringify(value) ?? String(value);
}

const isMapping = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function unknownKey(key: string, candidates: readonly string[], path: string, prefix: string): string {
  const name = key.slice(prefix.length);
  const near = closest(name, candidates);
  // A key put in the wrong section is a likelier mistake than a typo: point at where it belongs.
  const elsewhere = near ? undefined : SECTIONS.find((s) => sectionKeys(s).includes(name) && `${s}.` !== prefix);
  const hint = near ? `; did you mean "${prefix}${near}"?` : elsewhere ? `; did you mean "${elsewhere}.${name}"?` : '';
  const known = candidates.join(', ');
  return `unknown key "${key}" in ${path}${hint} (known${prefix ? ` in ${prefix.slice(0, -1)}` : ''}: ${known})`;
}

export function parseConfigText(text: string, path: string): FileValues {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new InvalidArgumentError(`${path} is not valid YAML: ${doc.errors.map((e) => e.message).join('\n')}`);
  }
  const root: unknown = doc.toJS() ?? {};
  if (!isMapping(root)) throw new InvalidArgumentError(`${path} must be a YAML mapping of keys (model, batching, ...), got ${showValue(root)}`);

  const values = new Map<string, unknown>();
  const errors: string[] = [];
  const take = (key: string, value: unknown) => {
    const spec = configKey(key)!;
    const checked = spec.check(value);
    if (!checked.ok) errors.push(`${key} in ${path} ${checked.rule}, got ${showValue(value)}`);
    else values.set(key, RELATIVE_TO_FILE[key] ? RELATIVE_TO_FILE[key](checked.value, dirname(path)) : checked.value);
  };
  for (const [name, value] of Object.entries(root)) {
    if (SECTIONS.includes(name)) {
      if (!isMapping(value)) {
        errors.push(`${name} in ${path} must be a mapping (${sectionKeys(name).join(', ')}), got ${showValue(value)}`);
        continue;
      }
      for (const [sub, subValue] of Object.entries(value)) {
        const key = `${name}.${sub}`;
        if (configKey(key)) take(key, subValue);
        else errors.push(unknownKey(key, sectionKeys(name), path, `${name}.`));
      }
    } else if (configKey(name)) {
      take(name, value);
    } else {
      errors.push(unknownKey(name, TOP_LEVEL_NAMES, path, ''));
    }
  }
  if (errors.length > 0) throw new InvalidArgumentError(errors.join('\n'));
  return { path, values };
}
