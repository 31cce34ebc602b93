// vLLM's extra request fields for constrained decoding, accepted on /v1/completions and /v1/chat/completions so its
// clients work unchanged: guided_json (a JSON Schema, as an object or as its text), guided_regex, guided_grammar
// (GBNF, start rule `root`) and guided_choice (a list of strings). Pure; each returns undefined when absent.
import type { GuidedDecodingParams } from '../../binding/addon-types.js';
import { describeValue } from '../../common/errors.js';
import { badRequest } from '../http-errors.js';
import { choiceGrammar } from './choice-grammar.js';
import { isPlainObject } from './object-fields.js';

export const VLLM_GUIDE_KEYS = ['guided_json', 'guided_regex', 'guided_grammar', 'guided_choice'] as const;
export type VllmGuideKey = typeof VLLM_GUIDE_KEYS[number];

function guidedJson(value: unknown): GuidedDecodingParams {
  let schema = value;
  if (typeof value === 'string') {
    try {
      schema = JSON.parse(value);
    } catch (error) {
      throw badRequest(`guided_json is a string that is not JSON (${(error as Error).message}); send a JSON Schema object or its text`, 'guided_json');
    }
  }
  if (!isPlainObject(schema)) throw badRequest(`guided_json must be a JSON Schema object (or its text), got ${describeValue(value)}`, 'guided_json');
  return { guideType: 'json_schema', guide: JSON.stringify(schema) };
}

function nonEmptyString(value: unknown, key: string, what: string): string {
  if (typeof value !== 'string' || value === '') throw badRequest(`${key} must be a non-empty string (${what}), got ${describeValue(value)}`, key);
  return value;
}

function guidedChoice(value: unknown): GuidedDecodingParams {
  if (!Array.isArray(value) || value.length === 0) throw badRequest(`guided_choice must be a non-empty array of strings, got ${describeValue(value)}`, 'guided_choice');
  const bad = value.findIndex((c) => typeof c !== 'string' || c === '');
  if (bad >= 0) throw badRequest(`guided_choice[${bad}] must be a non-empty string, got ${describeValue(value[bad])}`, 'guided_choice');
  return choiceGrammar(value as string[]);
}

/** The constraint one vLLM field asks for (the field is present and not null). */
export function readVllmGuide(key: VllmGuideKey, value: unknown): GuidedDecodingParams {
  switch (key) {
    case 'guided_json': return guidedJson(value);
    case 'guided_regex': return { guideType: 'regex', guide: nonEmptyString(value, key, 'a regular expression the whole output matches') };
    case 'guided_grammar': return { guideType: 'ebnf_grammar', guide: nonEmptyString(value, key, 'a GBNF grammar with a `root` rule') };
    case 'guided_choice': return guidedChoice(value);
  }
}
