// POST /v1/chat/completions: messages (and tools) rendered with the checkpoint's chat template, then generated like
// a completion; whole or streamed as chat.completion.chunk events ending with `data: [DONE]`. With tools, each
// choice's text is read for calls in the template's syntax (tools/), and response_format / guided_* / a forced
// tool_choice constrain decoding (guided/).
import { randomUUID } from 'node:crypto';

import { describeValue } from '../common/errors.js';
import { readMessages } from './chat-messages.js';
import { checkChoices } from './fan-out.js';
import { readOpenAiGuide } from './guided/openai-guide.js';
import { badRequest } from './http-errors.js';
import { type Route, sendJson } from './http-server.js';
import { type ModelCatalog, requireReady } from './model-catalog.js';
import { startChoices } from './openai-generate.js';
import { CHAT_KEYS, checkKeys, finishReason, readOpenAiParams } from './openai-params.js';
import { tokenize } from './prompt-bounds.js';
import { endEventStream, startEventStream, writeEvent } from './sse.js';
import { type ChoiceEvent, ChoiceToolCalls } from './tools/choice-tool-calls.js';
import { planTools } from './tools/tool-plan.js';
import { readToolRequest } from './tools/tool-request.js';

interface TokenLogProb { token: string; logprob: number; bytes: number[]; top_logprobs: { token: string; logprob: number; bytes: number[] }[] }

/** A stream event as a chunk's delta. */
function deltaOf(event: ChoiceEvent): Record<string, unknown> {
  return event.toolCall ? { tool_calls: [event.toolCall] } : { content: event.content };
}

export function chatRoutes(catalog: ModelCatalog): Route[] {
  return [{
    method: 'POST', path: /^\/v1\/chat\/completions$/, style: 'openai',
    handle: async (c) => {
      const body = await c.json();
      checkKeys(body, CHAT_KEYS);
      const p = readOpenAiParams(body, 'max_completion_tokens');
      const { ctx, adapter } = catalog.openAi(p.model);
      checkChoices(ctx, 1, p.n, 'n');
      const logprobs = body.logprobs === null || body.logprobs === undefined ? false : body.logprobs;
      if (typeof logprobs !== 'boolean') throw badRequest(`logprobs must be a boolean, got ${describeValue(logprobs)}`, 'logprobs');
      const top = body.top_logprobs;
      if (top !== undefined && top !== null && (!Number.isSafeInteger(top) || (top as number) < 0 || (top as number) > 20)) {
        throw badRequest(`top_logprobs must be an integer in [0, 20], got ${describeValue(top)}`, 'top_logprobs');
      }
      const toolRequest = readToolRequest(body);
      const messages = readMessages(body.messages);
      if (!ctx.chatTemplate) {
        throw badRequest(`model '${ctx.servedModelName}' has no chat template (tokenizer_config.json has no chat_template); use /v1/completions with a prompt`, 'messages');
      }
      const planned = planTools(toolRequest, ctx.chatTemplate.toolFamily);
      const guide = readOpenAiGuide(body, planned.guide);
      // tool_choice "auto" with response_format / guided_*: the answer is held to that format, so it is content (a
      // JSON string value that happens to hold "<tool_call>" is not a call).
      const plan = guide && !planned.guide ? { ...planned, syntax: undefined } : planned;
      let text: string;
      try {
        text = ctx.chatTemplate.render(messages, true, plan.templateTools) + plan.promptSuffix;
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
        signal: c.signal, lora: adapter && { taskId: adapter.taskId }, returnLogProbs: logprobs, metricsModel: p.model, guide,
        defaultMaxTokens: (prompt) => Math.max(1, maxSeqLen - prompt.ids.length),
      });
      const id = `chatcmpl-${randomUUID()}`;
      const created = Math.floor(Date.now() / 1000);
      const promptTokens = ids.length * p.n;
      let completionTokens = 0;
      const logprobsFor = (tokenIds: number[], values: number[]): TokenLogProb[] => {
        if (!logprobs) return [];
        return tokenIds.map((t, k) => {
          const token = ctx.tokenizer.decode([t]);
          const bytes = [...Buffer.from(token, 'utf8')];
          const logprob = values[k] ?? 0;
          return { token, logprob, bytes, top_logprobs: top ? [{ token, logprob, bytes }] : [] };
        });
      };
      const outputs = Array.from({ length: p.n }, () => new ChoiceToolCalls(plan));
      const reasonOf = (index: number, reason: string | undefined) => (outputs[index]!.called ? 'tool_calls' : finishReason(reason));
      const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({ id, object: 'chat.completion.chunk', created, model: p.model, choices, ...extra });
      if (p.stream) {
        startEventStream(c.res);
        for (let i = 0; i < p.n; i += 1) writeEvent(c.res, chunk([{ index: i, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]));
        // Logprobs of text held back (a possible tool call) go out with the next chunk of that choice.
        const heldLogprobs: TokenLogProb[][] = Array.from({ length: p.n }, () => []);
        const takeLogprobs = (index: number) => {
          if (!logprobs) return null;
          const content = heldLogprobs[index]!;
          heldLogprobs[index] = [];
          return { content };
        };
        let open = true;
        for await (const { index, delta } of events) {
          completionTokens += delta.tokenIds.length;
          heldLogprobs[index]!.push(...logprobsFor(delta.tokenIds, delta.logProbs));
          const out = outputs[index]!;
          const pending = [...out.push(delta.text), ...(delta.final ? out.finish() : [])];
          // Without tools every iteration with tokens is a chunk (its logprobs), as before.
          if (!plan.syntax && pending.length === 0 && delta.tokenIds.length > 0) pending.push({ content: '' });
          for (const event of pending) {
            open = writeEvent(c.res, chunk([{ index, delta: deltaOf(event), logprobs: takeLogprobs(index), finish_reason: null }]));
            if (!open) break;
          }
          if (!open) break;
          if (delta.final) writeEvent(c.res, chunk([{ index, delta: {}, logprobs: heldLogprobs[index]!.length > 0 ? takeLogprobs(index) : null, finish_reason: reasonOf(index, delta.finishReason) }]));
        }
        if (p.includeUsage) {
          writeEvent(c.res, chunk([], { usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens } }));
        }
        writeEvent(c.res, '[DONE]');
        endEventStream(c.res);
        return;
      }
      const reasons = new Array<string | null>(p.n).fill(null);
      const lps: TokenLogProb[][] = Array.from({ length: p.n }, () => []);
      for await (const { index, delta } of events) {
        completionTokens += delta.tokenIds.length;
        outputs[index]!.push(delta.text);
        lps[index]!.push(...logprobsFor(delta.tokenIds, delta.logProbs));
        if (delta.final) {
          outputs[index]!.finish();
          reasons[index] = reasonOf(index, delta.finishReason);
        }
      }
      if (c.signal.aborted) return;
      sendJson(c.res, 200, {
        id, object: 'chat.completion', created, model: p.model,
        choices: outputs.map((out, index) => ({
          index, message: out.message(), logprobs: logprobs ? { content: lps[index] } : null, finish_reason: reasons[index],
        })),
        usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
      });
    },
  }];
}
