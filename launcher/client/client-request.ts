// Request bodies for the client (pure): Triton's field names for the token model (input_ids,
// request_output_len, runtime_top_k, ...) and the text models (text_input, max_tokens, top_k, ...), as a
// generate / generate_stream body or as KServe v2 infer tensors (which keep the outputs' shapes).
import type { ClientOptions, ModelKind } from './client-options.js';

type Datatype = 'INT32' | 'FP32' | 'BOOL' | 'UINT64';
interface Field { name: string; value: number | boolean; datatype: Datatype }

/** The per-request parameters that were given, in each model's spelling. */
export function parameterFields(o: ClientOptions, kind: ModelKind): Field[] {
  const tokens = kind === 'tokens';
  const all: [string, number | boolean | undefined, Datatype][] = [
    [tokens ? 'request_output_len' : 'max_tokens', o.requestOutputLen, 'INT32'],
    ['end_id', o.endId, 'INT32'],
    ['pad_id', o.padId, 'INT32'],
    [tokens ? 'runtime_top_k' : 'top_k', o.topK, 'INT32'],
    [tokens ? 'runtime_top_p' : 'top_p', o.topP, 'FP32'],
    ['temperature', o.temperature, 'FP32'],
    ['repetition_penalty', o.repetitionPenalty, 'FP32'],
    ['presence_penalty', o.presencePenalty, 'FP32'],
    ['frequency_penalty', o.frequencyPenalty, 'FP32'],
    [tokens ? 'len_penalty' : 'length_penalty', o.lengthPenalty, 'FP32'],
    ['min_length', o.minLength, 'INT32'],
    ['random_seed', o.randomSeed, 'UINT64'],
    ['beam_width', o.beamWidth, 'INT32'],
    ['return_log_probs', o.returnLogProbs || undefined, 'BOOL'],
    ['return_context_logits', o.returnContextLogits || undefined, 'BOOL'],
    ['return_generation_logits', o.returnGenerationLogits || undefined, 'BOOL'],
    ['exclude_input_in_output', o.excludeInputInOutput || undefined, 'BOOL'],
  ];
  return all.filter(([, value]) => value !== undefined).map(([name, value, datatype]) => ({ name, value: value!, datatype }));
}

/** The output constraint as the TensorRT-LLM backend's inputs (strings: BYTES tensors in /infer). */
export function guideFields(o: ClientOptions): { name: string; value: string }[] {
  if (!o.guide) return [];
  const fields: { name: string; value: string }[] = [{ name: 'guided_decoding_guide_type', value: o.guide.type }];
  if (o.guide.guide !== undefined) fields.push({ name: 'guided_decoding_guide', value: o.guide.guide });
  return fields;
}

/** Rows padded to the longest with pad, and each row's real length (Triton's input_ids + input_lengths). */
export function padRows(rows: number[][], pad: number): { ids: number[][]; lengths: number[] } {
  const width = Math.max(...rows.map((r) => r.length));
  return { ids: rows.map((r) => [...r, ...new Array<number>(width - r.length).fill(pad)]), lengths: rows.map((r) => r.length) };
}

/** The body of generate / generate_stream. */
export function generateBody(o: ClientOptions, kind: ModelKind, input: { prompts?: string[]; rows?: number[][] }, stream: boolean, id: string | undefined): Record<string, unknown> {
  const body: Record<string, unknown> = id === undefined ? {} : { id };
  if (kind === 'tokens') {
    const rows = input.rows!;
    if (rows.length === 1) body.input_ids = rows[0];
    else {
      const { ids, lengths } = padRows(rows, o.padId ?? 0);
      body.input_ids = ids;
      body.input_lengths = lengths;
    }
    body.streaming = stream;
  } else {
    const prompts = input.prompts!;
    body.text_input = prompts.length === 1 ? prompts[0] : prompts;
    body.stream = stream;
  }
  for (const f of parameterFields(o, kind)) body[f.name] = f.value;
  for (const f of guideFields(o)) body[f.name] = f.value;
  return body;
}

/** The body of /infer: every input a [batch, ...] tensor, per-request parameters repeated per row. */
export function inferBody(o: ClientOptions, kind: ModelKind, input: { prompts?: string[]; rows?: number[][] }, id: string | undefined): Record<string, unknown> {
  const inputs: Record<string, unknown>[] = [];
  let batch: number;
  if (kind === 'tokens') {
    const { ids, lengths } = padRows(input.rows!, o.padId ?? 0);
    batch = ids.length;
    inputs.push({ name: 'input_ids', datatype: 'INT32', shape: [batch, ids[0]!.length], data: ids.flat() });
    inputs.push({ name: 'input_lengths', datatype: 'INT32', shape: [batch, 1], data: lengths });
  } else {
    batch = input.prompts!.length;
    inputs.push({ name: 'text_input', datatype: 'BYTES', shape: [batch, 1], data: input.prompts });
  }
  for (const f of parameterFields(o, kind)) {
    inputs.push({ name: f.name, datatype: f.datatype, shape: [batch, 1], data: new Array(batch).fill(f.value) });
  }
  for (const f of guideFields(o)) inputs.push({ name: f.name, datatype: 'BYTES', shape: [batch, 1], data: new Array(batch).fill(f.value) });
  return { ...(id === undefined ? {} : { id }), inputs };
}

/** Triton's stop request: cancels the running request with this id. */
export function stopBody(id: string): Record<string, unknown> {
  return { id, stop: true };
}
