// What the client prints (pure): the seeds' lines for inflight_batcher_llm_client and end_to_end_grpc_client —
// "Input sequence:", "Got completed request", "Input:", "Output beam 0:", "Output sequence:", the logits
// shapes as numpy prints them — plus a closing line with the token count and why generation ended.

export interface Tensor { shape: number[]; data: number[] }

export type Finish = 'length' | 'end_id' | 'cancelled' | 'unknown';

export interface ElementResult {
  batchIndex: number;
  inputText?: string;
  inputIds?: number[];
  outputText: string;
  outputIds?: number[];          // the token model's output_ids (the prompt too unless excluded or streamed)
  generated?: number;            // new tokens, where known
  cumLogProbs?: number;
  outputLogProbs?: number[];
  contextLogits?: Tensor;
  generationLogits?: Tensor;
  finish: Finish;
}

/** A Python-style list: [1, 2, 3]. */
export function formatIds(ids: readonly number[]): string {
  return `[${ids.join(', ')}]`;
}

/** A numpy shape: (1, 12, 512); a 1-d shape keeps its comma, (5,). */
export function formatShape(shape: readonly number[]): string {
  return shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
}

/** The first and last few values, as numpy abbreviates a large array. */
export function previewValues(data: readonly number[], edge = 3): string {
  const fmt = (x: number) => (Number.isInteger(x) ? String(x) : x.toPrecision(6));
  if (data.length <= 2 * edge) return `[${data.map(fmt).join(' ')}]`;
  return `[${data.slice(0, edge).map(fmt).join(' ')} ... ${data.slice(-edge).map(fmt).join(' ')}]`;
}

/** Which ending a result had, from what the client knows: the stop it sent and the tokens it got. */
export function finishOf(generated: number | undefined, asked: number, stopSent: boolean): Finish {
  if (generated !== undefined && generated >= asked) return 'length';
  if (stopSent) return 'cancelled';
  return generated === undefined ? 'unknown' : 'end_id';
}

export function formatElement(r: ElementResult, kind: 'tokens' | 'text', asked: number, batched: boolean): string[] {
  const lines: string[] = [];
  if (batched) lines.push(`batch_index ${r.batchIndex}:`);
  if (r.inputText !== undefined) lines.push(`Input: ${r.inputText}`);
  if (kind === 'tokens') {
    lines.push(`Output beam 0: ${r.outputText}`);
    lines.push(`Output sequence: ${formatIds(r.outputIds ?? [])}`);
  } else {
    lines.push(`Output: ${r.outputText}`);
  }
  if (r.cumLogProbs !== undefined) lines.push(`cum_log_probs: ${r.cumLogProbs}`);
  if (r.outputLogProbs !== undefined) lines.push(`output_log_probs: ${previewValues(r.outputLogProbs)}`);
  for (const [name, t] of [['context_logits', r.contextLogits], ['generation_logits', r.generationLogits]] as const) {
    if (!t) continue;
    lines.push(`${name}.shape: ${formatShape(t.shape)}`);
    lines.push(`${name}: ${previewValues(t.data)}`);
  }
  // Text models do not say how many tokens they generated: then only a known ending is worth a line.
  if (r.generated !== undefined) lines.push(`Finish: ${r.finish} (generated ${r.generated} of ${asked} tokens)`);
  else if (r.finish !== 'unknown') lines.push(`Finish: ${r.finish}`);
  return lines;
}
