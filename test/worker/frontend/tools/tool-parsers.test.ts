// The tool-call parsers of each chat-template family (worker/frontend/tools/): calls and content out of a whole
// output, the same result when the output streams in pieces, and malformed calls coming back as plain content.
import t, { type Test } from 'tap';

import { HERMES_SYNTAX, parseHermes } from '../../../../worker/frontend/tools/hermes-parser.js';
import { LLAMA3_JSON_SYNTAX, parseLlama3Json } from '../../../../worker/frontend/tools/llama3-json-parser.js';
import { MISTRAL_SYNTAX, parseMistral } from '../../../../worker/frontend/tools/mistral-parser.js';
import { callFromJson, jsonSequence, jsonValueEnd } from '../../../../worker/frontend/tools/tool-call.js';
import { gatherPieces, parseWhole, ToolCallStream, type ToolSyntax } from '../../../../worker/frontend/tools/tool-call-stream.js';

const weather = { name: 'get_weather', arguments: '{"city":"Paris","unit":"c"}' };

/** The output pushed in pieces of `size` characters: must equal the whole parse. */
function streamed(syntax: ToolSyntax, text: string, size: number, inCall = false) {
  const stream = new ToolCallStream(syntax, { inCall });
  const pieces = [];
  for (let i = 0; i < text.length; i += size) pieces.push(...stream.push(text.slice(i, i + size)));
  pieces.push(...stream.finish());
  return gatherPieces(pieces);
}

function sameStreamed(t: Test, syntax: ToolSyntax, text: string, inCall = false): void {
  const whole = parseWhole(syntax, text, { inCall });
  for (const size of [1, 2, 3, 7]) t.same(streamed(syntax, text, size, inCall), whole, `streamed ${size} at a time = whole: ${JSON.stringify(text).slice(0, 60)}`);
}

t.test('JSON helpers: value ends, sequences, call objects', async (t) => {
  t.equal(jsonValueEnd('{"a": "}"} tail', 0), 10, 'a brace inside a string does not close');
  t.equal(jsonValueEnd('{"a": "\\"}"}', 0), 12, 'an escaped quote stays inside the string');
  t.equal(jsonValueEnd('{"a": [1, 2]', 0), -1, 'unclosed');
  t.equal(jsonValueEnd('x', 0), -1);
  t.same(jsonSequence(' {"a":1} ; [2] ', true), [{ a: 1 }, [2]]);
  t.equal(jsonSequence('{"a":1} ; [2]'), undefined, '; only where allowed');
  t.equal(jsonSequence('{"a":1} x'), undefined);
  t.equal(jsonSequence('{"a":01}'), undefined, 'a value that does not parse');
  t.equal(jsonSequence('   '), undefined);
  t.same(callFromJson({ name: 'f', arguments: { x: 1 } }), { name: 'f', arguments: '{"x":1}' });
  t.same(callFromJson({ name: 'f', parameters: { x: 1 } }), { name: 'f', arguments: '{"x":1}' }, "Llama's key");
  t.same(callFromJson({ name: 'f', arguments: '{"x": 1}' }), { name: 'f', arguments: '{"x":1}' }, 'arguments as JSON text');
  t.same(callFromJson({ name: 'f' }), { name: 'f', arguments: '{}' }, 'no arguments: an empty object');
  t.equal(callFromJson({ name: 'f', arguments: [1] }), undefined, 'arguments must be an object');
  t.equal(callFromJson({ name: 'f', arguments: 'nope' }), undefined);
  t.equal(callFromJson({ name: '', arguments: {} }), undefined);
  t.equal(callFromJson({ arguments: {} }), undefined);
  t.equal(callFromJson([1]), undefined);
});

