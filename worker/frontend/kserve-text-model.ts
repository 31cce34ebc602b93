// ensemble and tensorrt_llm_bls: text in, text out. Each prompt of the batch runs as its own executor request;
// results are reported per element (with batch_index when the batch has several) as soon as each is ready.
import type { FinishReason, NativeResponse } from '../binding/addon-types.js';
import { AbortFanOut } from './abort-fan-out.js';
import { ATTENTION_WINDOW_NAMES } from './attention-window.js';
import { DRAFT_TOKENS_NAMES } from './draft-tokens.js';
import { biasFromWords, biasWordList } from './embedding-bias.js';
import { guideErrorsIn, withGuideErrors } from './guided/guide-errors.js';
import { KSERVE_GUIDE_SOURCE } from './guided/kserve-guide.js';
import { inClientTerms } from './http-errors.js';
import { logitsOutputs } from './kserve-encode.js';
import { LORA_NAMES } from './kserve-lora.js';
import { holdLease, logitsCost } from './logits-budget.js';
import { mergeStreams } from './merge-streams.js';
import type { ServedModel } from './model-repository.js';
import { PROMPT_TABLE_NAMES, readPromptTable, virtualIds } from './prompt-table.js';
import type { NamedValues } from './named-values.js';
import type { ElementEvent, ModelRun, OutputTensor, RunOptions } from './model-run.js';
import { tokenize } from './prompt-bounds.js';
import type { ServingContext } from './serving-context.js';
import { readTextParams, textInputField, type TextParams, textNativeRequest } from './text-params.js';
import { startText, type TextDelta, type TextRun } from './text-generation.js';

const TEXT_NAMES = {
  maxTokens: 'max_tokens', inputTokenIds: 'text_input (as tokens)', 'sampling.': '', endId: 'end_id', padId: 'pad_id',
  topK: 'top_k', topP: 'top_p', beamWidth: 'beam_width', minTokens: 'min_length', seed: 'random_seed',
  ...ATTENTION_WINDOW_NAMES, ...DRAFT_TOKENS_NAMES, ...LORA_NAMES, ...PROMPT_TABLE_NAMES,
};

const TEXT_LOGITS_NAMES = { prompt: 'text_input (as tokens)', maxTokens: 'max_tokens' };

function extraOutputs(p: TextParams, logProbs: number[], final: NativeResponse | undefined, batchIndex: number, batch: number): OutputTensor[] {
  const out: OutputTensor[] = [];
  if (p.returnLogProbs) {
    if (final) out.push({ name: 'cum_log_probs', datatype: 'FP32', shape: [1], data: [final.cumLogProbs?.[0] ?? 0] });
    out.push({ name: 'output_log_probs', datatype: 'FP32', shape: [1, logProbs.length], data: logProbs, pad: 0 });
  }
  out.push(...logitsOutputs(final, p.returnContextLogits, p.returnGenerationLogits));
  if (batch > 1) out.push({ name: 'batch_index', datatype: 'INT32', shape: [1], data: [batchIndex] });
  return out;
}

export async function runTextModel(ctx: ServingContext, model: ServedModel, values: NamedValues, options: RunOptions): Promise<ModelRun> {
  const params = readTextParams(values, ctx.maxBatchSize);
  const batch = params.length;
  // P-tuning: the table's rows run as virtual tokens before each prompt's own (prompt-table.ts's virtualIds).
  const vocab = ctx.executor.modelConfig.vocabSize;
  const promptTuning = readPromptTable(values, ctx.executor.modelConfig.hiddenSize);
  const leading = virtualIds(vocab, promptTuning);
  // Every prompt and word is tokenized (off the event loop) before the first request is enqueued, so a prompt
  // refused for its length leaves nothing running.
  const tokens = await tokenize(
    ctx, params.map((p, i) => ({ text: p.prompt, field: textInputField(i, batch) })),
    params.flatMap((p) => [...p.stopWords, ...p.badWords, ...biasWordList(p.biasWords)]), options.signal,
  );
  const prepared = params.map((p, i) => {
    // Only generate_stream streams (per iteration unless the request says stream: false); generate collects.
    const streaming = options.streamEndpoint && (p.stream ?? options.streamByDefault ?? true);
    const promptIds = tokens.prompts[i]!;
    const bias = biasFromWords(tokens.words, p.biasWords, vocab);
    const request = textNativeRequest(p, [...leading, ...promptIds], tokens.words, ctx.defaults, streaming, bias);
    // (The detokenizer's context is the text's own tokens: the virtual ones are no vocabulary entries.)
    return { p, streaming, promptIds, request: promptTuning ? { ...request, promptTuning } : request };
  });
  // Logits are decided before anything runs: over the budget, no prompt starts.
  const lease = ctx.logitsBudget.reserve(logitsCost(prepared.map((x) => x.request), vocab, TEXT_LOGITS_NAMES));
  const started: TextRun[] = [];
  const elements = new AbortFanOut(options.signal);
  let runs: AsyncIterable<ElementEvent>[];
  try {
    runs = prepared.map(({ p, streaming, promptIds, request }, i) => {
      const guide = p.guidedDecoding ? KSERVE_GUIDE_SOURCE : undefined;
      const run = withGuideErrors(() => inClientTerms(() => startText(ctx, {
        promptIds,
        request,
        stopStrings: p.stopWords,
        includeStop: true,
        tracker: ctx.metrics.trackRequest(model.name),
        signal: elements.child(),
      }), TEXT_NAMES), guide);
      started.push(run);
      options.onEnqueued?.(run.handle);
      return elementEvents(p, i, batch, guide ? guideErrorsIn(run.deltas, guide) : run.deltas, streaming);
    });
  } catch (error) {
    // A later prompt was rejected: the earlier ones must not keep running for nobody.
    for (const run of started) run.abandon();
    lease.release();
    throw error;
  }
  const events = batch === 1 ? runs[0]! : mergeStreams(runs);
  return { batchSize: batch, events: holdLease(lease, events, started.map((run) => run.handle), options) };
}

async function* elementEvents(p: TextParams, i: number, batch: number, deltas: AsyncIterable<TextDelta>, streaming: boolean): AsyncGenerator<ElementEvent> {
  if (streaming) {
    // Streamed: each iteration's new text only, as Triton's decoupled responses carry only new tokens.
    for await (const d of deltas) {
      if (d.text === '' && !d.final && d.tokenIds.length === 0) continue;
      const outputs: OutputTensor[] = [{ name: 'text_output', datatype: 'BYTES', shape: [1], data: [d.text] }];
      outputs.push(...extraOutputs(p, d.logProbs, d.final ? d.response : undefined, i, batch));
      yield { batchIndex: i, outputs, final: d.final, finishReason: d.final ? d.finishReason : undefined };
    }
    return;
  }
  let text = '';
  const logProbs: number[] = [];
  let last: NativeResponse | undefined;
  let finishReason: FinishReason | undefined;
  for await (const d of deltas) {
    text += d.text;
    logProbs.push(...d.logProbs);
    last = d.response;
    finishReason = d.finishReason;
  }
  const full = p.excludeInput ? text : p.prompt + text;
  const outputs: OutputTensor[] = [{ name: 'text_output', datatype: 'BYTES', shape: [1], data: [full] }];
  outputs.push(...extraOutputs(p, logProbs, last, i, batch));
  yield { batchIndex: i, outputs, final: true, finishReason };
}
