// tensorrt_llm: the token-level model, with Triton's tensor names (input_ids, input_lengths, request_output_len,
// runtime_top_k, ... → output_ids, sequence_length, ...). Each batch row runs as its own executor request.
import type { NativeRequest, NativeResponse } from '../binding/addon-types.js';
import { AbortFanOut } from './abort-fan-out.js';
import { ATTENTION_WINDOW, ATTENTION_WINDOW_NAMES, readAttentionWindow } from './attention-window.js';
import { DRAFT_TOKENS, DRAFT_TOKENS_NAMES, readDraftTokens } from './draft-tokens.js';
import { BIAS_TENSOR, readBiasTensor } from './embedding-bias.js';
import { describeValue } from '../common/errors.js';
import { checkBatch } from './fan-out.js';
import { guideErrorsIn, withGuideErrors } from './guided/guide-errors.js';
import { KSERVE_GUIDE_SOURCE, readKserveGuide } from './guided/kserve-guide.js';
import { badRequest, inClientTerms } from './http-errors.js';
import { logitsOutputs } from './kserve-encode.js';
import { LORA_NAMES, readKserveLora } from './kserve-lora.js';
import { holdLease, logitsCost } from './logits-budget.js';
import { mergeStreams } from './merge-streams.js';
import type { ServedModel } from './model-repository.js';
import { checkVirtualIds, PROMPT_TABLE_NAMES, readPromptTable } from './prompt-table.js';
import { elementAt, type NamedValues, optBool, optInt } from './named-values.js';
import type { ElementEvent, ModelRun, OutputTensor, RunOptions } from './model-run.js';
import type { ServingContext } from './serving-context.js';
import { compact, samplingFrom } from './text-params.js';
import { parseWordTensor } from './word-lists.js';

const TOKEN_NAMES = {
  maxTokens: 'request_output_len', inputTokenIds: 'input_ids', 'sampling.': '', endId: 'end_id', padId: 'pad_id',
  topK: 'runtime_top_k', topP: 'runtime_top_p', beamWidth: 'beam_width', minTokens: 'min_length', seed: 'random_seed',
  ...ATTENTION_WINDOW_NAMES, ...DRAFT_TOKENS_NAMES, ...LORA_NAMES, ...PROMPT_TABLE_NAMES,
};

const TOKEN_LOGITS_NAMES = { prompt: 'input_ids', maxTokens: 'request_output_len' };

/** input_ids as rows: [L] is one request, [B, L] is B requests (cut to input_lengths when given), B at most the
 * model's max batch size. */
function inputRows(values: NamedValues, maxBatchSize: number): number[][] {
  const v = values.get('input_ids');
  if (v === undefined) throw badRequest('input_ids is required (the prompt token ids)', 'input_ids');
  if (v.shape.length === 2) checkBatch({ maxBatchSize }, v.shape[0]!, `input_ids' batch of ${v.shape[0]} rows`, 'input_ids');
  const bad = v.data.findIndex((x) => !Number.isSafeInteger(x));
  if (bad >= 0) throw badRequest(`input_ids[${bad}] must be an integer token id, got ${describeValue(v.data[bad])}`, 'input_ids');
  const ids = v.data as number[];
  if (v.shape.length === 1) return [ids];
  if (v.shape.length !== 2) throw badRequest(`input_ids must have shape [L] or [batch, L], got [${v.shape.join(', ')}]`, 'input_ids');
  const [b, l] = v.shape as [number, number];
  const rows = Array.from({ length: b }, (_, i) => ids.slice(i * l, (i + 1) * l));
  return rows.map((row, i) => {
    const len = optInt(elementAt(values, 'input_lengths', i, b), 'input_lengths', 1, l);
    return len === undefined ? row : row.slice(0, len);
  });
}

function wordsAt(values: NamedValues, name: string, i: number, batch: number): number[][] | undefined {
  const v = values.get(name);
  if (v === undefined) return undefined;
  // [2, N] applies to every row; [B, 2, N] is one list per row.
  const perRow = v.shape.length === 3;
  const n = v.shape[v.shape.length - 1]!;
  if (perRow && v.shape[0] !== batch) throw badRequest(`${name} has ${v.shape[0]} rows but the batch has ${batch}`, name);
  const all = v.data instanceof Float32Array ? Array.from(v.data) : v.data;  // (floats: refused by the parse)
  const data = perRow ? all.slice(i * 2 * n, (i + 1) * 2 * n) : all;
  const words = parseWordTensor(data, [v.shape[perRow ? 1 : 0]!, n], name);
  return words.length > 0 ? words : undefined;
}

function tokenOutputs(r: NativeResponse, request: NativeRequest, logProbs: number[], ids: number[], final: boolean, i: number, batch: number): OutputTensor[] {
  const out: OutputTensor[] = [
    { name: 'output_ids', datatype: 'INT32', shape: [1, ids.length], data: ids, pad: request.endId ?? -1 },
    { name: 'sequence_length', datatype: 'INT32', shape: [1], data: [ids.length] },
  ];
  if (request.output?.returnLogProbs) {
    if (final) out.push({ name: 'cum_log_probs', datatype: 'FP32', shape: [1], data: [r.cumLogProbs?.[0] ?? 0] });
    out.push({ name: 'output_log_probs', datatype: 'FP32', shape: [1, logProbs.length], data: logProbs, pad: 0 });
  }
  // Streaming: the engine sends the context logits once (with the first tokens) and each step's generation
  // logits with that step's tokens, so they go out with whichever event carries them, not only the last one.
  out.push(...logitsOutputs(r, request.output?.returnContextLogits ?? false, request.output?.returnGenerationLogits ?? false));
  if (batch > 1) out.push({ name: 'batch_index', datatype: 'INT32', shape: [1], data: [i] });
  return out;
}