t.test('hermes: <tool_call> blocks, several, after text; malformed ones are content', async (t) => {
  const one = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n</tool_call>';
  t.same(parseHermes(one), { content: null, calls: [weather] });
  const two = `${one}\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>`;
  t.same(parseHermes(two), { content: null, calls: [weather, { name: 'get_time', arguments: '{}' }] });
  t.same(parseHermes(`Let me check.\n\n${one}`), { content: 'Let me check.', calls: [weather] }, 'text before the call is content');
  t.same(parseHermes('Just words, no call.\n'), { content: 'Just words, no call.\n', calls: [] }, 'plain text stays exactly as written');
  t.same(parseHermes(''), { content: '', calls: [] });
  t.same(parseHermes(one.replace('</tool_call>', '')), { content: null, calls: [weather] }, 'a call that ended without its closing tag');
  const broken = '<tool_call>\n{"name": "get_weather", "arguments": {"city": \n</tool_call>';
  t.same(parseHermes(broken), { content: broken, calls: [] }, 'unparseable JSON: the text itself');
  const noName = '<tool_call>{"arguments": {}}</tool_call>';
  t.same(parseHermes(noName), { content: noName, calls: [] }, 'no name: content');
  t.same(parseHermes(`${broken}${one}`), { content: broken, calls: [weather] }, 'a bad block does not spoil the next');
  t.same(parseHermes('a <tool_ca'), { content: 'a <tool_ca', calls: [] }, 'a partial marker at the end is content');
  t.same(parseHermes('<tool_call>'), { content: '<tool_call>', calls: [] });
  for (const text of [one, two, `Let me check.\n\n${one}`, 'Just words, no call.\n', broken, `${broken}${one}`, 'a <tool_ca', 'x < y <tool']) {
    sameStreamed(t, HERMES_SYNTAX, text);
  }
});

t.test('hermes streaming: content flows at once except a possible marker; calls go out when their block closes', async (t) => {
  const s = new ToolCallStream(HERMES_SYNTAX);
  t.same(s.push('Sure'), [{ content: 'Sure' }]);
  t.same(s.push('. <tool'), [{ content: '.' }], 'the space and the partial marker are held');
  t.same(s.push('_call>{"name": "f", '), [], 'inside a block: held');
  t.same(s.push('"arguments": {"a": 1}}</tool_call>'), [{ call: { name: 'f', arguments: '{"a":1}' } }]);
  t.same(s.push('\n'), []);
  t.same(s.finish(), [], 'whitespace after a call is dropped');
  t.equal(s.callCount, 1);
  const plain = new ToolCallStream(HERMES_SYNTAX);
  t.same(plain.push('a < b'), [{ content: 'a < b' }], '"<" followed by something else is not held');
  t.same(plain.push(' '), []);
  t.same(plain.finish(), [{ content: ' ' }], 'trailing whitespace is content when no call was made');
});

t.test('llama 3 JSON: the whole answer is the call (after <|python_tag|> or not); other answers are content', async (t) => {
  const call = '{"name": "get_weather", "parameters": {"city": "Paris", "unit": "c"}}';
  t.same(parseLlama3Json(call), { content: null, calls: [weather] });
  t.same(parseLlama3Json(`  ${call}`), { content: null, calls: [weather] }, 'leading whitespace');
  t.same(parseLlama3Json(`<|python_tag|>${call}`), { content: null, calls: [weather] }, 'the python tag, when kept');
  t.same(parseLlama3Json(`${call}; {"name": "get_time", "parameters": {}}`), { content: null, calls: [weather, { name: 'get_time', arguments: '{}' }] }, "3.2's ;-separated calls");
  t.same(parseLlama3Json('The weather is nice {"a": 1}'), { content: 'The weather is nice {"a": 1}', calls: [] }, 'JSON later in the text is not a call');
  t.same(parseLlama3Json('{"answer": 42}'), { content: '{"answer": 42}', calls: [] }, 'a JSON answer that is not a call is content');
  t.same(parseLlama3Json('{"name": "get_weather", "parameters": {"city": "Par'), { content: '{"name": "get_weather", "parameters": {"city": "Par', calls: [] }, 'cut short');
  t.same(parseLlama3Json(`${call} and then some`), { content: `${call} and then some`, calls: [] }, 'trailing text: not a call');
  t.same(parseLlama3Json('<|python_tag|>brave_search.call(query="x")'), { content: '<|python_tag|>brave_search.call(query="x")', calls: [] }, 'built-in tool syntax is content');
  for (const text of [call, `  ${call}`, `<|python_tag|>${call}`, 'The weather is nice {"a": 1}', '{"answer": 42}', `${call} and then some`, '\n\nHello']) {
    sameStreamed(t, LLAMA3_JSON_SYNTAX, text);
  }
});

