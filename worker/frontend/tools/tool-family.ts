// Which tool-call syntax a chat template teaches its model, read from the template's text: the markers each family's
// templates write around calls. A template with no tool syntax of its own gets Hermes' `<tool_call>` (the most
// widely trained format, and what vLLM's generic tool templates use).
import { HERMES_SYNTAX } from './hermes-parser.js';
import { LLAMA3_JSON_SYNTAX } from './llama3-json-parser.js';
import { MISTRAL_SYNTAX } from './mistral-parser.js';
import type { ToolFamily } from './tool-call.js';
import type { ToolSyntax } from './tool-call-stream.js';

export const DEFAULT_TOOL_FAMILY: ToolFamily = 'hermes';

export function detectToolFamily(templateSource: string | undefined): ToolFamily {
  if (!templateSource) return DEFAULT_TOOL_FAMILY;
  if (templateSource.includes('[TOOL_CALLS]')) return 'mistral';
  if (templateSource.includes('<tool_call>')) return 'hermes';
  // Llama 3.1/3.2: `<|python_tag|>`, the `ipython` role for results, `{"name": ..., "parameters": ...}` calls.
  const llamaHeaders = templateSource.includes('<|start_header_id|>');
  if (templateSource.includes('<|python_tag|>') || (llamaHeaders && (templateSource.includes('ipython') || templateSource.includes('"parameters"')))) {
    return 'llama3_json';
  }
  return DEFAULT_TOOL_FAMILY;
}

export const TOOL_SYNTAX: Record<ToolFamily, ToolSyntax> = {
  hermes: HERMES_SYNTAX,
  llama3_json: LLAMA3_JSON_SYNTAX,
  mistral: MISTRAL_SYNTAX,
};
