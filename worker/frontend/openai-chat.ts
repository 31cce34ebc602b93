// POST /v1/chat/completions: messages rendered with the checkpoint's chat template, then generated like a
// completion; whole or streamed as chat.completion.chunk events ending with `data: [DONE]`.
import { randomUUID } from 'node:crypto';

import { describeValue } from '../common/errors.js';
import type { ChatMessage } from './chat-template.js';
import { checkChoices } from './fan-out.js';
import { badRequest } from './http-errors.js';
import { type Route, sendJson } from './http-server.js';
import { type ModelCatalog, requireReady } from './model-catalog.js';
import { startChoices } from './openai-generate.js';
import { CHAT_KEYS, checkKeys, finishReason, readOpenAiParams } from './openai-params.js';
import { tokenize } from './prompt-bounds.js';
import { endEventStream, startEventStream, writeEvent } from './sse.js';

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool']);

/** Messages checked and flattened to {role, content: string} (text parts of a content array are joined). */
export function readMessages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0) throw badRequest(`messages must be a non-empty array, got ${describeValue(value)}`, 'messages');
  return value.map((m, i) => {
    const where = `messages[${i}]`;
    if (typeof m !== 'object' || m === null || Array.isArray(m)) throw badRequest(`${where} must be an object, got ${describeValue(m)}`, 'messages');
    const { role, content } = m as { role?: unknown; content?: unknown };
    if (typeof role !== 'string' || !ROLES.has(role)) {
      throw badRequest(`${where}.role must be one of ${[...ROLES].join(', ')}, got ${describeValue(role)}`, 'messages');
    }
    if (typeof content === 'string') return { role, content };
    if ((content === null || content === undefined) && role === 'assistant') return { role, content: '' };
    if (Array.isArray(content)) {
      const parts = content.map((part, k) => {
        const p = part as { type?: unknown; text?: unknown } | null;
        if (p?.type !== 'text' || typeof p.text !== 'string') {
          throw badRequest(`${where}.content[${k}] must be {"type": "text", "text": "..."} (only text is supported), got ${describeValue(part)}`, 'messages');
        }
        return p.text;
      });
      return { role, content: parts.join('') };
    }
    throw badRequest(`${where}.content must be a string or an array of text parts, got ${describeValue(content)}`, 'messages');
  });
}

interface TokenLogProb { token: string; logprob: number; bytes: number[]; top_logprobs: { token: string; logprob: number; bytes: number[] }[] }

export function chatRoutes(catalog: ModelCatalog): Route[] {
  return [{
    method: 'POST', path: /^\/v1\/chat\/completions$/, style: 'openai',
    handle: async (c) => {
      const body = await c.json();
      checkKeys(body, CHAT_KEYS);
      const p = readOpenAiParams(body, 'max_completion_tokens');
      const ctx = catalog.openAi(p.model);
      checkChoices(ctx, 1, p.n, 'n');
      const logprobs = body.logprobs === null || body.logprobs === undefined ? false : body.logprobs;
      if (typeof logprobs !== 'boolean') throw badRequest(`logprobs must be a boolean, got ${describeValue(logprobs)}`, 'logprobs');
      const top = body.top_logprobs;
      if (top !== undefined && top !== null && (!Number.isSafeInteger(top) || (top as number) < 0 || (top as number) > 20)) {
        throw badRequest(`top_logprobs must be an integer in [0, 20], got ${describeValue(top)}`, 'top_logprobs');
      }
      const format = body.response_format as { type?: unknown } | null | undefined;
      if (format !== undefined && format !== null && format.type !== 'text') {
        throw badRequest(`response_format ${describeValue(format?.type)} is not supported: only {"type": "text"}`, 'response_format');
      }
      if (Array.isArray(body.tools) && body.tools.length > 0) throw badRequest('tools are not supported', 'tools');
      const messages = readMessages(body.messages);
      if (!ctx.chatTemplate) {
        throw badRequest(`model '${ctx.servedModelName}' has no chat template (tokenizer_config.json has no chat_template); use /v1/completions with a prompt`, 'messages');
      }
      let text: string;
      try {
        text = ctx.chatTemplate.render(messages, true);
      } catch (error) {
        throw badRequest(`the chat template failed on these messages: ${(error as Error).message}`, 'messages');
      }
      // Admitted here: a drain that begins while the prompt is tokenized lets this request finish.
      requireReady(ctx, ctx.servedModelName);
      // The template writes any special tokens it wants (as apply_chat_template), so none are added here.
      const [ids] = (await tokenize(ctx, [{ text, field: 'messages (as the chat template renders them)', addSpecialTokens: false }], [], c.signal)).prompts as [number[]];
      if (ids.length === 0) throw badRequest('the chat template rendered these messages to an empty prompt', 'messages');
      const maxSeqLen = ctx.executor.limits.maxSeqLen;
      const events = startChoices(ctx, [{ ids, text }], p, {
        signal: c.signal, returnLogProbs: logprobs, metricsModel: p.model,
        defaultMaxTokens: (prompt) => Math.max(1, maxSeqLen - prompt.ids.length),
      });
      const id = `chatcmpl-${randomUUID()}`;
      const created = Math.floor(Date.now() / 1000);
      const promptTokens = ids.length * p.n;
      let completionTokens = 0;
      const logprobsFor = (tokenIds: number[], values: number[]): { content: TokenLogProb[] } | null => {
        if (!logprobs) return null;
        return {
          content: tokenIds.map((t, k) => {
            const token = ctx.tokenizer.decode([t]);
            const bytes = [...Buffer.from(token, 'utf8')];
            const logprob = values[k] ?? 0;
            return { token, logprob, bytes, top_logprobs: top ? [{ token, logprob, bytes }] : [] };
          }),
        };
      };
      const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({ id, object: 'chat.completion.chunk', created, model: p.model, choices, ...extra });
      if (p.stream) {
        startEventStream(c.res);
        for (let i = 0; i < p.n; i += 1) writeEvent(c.res, chunk([{ index: i, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]));
        for await (const { index, delta } of events) {
          completionTokens += delta.tokenIds.length;
          if (delta.text !== '' || delta.tokenIds.length > 0) {
            const ok = writeEvent(c.res, chunk([{ index, delta: { content: delta.text }, logprobs: logprobsFor(delta.tokenIds, delta.logProbs), finish_reason: null }]));
            if (!ok) break;
          }
          if (delta.final) writeEvent(c.res, chunk([{ index, delta: {}, logprobs: null, finish_reason: finishReason(delta.finishReason) }]));
        }
        if (p.includeUsage) {
          writeEvent(c.res, chunk([], { usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens } }));
        }
        writeEvent(c.res, '[DONE]');
        endEventStream(c.res);
        return;
      }
      const contents = new Array<string>(p.n).fill('');
      const reasons = new Array<string | null>(p.n).fill(null);
      const lps: ({ content: TokenLogProb[] } | null)[] = new Array(p.n).fill(null);
      for await (const { index, delta } of events) {
        completionTokens += delta.tokenIds.length;
        contents[index] += delta.text;
        const lp = logprobsFor(delta.tokenIds, delta.logProbs);
        if (lp) lps[index] = { content: [...(lps[index]?.content ?? []), ...lp.content] };
        if (delta.final) reasons[index] = finishReason(delta.finishReason);
      }
      if (c.signal.aborted) return;
      sendJson(c.res, 200, {
        id, object: 'chat.completion', created, model: p.model,
        choices: contents.map((content, index) => ({
          index, message: { role: 'assistant', content }, logprobs: lps[index], finish_reason: reasons[index],
        })),
        usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
      });
    },
  }];
}