t.test('mistral: [TOOL_CALLS] and a JSON list (or a bare list, the marker being a dropped special token)', async (t) => {
  const list = '[{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}, {"name": "get_time", "arguments": {}}]';
  const calls = [weather, { name: 'get_time', arguments: '{}' }];
  t.same(parseMistral(`[TOOL_CALLS]${list}`), { content: null, calls });
  t.same(parseMistral(` ${list}`), { content: null, calls }, 'bare list');
  t.same(parseMistral(`[TOOL_CALLS] {"name": "get_time", "arguments": {}}`), { content: null, calls: [calls[1]!] }, 'a single object');
  t.same(parseMistral(`Checking. [TOOL_CALLS]${list}`), { content: 'Checking.', calls }, 'text before');
  t.same(parseMistral('[1, 2, 3]'), { content: '[1, 2, 3]', calls: [] }, 'a list of something else is content');
  t.same(parseMistral('[TOOL_CALLS][{"name": "f", "arguments": {'), { content: '[TOOL_CALLS][{"name": "f", "arguments": {', calls: [] }, 'cut short: content');
  t.same(parseMistral('see [1]'), { content: 'see [1]', calls: [] });
  for (const text of [`[TOOL_CALLS]${list}`, ` ${list}`, `Checking. [TOOL_CALLS]${list}`, '[1, 2, 3]', 'see [1]', '[TOOL_CALLS']) {
    sameStreamed(t, MISTRAL_SYNTAX, text);
  }
});

t.test('a forced call: the output starts inside the block (its opener was in the prompt)', async (t) => {
  const payload = '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}';
  t.same(parseWhole(HERMES_SYNTAX, payload, { inCall: true }), { content: null, calls: [weather] });
  t.same(parseWhole(MISTRAL_SYNTAX, `[${payload}]`, { inCall: true }), { content: null, calls: [weather] });
  t.same(parseWhole(LLAMA3_JSON_SYNTAX, payload.replace('arguments', 'parameters'), { inCall: true }), { content: null, calls: [weather] });
  t.same(parseWhole(HERMES_SYNTAX, '{"name": "get_weather", "argu', { inCall: true }), { content: '{"name": "get_weather", "argu', calls: [] }, 'cut short by max_tokens: the text, without the prompt\'s marker');
  sameStreamed(t, HERMES_SYNTAX, payload, true);
  sameStreamed(t, MISTRAL_SYNTAX, `[${payload}]`, true);
});

t.test('no input crashes a parser', async (t) => {
  const samples = ['<tool_call>', '</tool_call>', '[TOOL_CALLS]', '<|python_tag|>', '{', '[', '"', '\\', '}', ']', '{"name"', '\u0000', 'é', '{"name": "f", "arguments": "{\\"a\\": 1}"}'];
  let seed = 7;
  const rand = () => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return seed / 2 ** 31; };
  for (let i = 0; i < 500; i += 1) {
    const text = Array.from({ length: 1 + Math.floor(rand() * 8) }, () => samples[Math.floor(rand() * samples.length)]).join(rand() < 0.5 ? '' : ' ');
    for (const syntax of [HERMES_SYNTAX, LLAMA3_JSON_SYNTAX, MISTRAL_SYNTAX]) {
      const whole = parseWhole(syntax, text);
      if (whole.calls.length === 0 && whole.content !== text) t.fail(`without calls the content is the text: ${JSON.stringify(text)} → ${JSON.stringify(whole)}`);
      const piecewise = streamed(syntax, text, 1 + (i % 4));
      if (JSON.stringify(piecewise) !== JSON.stringify(whole)) t.fail(`streamed ≠ whole for ${JSON.stringify(text)}`);
    }
  }
  t.pass('500 random outputs × 3 families');
});
