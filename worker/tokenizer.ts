// Text <-> token ids for a checkpoint directory, from its tokenizer.json + tokenizer_config.json (Hugging Face's
// formats), through @huggingface/tokenizers: a pure-JS implementation of the same algorithms, so the ids match
// what users get from Python.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { Tokenizer } from '@huggingface/tokenizers';

import { TrtllmError } from './common/errors.js';
import { tokenByteBound, type TokenByteBound } from './tokenizer-bound.js';

export interface TextTokenizer {
  encode(text: string, options?: { addSpecialTokens?: boolean }): number[];
  decode(ids: number[], options?: { skipSpecialTokens?: boolean }): string;
  readonly eosTokenId: number | undefined;
  readonly bosTokenId: number | undefined;
  /** The most UTF-8 bytes one token stands for, where such a bound holds (tokenizer-bound.ts). */
  readonly byteBound: TokenByteBound;
}

function readJson(path: string, what: string): Record<string, unknown> {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  } catch (error) {
    throw new TrtllmError(`cannot read ${what} ${path}: ${(error as Error).message}`, 'bad_checkpoint');
  }
}

function tokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string') {
    return (value as { content: string }).content;
  }
  return undefined;
}

export function loadTokenizer(modelDir: string): TextTokenizer {
  const tokenizerPath = join(modelDir, 'tokenizer.json');
  if (!existsSync(tokenizerPath)) {
    throw new TrtllmError(
      `${tokenizerPath} is missing; the text interface needs the checkpoint's tokenizer.json (token ids still work)`,
      'not_found',
    );
  }
  const configPath = join(modelDir, 'tokenizer_config.json');
  const config = existsSync(configPath) ? readJson(configPath, 'tokenizer config') : {};
  const json = readJson(tokenizerPath, 'tokenizer');
  const byteBound = tokenByteBound(json, config);  // before the library may take the JSON over
  const tokenizer = new Tokenizer(json, config);
  const eos = tokenText(config.eos_token);
  const bos = tokenText(config.bos_token);
  return {
    encode: (text, options) => tokenizer.encode(text, { add_special_tokens: options?.addSpecialTokens ?? true }).ids,
    // The library rejects an empty list; no tokens is simply no text (an empty output, a fully cancelled request).
    decode: (ids, options) => (ids.length === 0 ? '' : tokenizer.decode(ids, { skip_special_tokens: options?.skipSpecialTokens ?? true })),
    eosTokenId: eos === undefined ? undefined : tokenizer.token_to_id(eos),
    bosTokenId: bos === undefined ? undefined : tokenizer.token_to_id(bos),
    byteBound,
  };
}
