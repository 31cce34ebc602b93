// POST /v1/completions: prompt (text, texts, token ids or lists of them) × n choices, whole or streamed as
// `data:` chunks ending with `data: [DONE]`, with usage and logprobs; response_format and vLLM's guided_* constrain
// the text (guided/).
import { randomUUID } from 'node:crypto';

import { describeValue } from '../common/errors.js';
import { checkChoices } from './fan-out.js';
import { readOpenAiGuide } from './guided/openai-guide.js';
import { badRequest } from './http-errors.js';
import { type Route, sendJson } from './http-server.js';
import { type ModelCatalog, requireReady } from './model-catalog.js';
import { type PromptInput, startChoices } from './openai-generate.js';
import { checkKeys, COMPLETION_KEYS, finishReason, readOpenAiParams } from './openai-params.js';
import { checkPromptIds, detokenize, tokenize } from './prompt-bounds.js';
import type { ServingContext } from './serving-context.js';
import { endEventStream, startEventStream, writeEvent } from './sse.js';

/**
 * prompt: "text" | ["text", ...] | [id, ...] | [[id, ...], ...]. The prompts × n are counted against the max batch
 * size first, then each prompt is checked, then the texts are tokenized off the event loop (prompt-bounds.ts); a
 * prompt given as ids is decoded only when `echo` needs its text.
 */
export async function readPrompts(ctx: ServingContext, prompt: unknown, o: { n: number; echo: boolean; signal: AbortSignal }): Promise<PromptInput[]> {
  if (typeof prompt !== 'string' && (!Array.isArray(prompt) || prompt.length === 0)) {
    throw badRequest(`prompt must be a string, an array of strings or token ids, got ${describeValue(prompt)}`, 'prompt');
  }
  const single = typeof prompt === 'string' || prompt.every((x) => typeof x === 'number');
  const list: unknown[] = single ? [prompt] : prompt as unknown[];
  checkChoices(ctx, list.length, o.n, list.length > 1 ? 'prompt' : 'n');
  const where = (i: number) => (single ? 'prompt' : `prompt[${i}]`);
  const vocab = ctx.executor.modelConfig.vocabSize;
  const entries = list.map((p, i): string | number[] => {
    if (typeof p === 'string') {
      if (p === '') throw badRequest(`${where(i)} is an empty string; a prompt needs text`, 'prompt');
      return p;
    }
    if (!Array.isArray(p)) throw badRequest(`prompt[${i}] must be a string or an array of token ids, got ${describeValue(p)}`, 'prompt');
    const bad = p.findIndex((id) => !Number.isSafeInteger(id) || (id as number) < 0 || (id as number) >= vocab);
    if (bad >= 0) throw badRequest(`${where(i)}[${bad}] must be a token id in [0, ${vocab}), got ${describeValue(p[bad])}`, 'prompt');
    if (p.length === 0) throw badRequest(`${where(i)} is empty`, 'prompt');
    checkPromptIds(ctx, p.length, where(i));
    return p as number[];
  });
  const texts = entries.flatMap((e, i) => (typeof e === 'string' ? [{ text: e, field: where(i) }] : []));
  const encoded = (await tokenize(ctx, texts, [], o.signal)).prompts;
  const idLists = entries.filter((e): e is number[] => typeof e !== 'string');
  const decoded = o.echo && idLists.length > 0 ? await detokenize(ctx, idLists, o.signal) : [];
  let t = 0;
  let d = 0;
  return entries.map((e) => (typeof e === 'string' ? { ids: encoded[t++]!, text: e } : { ids: e, text: decoded[d++] ?? '' }));
}

interface LogProbs { tokens: string[]; token_logprobs: number[]; top_logprobs: Record<string, number>[]; text_offset: number[] }

