// Protocol-buffer text format, as Triton's config.pbtxt files are written, read into plain values (pure): a
// message is a map from field name to every value the field was given (fields repeat: Triton's `parameters`), a
// value a string, a number, an identifier (true, TYPE_INT32, ...) or a message; `[a, b]` lists add each element.
// Only what the format needs for reading configs: no schema, no type checks (the caller knows what it wants).
import { InvalidArgumentError } from 'commander';

export type PbValue = string | number | boolean | { ident: string } | PbMessage;
export type PbMessage = Map<string, PbValue[]>;

interface Token { kind: 'ident' | 'string' | 'number' | 'punct'; text: string; line: number }

function lex(text: string, path: string): Token[] {
  const tokens: Token[] = [];
  let line = 1;
  for (let i = 0; i < text.length;) {
    const c = text[i]!;
    if (c === '\n') { line += 1; i += 1; continue; }
    if (/\s/.test(c)) { i += 1; continue; }
    if (c === '#') { while (i < text.length && text[i] !== '\n') i += 1; continue; }
    if ('{}[]<>:,;'.includes(c)) { tokens.push({ kind: 'punct', text: c, line }); i += 1; continue; }
    // fill_template.py's placeholders, where a file still has them: read as identifiers ("${triton_max_batch_size}").
    const placeholder = /^\$\{[^}\n]*\}/.exec(text.slice(i, i + 256));
    if (placeholder) { tokens.push({ kind: 'ident', text: placeholder[0], line }); i += placeholder[0].length; continue; }
    if (c === '"' || c === "'") {
      let s = '';
      let j = i + 1;
      for (; j < text.length && text[j] !== c; j += 1) {
        if (text[j] === '\n') break;
        if (text[j] === '\\' && j + 1 < text.length) {
          const e = text[++j]!;
          s += e === 'n' ? '\n' : e === 't' ? '\t' : e === 'r' ? '\r' : e;
        } else {
          s += text[j];
        }
      }
      if (text[j] !== c) throw new InvalidArgumentError(`${path}:${line}: a string is not closed`);
      // Adjacent strings join, as in protobuf ("a" "b" is "ab").
      const last = tokens[tokens.length - 1];
      if (last?.kind === 'string' && last.line === line) last.text += s;
      else tokens.push({ kind: 'string', text: s, line });
      i = j + 1;
      continue;
    }
    const m = /^[-+]?(?:\d[\w.+-]*|\.\d[\w.+-]*|[A-Za-z_][\w.]*)/.exec(text.slice(i, i + 256));
    if (!m) throw new InvalidArgumentError(`${path}:${line}: unexpected ${JSON.stringify(c)}`);
    tokens.push({ kind: /^[-+]?[\d.]/.test(m[0]) ? 'number' : 'ident', text: m[0], line });
    i += m[0].length;
  }
  return tokens;
}

/** Parses a whole file's text; errors name the file and line. */
export function parsePbtxt(text: string, path: string): PbMessage {
  const tokens = lex(text, path);
  let at = 0;
  const peek = () => tokens[at];
  const fail = (what: string): never => {
    const t = peek();
    throw new InvalidArgumentError(`${path}:${t ? t.line : 'end'}: ${what}${t ? `, got ${JSON.stringify(t.text)}` : ', got the end of the file'}`);
  };
  const isPunct = (p: string) => peek()?.kind === 'punct' && peek()!.text === p;

  const scalar = (): PbValue => {
    const t = peek() ?? fail('expected a value');
    at += 1;
    if (t.kind === 'string') return t.text;
    if (t.kind === 'number') {
      const n = Number(t.text.replace(/[fF]$/, ''));
      if (!Number.isFinite(n)) { at -= 1; fail('expected a number'); }
      return n;
    }
    if (t.kind === 'ident') {
      if (/^(true|True|t)$/.test(t.text)) return true;
      if (/^(false|False|f)$/.test(t.text)) return false;
      return { ident: t.text };
    }
    at -= 1;
    return fail('expected a value');
  };
  const message = (close: string): PbMessage => {
    const out: PbMessage = new Map();
    while (!(close === '' ? peek() === undefined : isPunct(close))) {
      const name = peek();
      if (name?.kind !== 'ident') fail('expected a field name');
      at += 1;
      const values = out.get(name!.text) ?? [];
      out.set(name!.text, values);
      const colon = isPunct(':');
      if (colon) at += 1;
      if (isPunct('[')) {
        at += 1;
        while (!isPunct(']')) {
          values.push(isPunct('{') || isPunct('<') ? nested() : scalar());
          if (isPunct(',')) at += 1;
          else if (!isPunct(']')) fail('expected "," or "]" in a list');
        }
        at += 1;
      } else if (isPunct('{') || isPunct('<')) {
        values.push(nested());
      } else {
        if (!colon) fail(`expected ":" after ${name!.text}`);
        values.push(scalar());
      }
      if (isPunct(',') || isPunct(';')) at += 1;
    }
    return out;
  };
  const nested = (): PbMessage => {
    const open = peek()!.text;
    at += 1;
    const m = message(open === '{' ? '}' : '>');
    at += 1;
    return m;
  };
  return message('');
}

/** The field's values that are messages. */
export function messages(m: PbMessage, field: string): PbMessage[] {
  return (m.get(field) ?? []).filter((v): v is PbMessage => v instanceof Map);
}

/** The field's first value when it is a scalar (string, number, boolean or identifier's name). */
export function scalarOf(m: PbMessage, field: string): string | number | boolean | undefined {
  const v = m.get(field)?.[0];
  if (v === undefined || v instanceof Map) return undefined;
  return typeof v === 'object' ? v.ident : v;
}
