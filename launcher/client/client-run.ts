// `trtllm-launch client`: one request (or one batch) to a generation model over HTTP, printed as the seeds'
// clients print it. Non-streaming requests go through /infer (its tensors keep the logits' shapes); --streaming
// reads generate_stream. --stop-after-ms sends Triton's stop request for the request's id, and hangs up if the
// stream still has not ended shortly after (the server cancels a request whose client disconnected).
import { type ClientOptions, checkCombination, checkProtocol, type ModelKind, modelKind, prompts } from './client-options.js';
import { type ElementResult, finishOf, formatElement, formatIds, type Tensor } from './client-output.js';
import { generateBody, inferBody, stopBody } from './client-request.js';
import { checkReady, getJson, normalizeUrl, postJson, postStream } from './http.js';
import { localCodec, serverCodec, type TextCodec } from './text-codec.js';

const HANG_UP_AFTER_STOP_MS = 2000;

export interface ClientRun {
  elements: ElementResult[];
  stopSent: boolean;
  responses: number;         // streamed events (1 for a non-streaming request)
}

/** What arrived for one batch element, before decoding. */
interface Partial {
  ids: number[];
  text: string;
  seqLen?: number;
  logProbs?: number[];
  cum?: number;
  context?: number[];
  generation?: number[];
  contextShape?: number[];
  generationShape?: number[];
}

const newPartial = (): Partial => ({ ids: [], text: '' });

function numbers(v: unknown): number[] {
  return Array.isArray(v) ? (v.flat(Infinity) as number[]) : typeof v === 'number' ? [v] : [];
}

function stopScheduler(base: string, model: string, id: string | undefined, ms: number | undefined, controller: AbortController) {
  let sent = false;
  const timers: NodeJS.Timeout[] = [];
  if (id !== undefined && ms !== undefined) {
    timers.push(setTimeout(() => {
      sent = true;
      postJson(`${base}/v2/models/${model}/generate`, stopBody(id)).catch(() => controller.abort());
      timers.push(setTimeout(() => controller.abort(), HANG_UP_AFTER_STOP_MS));
    }, ms));
  }
  return { sent: () => sent, clear: () => timers.forEach(clearTimeout) };
}

async function streamParts(url: string, body: unknown, signal: AbortSignal, parts: Map<number, Partial>): Promise<number> {
  let events = 0;
  try {
    for await (const e of postStream(url, body, signal)) {
      events += 1;
      const i = typeof e.batch_index === 'number' ? e.batch_index : 0;
      const p = parts.get(i) ?? newPartial();
      parts.set(i, p);
      p.ids.push(...numbers(e.output_ids));
      if (typeof e.text_output === 'string') p.text += e.text_output;
      if (e.output_log_probs !== undefined) (p.logProbs ??= []).push(...numbers(e.output_log_probs));
      if (typeof e.cum_log_probs === 'number') p.cum = e.cum_log_probs;
      if (e.context_logits !== undefined) p.context = numbers(e.context_logits);
      // Appended: whichever responses carry generation logits, together they cover the generated tokens.
      if (e.generation_logits !== undefined) (p.generation ??= []).push(...numbers(e.generation_logits));
    }
  } catch (error) {
    // Our own hang-up after a stop: what arrived so far is the result.
    if ((error as Error).name !== 'AbortError') throw error;
  }
  return events;
}

function rowOf(t: { shape: number[]; data: unknown[] }, i: number): { shape: number[]; data: unknown[] } {
  const rest = t.shape.slice(1);
  const size = rest.reduce((a, b) => a * b, 1);
  return { shape: [1, ...rest], data: t.data.slice(i * size, (i + 1) * size) };
}

async function inferParts(url: string, body: unknown, signal: AbortSignal, parts: Map<number, Partial>): Promise<number> {
  let res: unknown;
  try {
    res = await postJson(url, body, signal);
  } catch (error) {
    if ((error as Error).name === 'AbortError') return 0;
    throw error;
  }
  const outputs = new Map(((res as { outputs?: { name: string; shape: number[]; data: unknown[] }[] }).outputs ?? []).map((o) => [o.name, o]));
  const batch = [...outputs.values()][0]?.shape[0] ?? 0;
  for (let i = 0; i < batch; i += 1) {
    const p = newPartial();
    const row = (name: string) => { const t = outputs.get(name); return t ? rowOf(t, i) : undefined; };
    p.seqLen = row('sequence_length')?.data[0] as number | undefined;
    const ids = row('output_ids')?.data as number[] | undefined;
    if (ids) p.ids = p.seqLen === undefined ? ids : ids.slice(0, p.seqLen);
    const text = row('text_output')?.data[0];
    if (typeof text === 'string') p.text = text;
    const cum = row('cum_log_probs')?.data[0];
    if (typeof cum === 'number') p.cum = cum;
    const lp = row('output_log_probs');
    if (lp) p.logProbs = lp.data as number[];
    const ctx = row('context_logits');
    if (ctx) { p.context = ctx.data as number[]; p.contextShape = ctx.shape; }
    const gen = row('generation_logits');
    if (gen) { p.generation = gen.data as number[]; p.generationShape = gen.shape; }
    parts.set(i, p);
  }
  return 1;
}

