// Runs the n choices of every prompt of an OpenAI request as executor requests and interleaves their text deltas.
// Shared by completions and chat, which differ only in how they build prompts and shape chunks.
import type { LoraRequest, NativeRequest } from '../binding/addon-types.js';
import { AbortFanOut } from './abort-fan-out.js';
import { ATTENTION_WINDOW_NAMES } from './attention-window.js';
import { DRAFT_TOKENS_NAMES } from './draft-tokens.js';
import { logitBiasVector } from './embedding-bias.js';
import { guideErrorsIn, withGuideErrors } from './guided/guide-errors.js';
import type { RequestGuide } from './guided/openai-guide.js';
import { inClientTerms } from './http-errors.js';
import { mergeStreams } from './merge-streams.js';
import { choiceSeed, type OpenAiParams } from './openai-params.js';
import type { ServingContext } from './serving-context.js';
import { compact } from './text-params.js';
import { startText, type TextDelta, type TextRun } from './text-generation.js';

const OPENAI_NAMES = {
  maxTokens: 'max_tokens', inputTokenIds: 'prompt (as tokens)', 'sampling.': '', topK: 'top_k', topP: 'top_p',
  minTokens: 'min_tokens', ...ATTENTION_WINDOW_NAMES, ...DRAFT_TOKENS_NAMES,
};

export interface PromptInput {
  ids: number[];
  text: string;    // for echo; a prompt given as ids is decoded only when echo needs it ('' otherwise)
}
export interface ChoiceDelta { index: number; delta: TextDelta }

export interface ChoicesOptions {
  signal: AbortSignal;
  lora?: LoraRequest | undefined;     // the LoRA adapter the request's "model" named (model-catalog.ts)
  returnLogProbs: boolean;
  defaultMaxTokens: (prompt: PromptInput) => number;
  metricsModel: string;
  guide?: RequestGuide | undefined;   // the output constraint, and the field that asked for it
}

/** Enqueues every choice at once. The route has checked readiness before it tokenized (requireReady): a request
 * admitted then is served, even if a drain began while its prompts were being tokenized. */
export function startChoices(ctx: ServingContext, prompts: PromptInput[], p: OpenAiParams, o: ChoicesOptions): AsyncIterable<ChoiceDelta> {
  // The client leaving, or a later choice failing to enqueue, cancels all.
  const choices = new AbortFanOut(o.signal);
  const streams: AsyncIterable<ChoiceDelta>[] = [];
  const runs: TextRun[] = [];
  const source = o.guide ? { field: o.guide.field, param: o.guide.field, paths: o.guide.paths } : undefined;
  try {
    const embeddingBias = logitBiasVector(p.logitBias, ctx.executor.modelConfig.vocabSize);
    prompts.forEach((prompt, pi) => {
      for (let j = 0; j < p.n; j += 1) {
        const index = pi * p.n + j;
        const sampling = p.sampling.temperature === 0 ? p.sampling : { ...p.sampling, seed: choiceSeed(p.seed, index) };
        const request: NativeRequest = compact({
          inputTokenIds: prompt.ids,
          maxTokens: p.maxTokens ?? o.defaultMaxTokens(prompt),
          streaming: p.stream,
          endId: p.ignoreEos ? -1 : ctx.defaults.endId,
          padId: ctx.defaults.padId,
          sampling,
          maxAttentionWindow: p.maxAttentionWindow,
          numDraftTokens: p.numDraftTokens,
          embeddingBias,
          output: { returnLogProbs: o.returnLogProbs, excludeInputFromOutput: true },
          guidedDecoding: o.guide?.guided,
          lora: o.lora,
        });
        const run = withGuideErrors(() => inClientTerms(() => startText(ctx, {
          promptIds: prompt.ids, request, stopStrings: p.stop, includeStop: false,
          tracker: ctx.metrics.trackRequest(o.metricsModel), signal: choices.child(),
        }), OPENAI_NAMES), source);
        runs.push(run);
        streams.push(tag(index, source ? guideErrorsIn(run.deltas, source) : run.deltas));
      }
    });
  } catch (error) {
    choices.abort();
    for (const run of runs) run.abandon();
    throw error;
  }
  return streams.length === 1 ? streams[0]! : mergeStreams(streams);
}

async function* tag(index: number, deltas: AsyncIterable<TextDelta>): AsyncGenerator<ChoiceDelta> {
  for await (const delta of deltas) yield { index, delta };
}
