// bench --offline --guided-json-schema: every output decoded with the guided vocabulary's token bytes and checked
// against the schema, so a throughput figure of constrained decoding is also a correctness check of it. The JSON
// Schema validator (ajv, a development dependency) is loaded when present; without it outputs are only parsed.

import type { GuidedVocabulary } from '../../worker/token-bytes.js';

export interface GuidedOutputCheck {
  add(ids: readonly number[]): void;
  summary(): string;
}

type Validate = (value: unknown) => boolean;

async function loadValidator(schemaText: string): Promise<{ validate: Validate; by: string }> {
  try {
    const { Ajv2020 } = await import('ajv/dist/2020.js');
    const formats = (await import('ajv-formats')).default as unknown as (a: unknown) => void;
    const ajv = new Ajv2020({ strict: false });
    formats(ajv);
    const v = ajv.compile(JSON.parse(schemaText) as object);
    return { validate: (x) => v(x) as boolean, by: 'valid under the schema (ajv)' };
  } catch {
    return { validate: () => true, by: 'parsed as JSON (ajv not installed: the schema was not checked)' };
  }
}

export async function guidedOutputCheck(schemaText: string, vocab: GuidedVocabulary): Promise<GuidedOutputCheck> {
  const { validate, by } = await loadValidator(schemaText);
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let total = 0;
  let good = 0;
  let firstBad: string | undefined;
  return {
    add(ids) {
      total += 1;
      const parts: Uint8Array[] = [];
      for (const id of ids) {
        if (id >= 0 && id + 1 < vocab.tokenOffsets.length) parts.push(vocab.tokenBytes.subarray(vocab.tokenOffsets[id]!, vocab.tokenOffsets[id + 1]!));
      }
      const bytes = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
      let at = 0;
      for (const p of parts) { bytes.set(p, at); at += p.length; }
      let text = '';
      try {
        text = decoder.decode(bytes);
        if (validate(JSON.parse(text))) { good += 1; return; }
      } catch { /* counted below */ }
      firstBad ??= text.length > 0 ? text.slice(0, 200) : `${bytes.length} bytes that are not UTF-8`;
    },
    summary() {
      const bad = firstBad === undefined ? '' : `; the first that is not: ${JSON.stringify(firstBad)}`;
      return `[INFO] Guided outputs ${by}: ${good} of ${total}${bad}`;
    },
  };
}
