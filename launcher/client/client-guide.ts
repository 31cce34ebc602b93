// The client's output constraint: --json (any JSON), --json-schema <file>, --regex <pattern> or --grammar <file>
// (GBNF), sent as the TensorRT-LLM backend's guided_decoding_guide_type / guided_decoding_guide inputs. At most one;
// a schema file must hold a JSON object, so a typo is caught here rather than as the server's 400.
import { readFileSync } from 'node:fs';

import { ToolError } from './tool-error.js';

export interface ClientGuide {
  type: 'json' | 'json_schema' | 'regex' | 'ebnf_grammar';
  guide?: string;
}

export interface GuideFlags {
  json?: boolean;
  jsonSchema?: string;   // a file
  regex?: string;
  grammar?: string;      // a file
}

function readText(path: string, flag: string, read: (path: string) => string): string {
  let text: string;
  try {
    text = read(path);
  } catch (error) {
    throw new ToolError(`${flag} ${path}: cannot read it (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  if (text.trim() === '') throw new ToolError(`${flag} ${path}: the file is empty`);
  return text;
}

/** The constraint the flags ask for; `read` reads a file (injected by tests). */
export function clientGuide(o: GuideFlags, read: (path: string) => string = (p) => readFileSync(p, 'utf8')): ClientGuide | undefined {
  const given = [
    o.json ? '--json' : undefined,
    o.jsonSchema !== undefined ? '--json-schema' : undefined,
    o.regex !== undefined ? '--regex' : undefined,
    o.grammar !== undefined ? '--grammar' : undefined,
  ].filter((f) => f !== undefined);
  if (given.length > 1) throw new ToolError(`${given[0]} and ${given[1]} both constrain the output; give only one`);
  if (o.json) return { type: 'json' };
  if (o.jsonSchema !== undefined) {
    const text = readText(o.jsonSchema, '--json-schema', read);
    let schema: unknown;
    try {
      schema = JSON.parse(text);
    } catch (error) {
      throw new ToolError(`--json-schema ${o.jsonSchema}: not JSON (${(error as Error).message})`);
    }
    if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) {
      throw new ToolError(`--json-schema ${o.jsonSchema}: a JSON Schema must be an object, the file holds ${Array.isArray(schema) ? 'an array' : JSON.stringify(schema)}`);
    }
    return { type: 'json_schema', guide: JSON.stringify(schema) };
  }
  if (o.regex !== undefined) {
    if (o.regex === '') throw new ToolError('--regex needs a pattern, got ""');
    return { type: 'regex', guide: o.regex };
  }
  if (o.grammar !== undefined) return { type: 'ebnf_grammar', guide: readText(o.grammar, '--grammar', read) };
  return undefined;
}
