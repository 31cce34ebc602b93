// vLLM's guided_choice: the output is exactly one of the given strings. Sent to the engine as a GBNF alternation of
// string literals (guideType 'ebnf_grammar'), not as a regex: a literal needs only `"`, `\` and control characters
// escaped, where a regex would need every metacharacter escaped and would depend on the regex dialect.
import type { GuidedDecodingParams } from '../../binding/addon-types.js';

/** `s` as a GBNF (llama.cpp) string literal: UTF-8 text as is, quotes and backslashes escaped, control characters
 * as \n, \r, \t or \xHH. */
export function gbnfLiteral(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

/** The grammar whose only sentences are `choices` (non-empty strings; duplicates are harmless). */
export function choiceGrammar(choices: readonly string[]): GuidedDecodingParams {
  return { guideType: 'ebnf_grammar', guide: `root ::= ${choices.map(gbnfLiteral).join(' | ')}\n` };
}