async function vocabSize(base: string, model: string): Promise<number | undefined> {
  const config = await getJson(`${base}/v2/models/${model}/config`).catch(() => undefined) as { parameters?: { vocab_size?: { string_value?: string } } } | undefined;
  const v = Number(config?.parameters?.vocab_size?.string_value);
  return Number.isSafeInteger(v) && v > 0 ? v : undefined;
}

/** Streamed logits arrive flat: their shapes follow from the prompt length and the vocabulary. */
function streamedShapes(p: Partial, promptLen: number | undefined, vocab: number | undefined): void {
  if (!vocab) return;
  if (p.context) p.contextShape = [1, promptLen ?? p.context.length / vocab, vocab];
  if (p.generation) p.generationShape = [1, 1, p.generation.length / vocab, vocab];
}

async function toElements(
  o: ClientOptions, kind: ModelKind, parts: Map<number, Partial>, inputs: { texts?: string[]; rows?: number[][] },
  codec: TextCodec, stopSent: boolean,
): Promise<ElementResult[]> {
  const order = [...parts.keys()].sort((a, b) => a - b);
  // Streamed token outputs are new tokens only; whole ones hold the prompt first unless excluded.
  const generatedIds = order.map((i) => {
    const p = parts.get(i)!;
    const promptLen = inputs.rows?.[i]?.length ?? 0;
    return kind === 'tokens' && !o.streaming && !o.excludeInputInOutput ? p.ids.slice(promptLen) : p.ids;
  });
  const decoded = kind === 'tokens' ? await codec.decode(generatedIds) : [];
  return order.map((i, k) => {
    const p = parts.get(i)!;
    const generated = kind === 'tokens' ? generatedIds[k]!.length : p.logProbs && o.streaming ? p.logProbs.length : undefined;
    const logProbs = p.logProbs && generated !== undefined ? p.logProbs.slice(0, generated) : p.logProbs;
    const tensor = (data: number[] | undefined, shape: number[] | undefined): Tensor | undefined =>
      data ? { shape: shape ?? [data.length], data } : undefined;
    return {
      batchIndex: i,
      ...(inputs.texts?.[i] === undefined ? {} : { inputText: inputs.texts[i] }),
      ...(inputs.rows?.[i] === undefined ? {} : { inputIds: inputs.rows[i] }),
      outputText: kind === 'tokens' ? decoded[k]! : p.text,
      ...(kind === 'tokens' ? { outputIds: p.ids } : {}),
      ...(generated === undefined ? {} : { generated }),
      ...(p.cum === undefined ? {} : { cumLogProbs: p.cum }),
      ...(logProbs === undefined ? {} : { outputLogProbs: logProbs }),
      ...(p.context ? { contextLogits: tensor(p.context, p.contextShape)! } : {}),
      ...(p.generation ? { generationLogits: tensor(p.generation, p.generationShape)! } : {}),
      finish: finishOf(generated, o.requestOutputLen, stopSent),
    };
  });
}

export async function runClient(o: ClientOptions, print: (line: string) => void): Promise<ClientRun> {
  checkProtocol(o.protocol);
  const kind = modelKind(o.modelName);
  checkCombination(o, kind);
  const base = normalizeUrl(o.url);
  const texts = o.inputTokens ? undefined : prompts(o);
  await checkReady(base);
  const codec = o.tokenizerDir ? localCodec(o.tokenizerDir) : serverCodec(base);
  if (o.padId !== undefined) print(`Using pad_id: ${o.padId}`);
  if (o.endId !== undefined) print(`Using end_id: ${o.endId}`);
  let rows: number[][] | undefined;
  if (kind === 'tokens') {
    rows = o.inputTokens ? [o.inputTokens] : await codec.encode(texts!);
    for (const [i, r] of rows.entries()) print(`Input sequence${rows.length > 1 ? ` ${i}` : ''}: ${formatIds(r)}`);
  }
  const input = kind === 'tokens' ? { rows: rows! } : { prompts: texts! };
  const id = o.requestId ?? (o.stopAfterMs === undefined ? undefined : `trtllm-client-${process.pid}-${Date.now()}`);
  const controller = new AbortController();
  const stop = stopScheduler(base, o.modelName, id, o.stopAfterMs, controller);
  const parts = new Map<number, Partial>();
  let responses: number;
  try {
    responses = o.streaming
      ? await streamParts(`${base}/v2/models/${o.modelName}/generate_stream`, generateBody(o, kind, input, true, id), controller.signal, parts)
      : await inferParts(`${base}/v2/models/${o.modelName}/infer`, inferBody(o, kind, input, id), controller.signal, parts);
  } finally {
    stop.clear();
  }
  if (o.streaming && (o.returnContextLogits || o.returnGenerationLogits)) {
    const vocab = await vocabSize(base, o.modelName);
    for (const [i, p] of parts) streamedShapes(p, rows?.[i]?.length, vocab);
  }
  print('Got completed request');
  const elements = await toElements(o, kind, parts, { ...(texts ? { texts } : {}), ...(rows ? { rows } : {}) }, codec, stop.sent());
  const batched = (texts?.length ?? 1) > 1;
  for (const e of elements) for (const line of formatElement(e, kind, o.requestOutputLen, batched)) print(line);
  return { elements, stopSent: stop.sent(), responses };
}
