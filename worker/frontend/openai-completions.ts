// POST /v1/completions: prompt (text, texts, token ids or lists of them) × n choices, whole or streamed as
// `data:` chunks ending with `data: [DONE]`, with usage and logprobs.
import { randomUUID } from 'node:crypto';

import { describeValue } from '../common/errors.js';
import { badRequest } from './http-errors.js';
import { type Route, sendJson } from './http-server.js';
import type { ModelCatalog } from './model-catalog.js';
import { type PromptInput, startChoices } from './openai-generate.js';
import { checkKeys, COMPLETION_KEYS, finishReason, readOpenAiParams } from './openai-params.js';
import type { ServingContext } from './serving-context.js';
import { endEventStream, startEventStream, writeEvent } from './sse.js';

/** prompt: "text" | ["text", ...] | [id, ...] | [[id, ...], ...]. */
export function readPrompts(ctx: ServingContext, prompt: unknown): PromptInput[] {
  const vocab = ctx.executor.modelConfig.vocabSize;
  const fromIds = (ids: unknown[], where: string): PromptInput => {
    const bad = ids.findIndex((id) => !Number.isSafeInteger(id) || (id as number) < 0 || (id as number) >= vocab);
    if (bad >= 0) throw badRequest(`${where}[${bad}] must be a token id in [0, ${vocab}), got ${describeValue(ids[bad])}`, 'prompt');
    if (ids.length === 0) throw badRequest(`${where} is empty`, 'prompt');
    return { ids: ids as number[], text: ctx.tokenizer.decode(ids as number[]) };
  };
  const fromText = (text: string, where: string): PromptInput => {
    if (text === '') throw badRequest(`${where} is an empty string; a prompt needs text`, 'prompt');
    return { ids: ctx.tokenizer.encode(text), text };
  };
  if (typeof prompt === 'string') return [fromText(prompt, 'prompt')];
  if (!Array.isArray(prompt) || prompt.length === 0) {
    throw badRequest(`prompt must be a string, an array of strings or token ids, got ${describeValue(prompt)}`, 'prompt');
  }
  if (prompt.every((x) => typeof x === 'number')) return [fromIds(prompt, 'prompt')];
  return prompt.map((p, i) => {
    if (typeof p === 'string') return fromText(p, `prompt[${i}]`);
    if (Array.isArray(p)) return fromIds(p, `prompt[${i}]`);
    throw badRequest(`prompt[${i}] must be a string or an array of token ids, got ${describeValue(p)}`, 'prompt');
  });
}

interface LogProbs { tokens: string[]; token_logprobs: number[]; top_logprobs: Record<string, number>[]; text_offset: number[] }

export function completionsRoutes(catalog: ModelCatalog): Route[] {
  return [{
    method: 'POST', path: /^\/v1\/completions$/, style: 'openai',
    handle: async (c) => {
      const body = await c.json();
      checkKeys(body, COMPLETION_KEYS);
      const p = readOpenAiParams(body);
      const ctx = catalog.openAi(p.model);
      if (body.suffix !== undefined && body.suffix !== null) throw badRequest('suffix is not supported', 'suffix');
      const logprobs = body.logprobs === null || body.logprobs === undefined ? undefined : body.logprobs;
      if (logprobs !== undefined && (!Number.isSafeInteger(logprobs) || (logprobs as number) < 0 || (logprobs as number) > 5)) {
        throw badRequest(`logprobs must be an integer in [0, 5], got ${describeValue(logprobs)}`, 'logprobs');
      }
      const echo = body.echo === undefined || body.echo === null ? false : body.echo;
      if (typeof echo !== 'boolean') throw badRequest(`echo must be a boolean, got ${describeValue(echo)}`, 'echo');
      const prompts = readPrompts(ctx, body.prompt);
      const events = startChoices(ctx, prompts, p, {
        signal: c.signal, returnLogProbs: logprobs !== undefined, defaultMaxTokens: () => 16, metricsModel: p.model,
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
