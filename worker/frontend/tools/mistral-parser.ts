// Mistral tool calls: `[TOOL_CALLS]` then a JSON array of {"name": ..., "arguments": {...}} (Mistral 7B v0.3,
// Mixtral 8x22B, Mistral Nemo/Small). [TOOL_CALLS] is a special token that detokenization drops, so an output that
// starts with a JSON array is read the same way.
import { callsFromValues, jsonSequence } from './tool-call.js';
import { parseWhole, type ToolParse, type ToolSyntax } from './tool-call-stream.js';

const MARKER = '[TOOL_CALLS]';

export const MISTRAL_SYNTAX: ToolSyntax = {
  openers: [MARKER],
  bareStart: '[',
  // A block runs to the end of the output; a model that repeats the marker between arrays is read as one list.
  parseBlock: (block) => callsFromValues(jsonSequence(block.split(MARKER).join(' ')), true),
};

export function parseMistral(text: string): ToolParse {
  return parseWhole(MISTRAL_SYNTAX, text);
}
