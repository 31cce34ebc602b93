// The checkpoint's chat template (tokenizer_config.json's chat_template, Jinja) rendered with @huggingface/jinja,
// the same variables Hugging Face's apply_chat_template passes.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { Template } from '@huggingface/jinja';

import { TrtllmError } from '../common/errors.js';

export interface ChatMessage { role: string; content: string }

export interface ChatTemplate {
  render(messages: ChatMessage[], addGenerationPrompt: boolean): string;
}

function tokenText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string') {
    return (value as { content: string }).content;
  }
  return '';
}

/** The template, or undefined when the checkpoint has none (chat requests then get a clear 400). */
export function loadChatTemplate(modelDir: string): ChatTemplate | undefined {
  const path = join(modelDir, 'tokenizer_config.json');
  if (!existsSync(path)) return undefined;
  const config = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  let source = config.chat_template;
  // Some checkpoints ship several named templates; "default" is the one apply_chat_template uses.
  if (Array.isArray(source)) source = (source as { name: string; template: string }[]).find((t) => t.name === 'default')?.template;
  if (typeof source !== 'string' || source === '') return undefined;
  let template: Template;
  try {
    template = new Template(source);
  } catch (error) {
    throw new TrtllmError(`${path}: chat_template does not parse: ${(error as Error).message}`, 'bad_checkpoint');
  }
  const bos = tokenText(config.bos_token);
  const eos = tokenText(config.eos_token);
  return {
    render: (messages, addGenerationPrompt) => template.render({
      messages, add_generation_prompt: addGenerationPrompt, bos_token: bos, eos_token: eos,
    }),
  };
}