export function runTokenModel(ctx: ServingContext, model: ServedModel, values: NamedValues, options: RunOptions): ModelRun {
  const rows = inputRows(values, ctx.maxBatchSize);
  const batch = rows.length;
  const loras = readKserveLora(values, batch);
  // P-tuning: one table for every row; its virtual ids appear in input_ids.
  const { vocabSize, hiddenSize } = ctx.executor.modelConfig;
  const promptTuning = readPromptTable(values, hiddenSize);
  if (promptTuning) for (const row of rows) checkVirtualIds(row, vocabSize, promptTuning, 'input_ids');
  const requests = rows.map((inputTokenIds, i) => {
    const get = (name: string) => elementAt(values, name, i, batch);
    const maxTokens = optInt(get('request_output_len'), 'request_output_len', 1);
    if (maxTokens === undefined) throw badRequest('request_output_len is required (tokens to generate)', 'request_output_len');
    const asked = optBool(get('streaming'), 'streaming');
    const streaming = options.streamEndpoint && (asked ?? options.streamByDefault ?? true);
    return compact<NativeRequest>({
      inputTokenIds,
      maxTokens,
      streaming,
      endId: optInt(get('end_id'), 'end_id', -1) ?? ctx.defaults.endId,
      padId: optInt(get('pad_id'), 'pad_id', -1) ?? ctx.defaults.padId,
      stopWords: wordsAt(values, 'stop_words_list', i, batch),
      badWords: wordsAt(values, 'bad_words_list', i, batch),
      embeddingBias: readBiasTensor(values.get(BIAS_TENSOR), ctx.executor.modelConfig.vocabSize, i, batch),
      sampling: samplingFrom(get, { topK: 'runtime_top_k', topP: 'runtime_top_p' }),
      maxAttentionWindow: readAttentionWindow(get(ATTENTION_WINDOW)),
      numDraftTokens: readDraftTokens(get(DRAFT_TOKENS)),
      guidedDecoding: readKserveGuide(get),
      lora: loras[i],
      promptTuning,
      output: {
        returnLogProbs: optBool(get('return_log_probs'), 'return_log_probs') ?? false,
        returnContextLogits: optBool(get('return_context_logits'), 'return_context_logits') ?? false,
        returnGenerationLogits: optBool(get('return_generation_logits'), 'return_generation_logits') ?? false,
        // Streamed responses carry only new tokens; a whole result includes the prompt unless asked otherwise.
        excludeInputFromOutput: streaming || (optBool(get('exclude_input_in_output'), 'exclude_input_in_output') ?? false),
      },
    });
  });
  // Logits are decided before anything runs: over the budget, no row starts.
  const lease = ctx.logitsBudget.reserve(logitsCost(requests, ctx.executor.modelConfig.vocabSize, TOKEN_LOGITS_NAMES));
  // Enqueue only once every row validated, so a bad row leaves nothing running.
  const cancels = new AbortFanOut(options.signal);
  const handles: ReturnType<ServingContext['executor']['enqueue']>[] = [];
  const trackers: ReturnType<ServingContext['metrics']['trackRequest']>[] = [];
  let streams: AsyncIterable<ElementEvent>[];
  try {
    streams = requests.map((request, i) => {
      const guide = request.guidedDecoding ? KSERVE_GUIDE_SOURCE : undefined;
      const handle = withGuideErrors(() => inClientTerms(() => ctx.executor.enqueue(request), TOKEN_NAMES), guide);
      handles.push(handle);
      options.onEnqueued?.(handle);
      const tracker = ctx.metrics.trackRequest(model.name);
      trackers.push(tracker);
      tracker.inputDone(request.inputTokenIds.length);
      const events = rowEvents(handle, request, i, batch, { ...options, signal: cancels.child() }, tracker);
      return guide ? guideErrorsIn(events, guide) : events;
    });
  } catch (error) {
    // A later row could not be enqueued (a full queue): the earlier ones must not run for nobody, nor stay pending
    // in the metrics (their events are never read).
    for (const handle of handles) handle.cancel();
    for (const tracker of trackers) tracker.finish(false);
    lease.release();
    throw error;
  }
  const events = batch === 1 ? streams[0]! : mergeStreams(streams);
  return { batchSize: batch, events: holdLease(lease, events, handles, options) };
}

async function* rowEvents(
  handle: ReturnType<ServingContext['executor']['enqueue']>, request: NativeRequest, i: number, batch: number,
  options: RunOptions, tracker: ReturnType<ServingContext['metrics']['trackRequest']>,
): AsyncGenerator<ElementEvent> {
  const cancel = () => handle.cancel();
  if (options.signal.aborted) cancel();
  options.signal.addEventListener('abort', cancel, { once: true });
  let ok = false;
  let queueSeconds: number | undefined;
  try {
    for await (const r of handle) {
      const ids = r.outputTokenIds?.[0] ?? [];
      tracker.tokens(request.streaming || r.isFinal ? ids.length - (request.output?.excludeInputFromOutput ? 0 : request.inputTokenIds.length) : 0);
      if (r.timings) queueSeconds = r.timings.firstScheduled - r.timings.arrival;
      ok = r.isFinal && r.finishReasons?.[0] !== 'cancelled';
      yield {
        batchIndex: i, outputs: tokenOutputs(r, request, r.logProbs?.[0] ?? [], ids, r.isFinal, i, batch), final: r.isFinal,
        finishReason: r.isFinal ? r.finishReasons?.[0] : undefined,
      };
    }
  } finally {
    if (!ok) handle.cancel();
    options.signal.removeEventListener('abort', cancel);
    tracker.finish(ok, queueSeconds);
  }
}