export function completionsRoutes(catalog: ModelCatalog): Route[] {
  return [{
    method: 'POST', path: /^\/v1\/completions$/, style: 'openai',
    handle: async (c) => {
      const body = await c.json();
      checkKeys(body, COMPLETION_KEYS);
      const p = readOpenAiParams(body);
      const { ctx, adapter } = catalog.openAi(p.model);
      if (body.suffix !== undefined && body.suffix !== null) throw badRequest('suffix is not supported', 'suffix');
      const logprobs = body.logprobs === null || body.logprobs === undefined ? undefined : body.logprobs;
      if (logprobs !== undefined && (!Number.isSafeInteger(logprobs) || (logprobs as number) < 0 || (logprobs as number) > 5)) {
        throw badRequest(`logprobs must be an integer in [0, 5], got ${describeValue(logprobs)}`, 'logprobs');
      }
      const echo = body.echo === undefined || body.echo === null ? false : body.echo;
      if (typeof echo !== 'boolean') throw badRequest(`echo must be a boolean, got ${describeValue(echo)}`, 'echo');
      const guide = readOpenAiGuide(body);
      // Admitted here: a drain that begins while the prompts are tokenized lets this request finish.
      requireReady(ctx, ctx.servedModelName);
      const prompts = await readPrompts(ctx, body.prompt, { n: p.n, echo, signal: c.signal });
      const events = startChoices(ctx, prompts, p, {
        signal: c.signal, lora: adapter && { taskId: adapter.taskId }, returnLogProbs: logprobs !== undefined, defaultMaxTokens: () => 16, metricsModel: p.model, guide,
      });
      const id = `cmpl-${randomUUID()}`;
      const created = Math.floor(Date.now() / 1000);
      const total = prompts.length * p.n;
      const promptTokens = prompts.reduce((n, pr) => n + pr.ids.length, 0) * p.n;
      let completionTokens = 0;
      const texts = new Array<string>(total).fill('');
      const reasons = new Array<string | null>(total).fill(null);
      const lps: (LogProbs | null)[] = new Array(total).fill(null);
      const offsets = new Array<number>(total).fill(0);
      const logprobsFor = (index: number, tokenIds: number[], values: number[]): LogProbs | null => {
        if (logprobs === undefined) return null;
        const tokens = tokenIds.map((t) => ctx.tokenizer.decode([t]));
        const lp: LogProbs = { tokens, token_logprobs: values.slice(0, tokens.length), top_logprobs: [], text_offset: [] };
        tokens.forEach((tok, k) => {
          lp.top_logprobs.push({ [tok]: values[k] ?? 0 });  // the sampled token only: the engine keeps no alternatives
          lp.text_offset.push(offsets[index]!);
          offsets[index]! += tok.length;
        });
        return lp;
      };
      if (p.stream) {
        startEventStream(c.res);
        if (echo) {
          prompts.forEach((pr, pi) => {
            for (let j = 0; j < p.n; j += 1) {
              writeEvent(c.res, { id, object: 'text_completion', created, model: p.model, choices: [{ index: pi * p.n + j, text: pr.text, logprobs: null, finish_reason: null }] });
            }
          });
        }
        for await (const { index, delta } of events) {
          completionTokens += delta.tokenIds.length;
          const chunk = {
            id, object: 'text_completion', created, model: p.model,
            choices: [{ index, text: delta.text, logprobs: logprobsFor(index, delta.tokenIds, delta.logProbs), finish_reason: delta.final ? finishReason(delta.finishReason) : null }],
          };
          if ((delta.text !== '' || delta.final) && !writeEvent(c.res, chunk)) break;
        }
        if (p.includeUsage) {
          writeEvent(c.res, { id, object: 'text_completion', created, model: p.model, choices: [], usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens } });
        }
        writeEvent(c.res, '[DONE]');
        endEventStream(c.res);
        return;
      }
      for await (const { index, delta } of events) {
        completionTokens += delta.tokenIds.length;
        texts[index] += delta.text;
        const lp = logprobsFor(index, delta.tokenIds, delta.logProbs);
        if (lp) {
          const acc = lps[index] ?? { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
          acc.tokens.push(...lp.tokens); acc.token_logprobs.push(...lp.token_logprobs);
          acc.top_logprobs.push(...lp.top_logprobs); acc.text_offset.push(...lp.text_offset);
          lps[index] = acc;
        }
        if (delta.final) reasons[index] = finishReason(delta.finishReason);
      }
      if (c.signal.aborted) return;
      sendJson(c.res, 200, {
        id, object: 'text_completion', created, model: p.model,
        choices: texts.map((text, index) => ({
          index, text: echo ? prompts[Math.floor(index / p.n)]!.text + text : text, logprobs: lps[index], finish_reason: reasons[index],
        })),
        usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
      });
    },
  }];
}
