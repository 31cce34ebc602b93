// The checkpoint's chat template (tokenizer_config.json's chat_template, Jinja) rendered with @huggingface/jinja,
// the same variables Hugging Face's apply_chat_template passes — `tools` included (None when there are none) — and
// the tool-call syntax the template teaches its model (tools/tool-family.ts).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { Template } from '@huggingface/jinja';

import { TrtllmError } from '../common/errors.js';
import type { ToolFamily } from './tools/tool-call.js';
import { detectToolFamily } from './tools/tool-family.js';

/** An assistant's earlier call, as templates read it: arguments as an object (chat-messages.ts). */
export interface TemplateToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: Record<string, unknown> };
}

export interface ChatMessage {
  role: string;
  content: string;
  name?: string;
  tool_calls?: TemplateToolCall[];   // present only when the message has calls: templates test `'tool_calls' in m`
  tool_call_id?: string;
}

export interface ChatTemplate {
  /** `tools`: Hugging Face's list of {type: "function", function: {...}}, or null for none. */
  render(messages: ChatMessage[], addGenerationPrompt: boolean, tools?: unknown[] | null): string;
  toolFamily: ToolFamily;
}

function tokenText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string') {
    return (value as { content: string }).content;
  }
  return '';
}

function compile(source: string, where: string): Template {
  try {
    return new Template(source);
  } catch (error) {
    throw new TrtllmError(`${where}: chat_template does not parse: ${(error as Error).message}`, 'bad_checkpoint');
  }
}

/** A template from its source (and, as some checkpoints ship, a separate one for requests with tools, which
 * apply_chat_template then uses); `where` names it in errors. */
export function chatTemplate(source: string, tokens: { bos: string; eos: string }, where: string, toolUseSource?: string): ChatTemplate {
  const template = compile(source, where);
  const toolUse = toolUseSource === undefined ? undefined : compile(toolUseSource, `${where} (tool_use)`);
  return {
    render: (messages, addGenerationPrompt, tools = null) => (tools !== null && toolUse ? toolUse : template).render({
      messages, add_generation_prompt: addGenerationPrompt, bos_token: tokens.bos, eos_token: tokens.eos, tools,
    }),
    toolFamily: detectToolFamily(toolUseSource ?? source),
  };
}

/** The template, or undefined when the checkpoint has none (chat requests then get a clear 400). */
export function loadChatTemplate(modelDir: string): ChatTemplate | undefined {
  const path = join(modelDir, 'tokenizer_config.json');
  if (!existsSync(path)) return undefined;
  const config = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  let source = config.chat_template;
  let toolUse: string | undefined;
  // Some checkpoints ship several named templates: "default" is the one apply_chat_template uses, "tool_use" the one
  // it uses for requests with tools.
  if (Array.isArray(source)) {
    const named = source as { name: string; template: string }[];
    toolUse = named.find((t) => t.name === 'tool_use')?.template;
    source = named.find((t) => t.name === 'default')?.template;
  }
  if (typeof source !== 'string' || source === '') return undefined;
  return chatTemplate(source, { bos: tokenText(config.bos_token), eos: tokenText(config.eos_token) }, path, typeof toolUse === 'string' && toolUse !== '' ? toolUse : undefined);
}
