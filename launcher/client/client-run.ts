// `trtllm-launch client`: one request (or one batch) to a generation model over HTTP or gRPC (-i), printed as the
// seeds' clients print it. Non-streaming requests go through /infer or ModelInfer (their tensors keep the logits'
// shapes); --streaming reads generate_stream or ModelStreamInfer. --stop-after-ms sends Triton's stop request for
// the request's id, and hangs up if the stream still has not ended shortly after (the server cancels a request whose
// client went away).
import { clientGuide } from './client-guide.js';
import { type ClientOptions, checkCombination, checkProtocol, defaultUrl, type ModelKind, modelKind, prompts } from './client-options.js';
import { type ElementResult, finishOf, formatElement, formatIds, type Tensor } from './client-output.js';
import { GrpcClient, grpcAddress } from './grpc.js';
import { normalizeUrl } from './http.js';
import { localCodec, type TextCodec } from './text-codec.js';
import { type ClientTransport, grpcTransport, httpTransport, type RequestSpec } from './transport.js';

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

function stopScheduler(transport: ClientTransport, model: string, id: string | undefined, ms: number | undefined, controller: AbortController) {
  let sent = false;
  const timers: NodeJS.Timeout[] = [];
  if (id !== undefined && ms !== undefined) {
    timers.push(setTimeout(() => {
      sent = true;
      transport.stop(model, id).catch(() => controller.abort());
      timers.push(setTimeout(() => controller.abort(), HANG_UP_AFTER_STOP_MS));
    }, ms));
  }
  return { sent: () => sent, clear: () => timers.forEach(clearTimeout) };
}

async function streamParts(events$: AsyncIterable<Record<string, unknown>>, parts: Map<number, Partial>): Promise<number> {
  let events = 0;
  try {
    for await (const e of events$) {
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

async function inferParts(whole: () => Promise<unknown>, parts: Map<number, Partial>): Promise<number> {
  let res: unknown;
  try {
    res = await whole();
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

/** The transport -i asks for, at --url (or the protocol's default port). */
export function openTransport(protocol: string, url: string | undefined): ClientTransport {
  const where = url ?? defaultUrl(protocol);
  return protocol === 'grpc' ? grpcTransport(new GrpcClient(grpcAddress(where))) : httpTransport(normalizeUrl(where));
}

export async function runClient(options: ClientOptions, print: (line: string) => void): Promise<ClientRun> {
  checkProtocol(options.protocol);
  const kind = modelKind(options.modelName);
  checkCombination(options, kind);
  const o: ClientOptions = { ...options, guide: clientGuide(options) };
  const transport = openTransport(o.protocol, o.url);
  try {
    return await runWith(transport, o, kind, print);
  } finally {
    transport.close();
  }
}

async function runWith(transport: ClientTransport, o: ClientOptions, kind: ModelKind, print: (line: string) => void): Promise<ClientRun> {
  const texts = o.inputTokens ? undefined : prompts(o);
  await transport.checkReady();
  const codec = o.tokenizerDir ? localCodec(o.tokenizerDir) : transport.codec;
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
  const stop = stopScheduler(transport, o.modelName, id, o.stopAfterMs, controller);
  const parts = new Map<number, Partial>();
  const spec: RequestSpec = { o, kind, input, id };
  let responses: number;
  try {
    responses = o.streaming
      ? await streamParts(transport.stream(spec, controller.signal), parts)
      : await inferParts(() => transport.whole(spec, controller.signal), parts);
  } finally {
    stop.clear();
  }
  if (o.streaming && (o.returnContextLogits || o.returnGenerationLogits)) {
    const vocab = await transport.vocabSize(o.modelName);
    for (const [i, p] of parts) streamedShapes(p, rows?.[i]?.length, vocab);
  }
  print('Got completed request');
  const elements = await toElements(o, kind, parts, { ...(texts ? { texts } : {}), ...(rows ? { rows } : {}) }, codec, stop.sent());
  const batched = (texts?.length ?? 1) > 1;
  for (const e of elements) for (const line of formatElement(e, kind, o.requestOutputLen, batched)) print(line);
  return { elements, stopSent: stop.sent(), responses };
}
