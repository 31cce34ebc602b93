// Test helpers: fixture paths and the HF transformers references recorded by scripts/fixtures/make_fixtures.py.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { packageRoot } from '../../worker/common/package-root.js';

export const FIXTURE_MODELS = ['tiny-llama', 'tiny-llama-sharded', 'tiny-gpt2'] as const;

export function fixtureDir(name: string): string {
  return join(packageRoot(), 'test', 'fixtures', 'models', name);
}

export interface ReferenceCase {
  name: string;
  text: string | null;
  input_ids: number[];
  max_new_tokens: number;
  greedy_output_ids: number[];
  greedy_log_probs: number[];
}

/** HF generate() outputs recorded for case 0 (12 new tokens, eos disabled); keyed by configuration name. */
export interface GenerateReference {
  output_ids: number[][];          // per returned sequence, new tokens only, best first
  sequences_scores?: number[];     // beam search: cum log prob / generated_len ** length_penalty
  error?: string;
}

export function generateReferences(model: string): Record<string, GenerateReference> {
  const json = JSON.parse(readFileSync(join(fixtureDir(model), 'reference.json'), 'utf8')) as {
    cases: { generate?: Record<string, GenerateReference> }[];
  };
  const g = json.cases[0]?.generate;
  if (!g) throw new Error(`reference.json of ${model} has no generate references in case 0`);
  return g;
}

export function referenceCases(model: string): ReferenceCase[] {
  const json = JSON.parse(readFileSync(join(fixtureDir(model), 'reference.json'), 'utf8')) as { cases: ReferenceCase[] };
  return json.cases;
}

/** Reads the F32 and I32 tensors of a .safetensors file (enough of the format for our reference files). */
export function readSafetensors(path: string): Map<string, { shape: number[]; data: Float32Array | Int32Array }> {
  const buf = readFileSync(path);
  const headerLen = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + headerLen).toString('utf8')) as Record<string, {
    dtype: string; shape: number[]; data_offsets: [number, number];
  }>;
  const out = new Map<string, { shape: number[]; data: Float32Array | Int32Array }>();
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    if (t.dtype !== 'F32' && t.dtype !== 'I32') throw new Error(`${name}: expected F32 or I32, got ${t.dtype}`);
    const start = 8 + headerLen + t.data_offsets[0];
    const bytes = buf.subarray(start, 8 + headerLen + t.data_offsets[1]);
    const data = t.dtype === 'F32' ? new Float32Array(bytes.byteLength / 4) : new Int32Array(bytes.byteLength / 4);
    for (let i = 0; i < data.length; i += 1) data[i] = t.dtype === 'F32' ? bytes.readFloatLE(i * 4) : bytes.readInt32LE(i * 4);
    out.set(name, { shape: t.shape, data });
  }
  return out;
}

/** Reads the f32 tensors of a .safetensors file (any other dtype is an error). */
export function readSafetensorsF32(path: string): Map<string, { shape: number[]; data: Float32Array }> {
  const out = readSafetensors(path);
  for (const [name, t] of out) {
    if (!(t.data instanceof Float32Array)) throw new Error(`${name}: expected F32, got I32`);
  }
  return out as Map<string, { shape: number[]; data: Float32Array }>;
}

export function contextLogitsReference(model: string, caseIndex: number): Float32Array {
  const tensors = readSafetensorsF32(join(fixtureDir(model), 'reference.safetensors'));
  const t = tensors.get(`case${caseIndex}.context_logits`);
  if (!t) throw new Error(`reference.safetensors of ${model} has no case${caseIndex}.context_logits`);
  return t.data;
}

/** max|a-b| / max|b|: the relative error measure the issue asks for. */
export function maxRelativeError(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < expected.length; i += 1) {
    diff = Math.max(diff, Math.abs((actual[i] ?? NaN) - (expected[i] ?? NaN)));
    scale = Math.max(scale, Math.abs(expected[i] ?? 0));
  }
  return Number.isNaN(diff) ? Infinity : diff / scale;
}
