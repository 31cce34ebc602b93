// OpenAI's tools, tool_choice and parallel_tool_calls, checked (every rejection names the field and the value) and
// normalized: function tools only, each name unique; tool_choice "none" | "auto" | "required" | a named tool.
// Pure.
import { describeValue } from '../../common/errors.js';
import { badRequest } from '../http-errors.js';
import { checkFields, isPlainObject } from '../guided/object-fields.js';

export interface FunctionTool {
  name: string;
  description?: string;
  parameters?: Record<string, unknown>;   // a JSON Schema of the arguments object; absent: no arguments
  strict?: boolean;
}

export type ToolChoice = { mode: 'none' } | { mode: 'auto' } | { mode: 'required' } | { mode: 'named'; name: string };

export interface ToolRequest {
  tools: FunctionTool[];
  choice: ToolChoice;
  parallel: boolean;
}

// OpenAI's rule for a function's name.
const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const CHOICES = ['none', 'auto', 'required'];

function readTool(value: unknown, i: number): FunctionTool {
  const where = `tools[${i}]`;
  if (!isPlainObject(value)) throw badRequest(`${where} must be an object {"type": "function", "function": {...}}, got ${describeValue(value)}`, 'tools');
  checkFields(value, ['type', 'function'], where, 'tools');
  if (value.type !== 'function') throw badRequest(`${where}.type must be "function" (the only kind of tool), got ${describeValue(value.type)}`, 'tools');
  const f = value.function;
  if (!isPlainObject(f)) throw badRequest(`${where}.function must be an object {"name": ..., "parameters": {...}}, got ${describeValue(f)}`, 'tools');
  checkFields(f, ['name', 'description', 'parameters', 'strict'], `${where}.function`, 'tools');
  if (typeof f.name !== 'string' || !NAME.test(f.name)) {
    throw badRequest(`${where}.function.name must be 1 to 64 letters, digits, underscores or dashes, got ${describeValue(f.name)}`, 'tools');
  }
  const tool: FunctionTool = { name: f.name };
  if (f.description !== undefined && f.description !== null) {
    if (typeof f.description !== 'string') throw badRequest(`${where}.function.description must be a string, got ${describeValue(f.description)}`, 'tools');
    tool.description = f.description;
  }
  if (f.parameters !== undefined && f.parameters !== null) {
    if (!isPlainObject(f.parameters)) {
      throw badRequest(`${where}.function.parameters must be an object (a JSON Schema of the arguments), got ${describeValue(f.parameters)}`, 'tools');
    }
    tool.parameters = f.parameters;
  }
  if (f.strict !== undefined && f.strict !== null) {
    if (typeof f.strict !== 'boolean') throw badRequest(`${where}.function.strict must be a boolean, got ${describeValue(f.strict)}`, 'tools');
    tool.strict = f.strict;
  }
  return tool;
}

function readChoice(value: unknown, tools: readonly FunctionTool[]): ToolChoice {
  if (value === undefined || value === null) return { mode: tools.length > 0 ? 'auto' : 'none' };
  let choice: ToolChoice;
  if (typeof value === 'string') {
    if (!CHOICES.includes(value)) {
      throw badRequest(`tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}, got ${describeValue(value)}`, 'tool_choice');
    }
    choice = { mode: value as 'none' | 'auto' | 'required' };
  } else {
    if (!isPlainObject(value) || value.type !== 'function' || !isPlainObject(value.function)) {
      throw badRequest(`tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}, got ${describeValue(value)}`, 'tool_choice');
    }
    checkFields(value, ['type', 'function'], 'tool_choice', 'tool_choice');
    checkFields(value.function, ['name'], 'tool_choice.function', 'tool_choice');
    const name = value.function.name;
    if (typeof name !== 'string') throw badRequest(`tool_choice.function.name must be a string, got ${describeValue(name)}`, 'tool_choice');
    if (!tools.some((t) => t.name === name)) {
      const known = tools.length > 0 ? `the tools are ${tools.map((t) => t.name).join(', ')}` : 'the request has no tools';
      throw badRequest(`tool_choice.function.name ${describeValue(name)} names no tool; ${known}`, 'tool_choice');
    }
    choice = { mode: 'named', name };
  }
  if (choice.mode === 'required' && tools.length === 0) throw badRequest('tool_choice "required" needs tools, and the request has none', 'tool_choice');
  return choice;
}

export function readToolRequest(body: Record<string, unknown>): ToolRequest {
  const raw = body.tools ?? [];
  if (!Array.isArray(raw)) throw badRequest(`tools must be an array of function tools, got ${describeValue(raw)}`, 'tools');
  const tools = raw.map(readTool);
  tools.forEach((t, i) => {
    const first = tools.findIndex((u) => u.name === t.name);
    if (first < i) throw badRequest(`tools[${i}].function.name ${describeValue(t.name)} repeats tools[${first}]'s; names must be unique`, 'tools');
  });
  const parallel = body.parallel_tool_calls ?? true;
  if (typeof parallel !== 'boolean') throw badRequest(`parallel_tool_calls must be a boolean, got ${describeValue(parallel)}`, 'parallel_tool_calls');
  return { tools, choice: readChoice(body.tool_choice, tools), parallel };
}

/** The tools as Hugging Face's apply_chat_template passes them to a template: [{type: "function", function}]. A tool
 * without parameters is shown with an empty parameters object, which means the same, since templates read
 * `tool.parameters.properties` without checking (Hermes', Qwen's) and would fail on an absent one. */
export function templateTools(tools: readonly FunctionTool[]): unknown[] {
  return tools.map((t) => ({ type: 'function', function: { ...t, parameters: t.parameters ?? { type: 'object', properties: {} } } }));
}
