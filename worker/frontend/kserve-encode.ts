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

/** Stacks per-element tensors into [batch, ...] tensors, padding each element up to the largest shape. */
export function stackOutputs(elements: OutputTensor[][], only?: ReadonlySet<string>): OutputTensor[] {
  const names = [...new Set(elements.flatMap((e) => e.map((t) => t.name)))].filter((n) => !only || only.has(n));
  return names.map((name) => {
    const parts = elements.map((e) => e.find((t) => t.name === name));
    const first = parts.find((p) => p !== undefined)!;
    const rank = first.shape.length;
    const shape = Array.from({ length: rank }, (_, d) => Math.max(...parts.map((p) => p?.shape[d] ?? 0)));
    const size = shape.reduce((a, b) => a * b, 1);
    const pad = first.pad ?? (first.datatype === 'BYTES' ? '' : 0);
    const data: unknown[] = [];
    for (const p of parts) {
      const block = new Array<unknown>(size).fill(pad);
      if (p) copyInto(block, shape, p.data, p.shape);
      for (const x of block) data.push(x);
    }
    return { name, datatype: first.datatype, shape: [elements.length, ...shape], data } satisfies OutputTensor;
  });
}

// Copies a row-major tensor of shape `from` into the top-left corner of a row-major block of shape `to`.
function copyInto(block: unknown[], to: number[], data: unknown[], from: number[]): void {
  if (from.length === 0) { block[0] = data[0]; return; }
  const inner = (s: number[]) => s.slice(1).reduce((a, b) => a * b, 1);
  if (from.length === 1) { for (let i = 0; i < from[0]!; i += 1) block[i] = data[i]; return; }
  for (let i = 0; i < from[0]!; i += 1) {
    const sub = new Array<unknown>(inner(to)).fill(block[i * inner(to)]);
    copyInto(sub, to.slice(1), data.slice(i * inner(from), (i + 1) * inner(from)), from.slice(1));
    for (let j = 0; j < sub.length; j += 1) block[i * inner(to) + j] = sub[j];
  }
}

/** Collects the final event of every element, in batch order. */
export async function collectFinal(events: AsyncIterable<ElementEvent>, batch: number): Promise<OutputTensor[][]> {
  const out: OutputTensor[][] = new Array(batch);
  for await (const e of events) if (e.final) out[e.batchIndex] = e.outputs;
  return out;
}

/** Triton's context_logits [prompt, vocab] and generation_logits [1, tokens, vocab] tensors, for whichever of them
 * the request asked for and this response carries. */
export function logitsOutputs(r: NativeResponse | undefined, context: boolean, generation: boolean): OutputTensor[] {
  const out: OutputTensor[] = [];
  const vocab = r?.vocabSize;
  if (!r || !vocab) return out;
  if (context && r.contextLogits && r.contextLogits.length > 0) {
    const data = Array.from(r.contextLogits);
    out.push({ name: 'context_logits', datatype: 'FP32', shape: [data.length / vocab, vocab], data, pad: 0 });
  }
  if (generation && r.generationLogits && r.generationLogits.length > 0) {
    const data = Array.from(r.generationLogits);
    out.push({ name: 'generation_logits', datatype: 'FP32', shape: [1, data.length / vocab, vocab], data, pad: 0 });
  }
  return out;
}
