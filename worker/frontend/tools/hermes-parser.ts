// Hermes / Qwen tool calls: each call is `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, several in
// a row for parallel calls, possibly after some text (Hermes 2 Pro, Qwen 2/2.5/3, and the default for templates with
// no tool syntax of their own).
import { callsFromValues, jsonSequence } from './tool-call.js';
import { parseWhole, type ToolParse, type ToolSyntax } from './tool-call-stream.js';

export const HERMES_SYNTAX: ToolSyntax = {
  openers: ['<tool_call>'],
  closer: '</tool_call>',
  parseBlock: (block) => callsFromValues(jsonSequence(block), false),
};

/** A whole output's content (null when it is only calls) and calls. */
export function parseHermes(text: string): ToolParse {
  return parseWhole(HERMES_SYNTAX, text);
}
