// tool_choice "required" or a named function: the answer must be a call, so decoding is constrained. The engine
// takes one guide and translates JSON Schema to a grammar itself (the frontend cannot write a GBNF grammar for an
// arbitrary parameters schema), and a 'json_schema' guide constrains pure JSON — so the family's opening syntax goes
// at the end of the prompt, after the template's generation prompt, and only the JSON that follows is constrained:
//   hermes       prompt + `<tool_call>\n`,  then {"name": <one of the tools>, "arguments": <its parameters>}
//   llama3_json  prompt,                    then {"name": <one of the tools>, "parameters": <its parameters>}
//   mistral      prompt + `[TOOL_CALLS]`,   then [{"name": ..., "arguments": ...}, ...] (one item without
//                                           parallel_tool_calls)
// The engine ends the sequence when the JSON is complete, and the output is read back by the family's parser
// starting inside a call block. Hermes and Llama 3 make exactly one call this way (their syntax repeats markers
// between calls, which a JSON Schema cannot express); Mistral's list allows several. Several tools: anyOf of their
// payloads, so the name and the arguments always belong together. Pure.
import type { RequestGuide } from '../guided/openai-guide.js';
import { embedSchema } from './embed-schema.js';
import type { ToolFamily } from './tool-call.js';
import type { FunctionTool } from './tool-request.js';

export interface ForcedCall {
  promptSuffix: string;
  guide: RequestGuide;
}

// A function without parameters takes an empty arguments object, and nothing else.
const NO_ARGUMENTS = { type: 'object', properties: {}, additionalProperties: false };

const PROMPT_SUFFIX: Record<ToolFamily, string> = { hermes: '<tool_call>\n', llama3_json: '', mistral: '[TOOL_CALLS]' };
const ARGUMENTS_KEY: Record<ToolFamily, string> = { hermes: 'arguments', llama3_json: 'parameters', mistral: 'arguments' };

/** The payload schema of one call, placed at JSON Pointer `at`; the tool's definitions go into `defs`, and where its
 * parts land (for error messages) into `paths`. `index`: the tool's place in the request's tools. */
function callSchema(family: ToolFamily, tool: FunctionTool, index: number, at: string, defs: Record<string, unknown>, paths: [string, string][]): Record<string, unknown> {
  const key = ARGUMENTS_KEY[family];
  const where = `${at}/properties/${key}`;
  const client = `tools[${index}].function.parameters`;
  const before = new Set(Object.keys(defs));
  const params = tool.parameters ? embedSchema(tool.parameters, where, `tool${index}_`, defs) : NO_ARGUMENTS;
  paths.push([where, client]);
  for (const name of Object.keys(defs)) {
    if (!before.has(name)) paths.push([`/$defs/${name}`, `${client}/$defs/${name.slice(`tool${index}_`.length)}`]);
  }
  return {
    type: 'object',
    properties: { name: { const: tool.name }, [key]: params },
    required: ['name', key],
    additionalProperties: false,
  };
}

/** `candidates`: the indices of the tools the call may use (every tool for "required", the named one otherwise). */
export function forcedCall(family: ToolFamily, tools: readonly FunctionTool[], candidates: readonly number[], parallel: boolean): ForcedCall {
  const defs: Record<string, unknown> = {};
  const paths: [string, string][] = [];
  const base = family === 'mistral' ? '/items' : '';
  const one = candidates.length === 1
    ? callSchema(family, tools[candidates[0]!]!, candidates[0]!, base, defs, paths)
    : { anyOf: candidates.map((i, k) => callSchema(family, tools[i]!, i, `${base}/anyOf/${k}`, defs, paths)) };
  const schema: Record<string, unknown> = family === 'mistral'
    ? { type: 'array', items: one, minItems: 1, ...(parallel ? {} : { maxItems: 1 }) }
    : one;
  if (Object.keys(defs).length > 0) schema.$defs = defs;
  return {
    promptSuffix: PROMPT_SUFFIX[family],
    guide: { guided: { guideType: 'json_schema', guide: JSON.stringify(schema) }, field: 'tool_choice', paths },
  };
}
