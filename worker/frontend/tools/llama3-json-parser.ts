// Llama 3.1 / 3.2 JSON tool calls: the whole answer is `{"name": ..., "parameters": {...}}` (3.2 may write several,
// separated by `;`), possibly after `<|python_tag|>` — a special token that detokenization drops, so an output that
// starts with `{` is read the same way. An answer that starts otherwise is content.
import { callsFromValues, jsonSequence } from './tool-call.js';
import { parseWhole, type ToolParse, type ToolSyntax } from './tool-call-stream.js';

export const LLAMA3_JSON_SYNTAX: ToolSyntax = {
  openers: ['<|python_tag|>'],
  bareStart: '{',
  parseBlock: (block) => callsFromValues(jsonSequence(block, true), false),
};

export function parseLlama3Json(text: string): ToolParse {
  return parseWhole(LLAMA3_JSON_SYNTAX, text);
}
