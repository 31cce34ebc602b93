// What a chat request's tools mean for its run: the tools the chat template sees, a prompt suffix and a guide when
// a call is forced (forced-call.ts), and the syntax to read calls back from the output. tool_choice "none" renders
// the template without tools (the model is not told about them) and reads no calls. Pure.
import type { RequestGuide } from '../guided/openai-guide.js';
import { forcedCall } from './forced-call.js';
import type { ToolFamily } from './tool-call.js';
import type { ToolSyntax } from './tool-call-stream.js';
import { TOOL_SYNTAX } from './tool-family.js';
import { type ToolRequest, templateTools } from './tool-request.js';

export interface ToolPlan {
  templateTools: unknown[] | null;   // null: rendered as Hugging Face does without tools (tools=None)
  promptSuffix: string;
  guide: RequestGuide | undefined;
  syntax: ToolSyntax | undefined;    // undefined: the output is all content
  inCall: boolean;                   // the output starts inside a call block (its opener is in the prompt)
  parallel: boolean;
}

export const NO_TOOLS: ToolPlan = { templateTools: null, promptSuffix: '', guide: undefined, syntax: undefined, inCall: false, parallel: true };

export function planTools(request: ToolRequest, family: ToolFamily): ToolPlan {
  const { tools, choice, parallel } = request;
  if (choice.mode === 'none' || tools.length === 0) return NO_TOOLS;
  const base = { templateTools: templateTools(tools), syntax: TOOL_SYNTAX[family], parallel };
  if (choice.mode === 'auto') return { ...base, promptSuffix: '', guide: undefined, inCall: false };
  const candidates = choice.mode === 'named' ? [tools.findIndex((t) => t.name === choice.name)] : tools.map((_, i) => i);
  const forced = forcedCall(family, tools, candidates, parallel);
  return { ...base, promptSuffix: forced.promptSuffix, guide: forced.guide, inCall: true };
}
