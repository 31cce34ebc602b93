// The messages of a chat request, checked and shaped the way Hugging Face's apply_chat_template hands them to a
// template: {role, content} with text parts joined; an assistant's tool_calls with each call's arguments parsed
// into an object (templates write `tool_call.arguments | tojson`, and vLLM passes them the same way), and a tool
// message's tool_call_id — plus its `name`, filled in from the call it answers when the client left it out, since
// templates such as Hermes' print the function's name with its result. Pure.
import { describeValue } from '../common/errors.js';
import type { ChatMessage, TemplateToolCall } from './chat-template.js';
import { isPlainObject } from './guided/object-fields.js';
import { badRequest } from './http-errors.js';

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool']);

function textContent(content: unknown, where: string, role: string, hasCalls: boolean): string {
  if (typeof content === 'string') return content;
  if ((content === null || content === undefined) && (role === 'assistant' || hasCalls)) return '';
  if (Array.isArray(content)) {
    return content.map((part, k) => {
      const p = part as { type?: unknown; text?: unknown } | null;
      if (p?.type !== 'text' || typeof p.text !== 'string') {
        throw badRequest(`${where}.content[${k}] must be {"type": "text", "text": "..."} (only text is supported), got ${describeValue(part)}`, 'messages');
      }
      return p.text;
    }).join('');
  }
  throw badRequest(`${where}.content must be a string or an array of text parts, got ${describeValue(content)}`, 'messages');
}

function readArguments(value: unknown, where: string): Record<string, unknown> {
  if (isPlainObject(value)) return value;
  if (typeof value === 'string') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      parsed = undefined;
    }
    if (isPlainObject(parsed)) return parsed;
  }
  throw badRequest(`${where} must be a JSON object as text (as OpenAI returns it), got ${describeValue(value)}`, 'messages');
}

function readToolCalls(value: unknown, where: string): TemplateToolCall[] {
  if (!Array.isArray(value)) throw badRequest(`${where} must be an array of tool calls, got ${describeValue(value)}`, 'messages');
  return value.map((c, j) => {
    const at = `${where}[${j}]`;
    if (!isPlainObject(c)) throw badRequest(`${at} must be an object {"id", "type": "function", "function": {...}}, got ${describeValue(c)}`, 'messages');
    if (typeof c.id !== 'string' || c.id === '') throw badRequest(`${at}.id must be a non-empty string, got ${describeValue(c.id)}`, 'messages');
    if (c.type !== undefined && c.type !== 'function') throw badRequest(`${at}.type must be "function", got ${describeValue(c.type)}`, 'messages');
    const f = c.function;
    if (!isPlainObject(f)) throw badRequest(`${at}.function must be an object {"name", "arguments"}, got ${describeValue(f)}`, 'messages');
    if (typeof f.name !== 'string' || f.name === '') throw badRequest(`${at}.function.name must be a non-empty string, got ${describeValue(f.name)}`, 'messages');
    return { id: c.id, type: 'function', function: { name: f.name, arguments: readArguments(f.arguments, `${at}.function.arguments`) } };
  });
}

/** Messages checked and shaped for the template. */
export function readMessages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0) throw badRequest(`messages must be a non-empty array, got ${describeValue(value)}`, 'messages');
  const callNames = new Map<string, string>();   // tool_call id → function name, from the assistant messages so far
  return value.map((m, i) => {
    const where = `messages[${i}]`;
    if (!isPlainObject(m)) throw badRequest(`${where} must be an object, got ${describeValue(m)}`, 'messages');
    const { role } = m;
    if (typeof role !== 'string' || !ROLES.has(role)) {
      throw badRequest(`${where}.role must be one of ${[...ROLES].join(', ')}, got ${describeValue(role)}`, 'messages');
    }
    const hasCalls = m.tool_calls !== undefined && m.tool_calls !== null;
    if (hasCalls && role !== 'assistant') throw badRequest(`${where}.tool_calls is only for assistant messages; this one is ${describeValue(role)}`, 'messages');
    const message: ChatMessage = { role, content: textContent(m.content, where, role, hasCalls) };
    if (m.name !== undefined && m.name !== null) {
      if (typeof m.name !== 'string') throw badRequest(`${where}.name must be a string, got ${describeValue(m.name)}`, 'messages');
      message.name = m.name;
    }
    if (hasCalls) {
      const calls = readToolCalls(m.tool_calls, `${where}.tool_calls`);
      if (calls.length > 0) message.tool_calls = calls;
      for (const c of calls) callNames.set(c.id, c.function.name);
    }
    if (role === 'tool') {
      if (typeof m.tool_call_id !== 'string' || m.tool_call_id === '') {
        throw badRequest(`${where}.tool_call_id must be the id of the call this result answers, got ${describeValue(m.tool_call_id)}`, 'messages');
      }
      message.tool_call_id = m.tool_call_id;
      const name = callNames.get(m.tool_call_id);
      if (message.name === undefined && name !== undefined) message.name = name;
    }
    return message;
  });
}
