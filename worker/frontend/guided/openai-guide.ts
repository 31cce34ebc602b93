// The one output constraint of an OpenAI request, whichever way it was asked for: response_format, one of vLLM's
// guided_* fields, or (chat) a tool_choice that forces a call. Two at once is a 400 naming both: there is no sound
// way to intersect two grammars here, and guessing which one wins would silently ignore the other.
import type { GuidedDecodingParams } from '../../binding/addon-types.js';
import { badRequest } from '../http-errors.js';
import { readResponseFormat } from './response-format.js';
import { readVllmGuide, VLLM_GUIDE_KEYS } from './vllm-guided.js';

/** A constraint and the request field that asked for it (engine errors about the guide name this field); `paths`:
 * JSON Pointers into a guide the route built itself, with what the client calls them (guide-errors.ts). */
export interface RequestGuide {
  guided: GuidedDecodingParams;
  field: string;
  paths?: readonly (readonly [string, string])[];
}

export const GUIDE_KEYS = ['response_format', ...VLLM_GUIDE_KEYS] as const;

/** `extra`: a constraint the route derived itself (a forced tool call), counted like the others. */
export function readOpenAiGuide(body: Record<string, unknown>, extra?: RequestGuide): RequestGuide | undefined {
  const found: RequestGuide[] = [];
  const format = readResponseFormat(body.response_format);
  if (format) found.push({ guided: format, field: 'response_format' });
  for (const key of VLLM_GUIDE_KEYS) {
    if (body[key] !== undefined && body[key] !== null) found.push({ guided: readVllmGuide(key, body[key]), field: key });
  }
  if (extra) found.push(extra);
  if (found.length > 1) {
    throw badRequest(`${found[0]!.field} and ${found[1]!.field} both constrain the output; send only one of them`, found[1]!.field);
  }
  return found[0];
}
