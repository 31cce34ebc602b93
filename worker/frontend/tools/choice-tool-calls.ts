// One chat choice's output in OpenAI's terms when tools are in play: content text and tool_calls, both as stream
// deltas (a call's id, type and name in its first delta, its arguments in the next) and as the whole message. Each
// call gets an id "call_<24 hex>"; without parallel_tool_calls only the first call is kept.
import { randomUUID } from 'node:crypto';

import type { ParsedToolCall } from './tool-call.js';
import { ToolCallStream, type ToolPiece } from './tool-call-stream.js';
import type { ToolPlan } from './tool-plan.js';

export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function: { name?: string; arguments: string };
}

export interface ToolCallMessage {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** One stream event: content, or one tool_calls delta. */
export type ChoiceEvent = { content: string; toolCall?: undefined } | { toolCall: ToolCallDelta; content?: undefined };

export function newCallId(): string {
  return `call_${randomUUID().replaceAll('-', '').slice(0, 24)}`;
}

export class ChoiceToolCalls {
  private readonly stream: ToolCallStream | undefined;
  private readonly calls: ToolCallMessage[] = [];
  private content = '';

  constructor(private readonly plan: ToolPlan, private readonly newId: () => string = newCallId) {
    this.stream = plan.syntax ? new ToolCallStream(plan.syntax, { inCall: plan.inCall }) : undefined;
  }

  /** True once a call was made: the choice's finish_reason is then "tool_calls". */
  get called(): boolean {
    return this.calls.length > 0;
  }

  push(text: string): ChoiceEvent[] {
    return this.stream ? this.events(this.stream.push(text)) : this.events([{ content: text }]);
  }

  finish(): ChoiceEvent[] {
    return this.stream ? this.events(this.stream.finish()) : [];
  }

  /** The whole message (after finish): content null when there are calls and no text. */
  message(): { role: 'assistant'; content: string | null; tool_calls?: ToolCallMessage[] } {
    if (this.calls.length === 0) return { role: 'assistant', content: this.content };
    return { role: 'assistant', content: this.content === '' ? null : this.content, tool_calls: this.calls };
  }

  private events(pieces: readonly ToolPiece[]): ChoiceEvent[] {
    const out: ChoiceEvent[] = [];
    for (const p of pieces) {
      if (p.call) out.push(...this.call(p.call));
      else if (p.content !== '') {
        this.content += p.content;
        out.push({ content: p.content });
      }
    }
    return out;
  }

  private call(call: ParsedToolCall): ChoiceEvent[] {
    if (!this.plan.parallel && this.calls.length > 0) return [];
    const index = this.calls.length;
    const id = this.newId();
    this.calls.push({ id, type: 'function', function: { name: call.name, arguments: call.arguments } });
    return [
      { toolCall: { index, id, type: 'function', function: { name: call.name, arguments: '' } } },
      { toolCall: { index, function: { arguments: call.arguments } } },
    ];
  }
}
