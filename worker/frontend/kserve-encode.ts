// Output sets → response JSON: the generate extension's flat fields (the seeds' shape) and KServe v2 tensors
// (one tensor per output, batch elements stacked and ragged ones padded). Pure.
import type { NativeResponse } from '../binding/addon-types.js';
import type { ElementEvent, OutputTensor } from './model-run.js';
import { MODEL_VERSION } from './metrics.js';

/** A single value stays a scalar (the seeds' "text_output": "..."), anything else is a flat list. */
function fieldValue(t: OutputTensor): unknown {
  return t.shape.length === 1 && t.shape[0] === 1 ? t.data[0] : t.data;
}

export function generateHeader(model: string, id: string | number | undefined): Record<string, unknown> {
  return {
    ...(id === undefined ? {} : { id }),
    model_name: model,
    model_version: MODEL_VERSION,
    sequence_end: false,
    sequence_id: 0,
    sequence_start: false,
  };
}

/** One generate_stream event, or the generate body for a batch of one. */
export function generateEvent(model: string, id: string | number | undefined, outputs: OutputTensor[]): Record<string, unknown> {
  const body = generateHeader(model, id);
  for (const t of outputs) body[t.name] = fieldValue(t);
  return body;
}

/** The generate body for a batch of several: each output becomes a list in batch order. */
export function generateBatchBody(model: string, id: string | number | undefined, elements: OutputTensor[][]): Record<string, unknown> {
  const body = generateHeader(model, id);
  const names = [...new Set(elements.flatMap((e) => e.map((t) => t.name)))];
  for (const name of names) body[name] = elements.map((e) => { const t = e.find((x) => x.name === name); return t ? fieldValue(t) : null; });
  return body;
}

/** Stacks per-element tensors into [batch, ...] tensors, padding each element up to the largest shape. Logits stay
 * a Float32Array, and a batch of one whose shape needs no padding is passed on as is (logits are never copied). */
export function stackOutputs(elements: OutputTensor[][], only?: ReadonlySet<string>): OutputTensor[] {
  const names = [...new Set(elements.flatMap((e) => e.map((t) => t.name)))].filter((n) => !only || only.has(n));
  return names.map((name) => {
    const parts = elements.map((e) => e.find((t) => t.name === name));
    const first = parts.find((p) => p !== undefined)!;
    const rank = first.shape.length;
    const shape = Array.from({ length: rank }, (_, d) => Math.max(...parts.map((p) => p?.shape[d] ?? 0)));
    if (parts.length === 1 && sameShape(first.shape, shape)) return { name, datatype: first.datatype, shape: [1, ...shape], data: first.data };
    const size = shape.reduce((a, b) => a * b, 1);
    const pad = first.pad ?? (first.datatype === 'BYTES' ? '' : 0);
    const data: unknown[] | Float32Array = first.data instanceof Float32Array
      ? new Float32Array(parts.length * size).fill(Number(pad))
      : new Array<unknown>(parts.length * size).fill(pad);
    parts.forEach((p, i) => { if (p) copyInto(data, i * size, shape, p.data, p.shape, 0); });
    return { name, datatype: first.datatype, shape: [elements.length, ...shape], data } satisfies OutputTensor;
  });
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((n, i) => n === b[i]);
}

// Copies a row-major tensor of shape `from` (starting at data[src]) into the top-left corner of a row-major block of
// shape `to` (starting at block[at]); the rest of the block keeps its padding.
function copyInto(block: unknown[] | Float32Array, at: number, to: number[], data: ArrayLike<unknown>, from: number[], src: number): void {
  if (from.length === 0) { block[at] = data[src] as number; return; }
  if (from.length === 1) { for (let i = 0; i < from[0]!; i += 1) block[at + i] = data[src + i] as number; return; }
  const innerTo = to.slice(1).reduce((a, b) => a * b, 1);
  const innerFrom = from.slice(1).reduce((a, b) => a * b, 1);
  for (let i = 0; i < from[0]!; i += 1) copyInto(block, at + i * innerTo, to.slice(1), data, from.slice(1), src + i * innerFrom);
}

/** Collects the final event of every element, in batch order. */
export async function collectFinal(events: AsyncIterable<ElementEvent>, batch: number): Promise<OutputTensor[][]> {
  const out: OutputTensor[][] = new Array(batch);
  for await (const e of events) if (e.final) out[e.batchIndex] = e.outputs;
  return out;
}

/** Triton's context_logits [prompt, vocab] and generation_logits [1, tokens, vocab] tensors, for whichever of them
 * the request asked for and this response carries: the engine's Float32Arrays themselves, not copies. */
export function logitsOutputs(r: NativeResponse | undefined, context: boolean, generation: boolean): OutputTensor[] {
  const out: OutputTensor[] = [];
  const vocab = r?.vocabSize;
  if (!r || !vocab) return out;
  if (context && r.contextLogits && r.contextLogits.length > 0) {
    const data = r.contextLogits;
    out.push({ name: 'context_logits', datatype: 'FP32', shape: [data.length / vocab, vocab], data, pad: 0 });
  }
  if (generation && r.generationLogits && r.generationLogits.length > 0) {
    const data = r.generationLogits;
    out.push({ name: 'generation_logits', datatype: 'FP32', shape: [1, data.length / vocab, vocab], data, pad: 0 });
  }
  return out;
}
