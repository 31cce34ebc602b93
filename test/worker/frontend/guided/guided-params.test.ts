// Every way of asking for constrained output, mapped to the executor's guidedDecoding: OpenAI's response_format,
// vLLM's guided_* fields (one constraint per request), the TensorRT-LLM backend's KServe inputs, the client's flags;
// and the engine's guide rejections reworded to name the field the client used. Pure.
import t, { type Test } from 'tap';

import { clientGuide } from '../../../../launcher/client/client-guide.js';
import type { ClientOptions } from '../../../../launcher/client/client-options.js';
import { generateBody, inferBody } from '../../../../launcher/client/client-request.js';
import { TrtllmError } from '../../../../worker/common/errors.js';
import { choiceGrammar, gbnfLiteral } from '../../../../worker/frontend/guided/choice-grammar.js';
import { guideError } from '../../../../worker/frontend/guided/guide-errors.js';
import { KSERVE_GUIDE_SOURCE, readKserveGuide } from '../../../../worker/frontend/guided/kserve-guide.js';
import { readOpenAiGuide } from '../../../../worker/frontend/guided/openai-guide.js';
import { readResponseFormat } from '../../../../worker/frontend/guided/response-format.js';
import { HttpError } from '../../../../worker/frontend/http-errors.js';
import { fromJsonField, type NamedValues } from '../../../../worker/frontend/named-values.js';
import { readTextParams, textNativeRequest } from '../../../../worker/frontend/text-params.js';

const schema = { type: 'object', properties: { answer: { type: 'integer' } }, required: ['answer'] };

function bad(t: Test, fn: () => unknown, param: string | undefined, pattern: RegExp): void {
  try {
    fn();
    t.fail(`expected a 400 matching ${pattern}`);
  } catch (error) {
    const ok = error instanceof HttpError && error.status === 400 && error.param === param && pattern.test(error.message);
    t.ok(ok, `${pattern} (${(error as Error).message}, param ${(error as HttpError).param})`);
  }
}

t.test('response_format: text, json_object, json_schema; shapes checked with the field named', async (t) => {
  t.equal(readResponseFormat(undefined), undefined);
  t.equal(readResponseFormat(null), undefined);
  t.equal(readResponseFormat({ type: 'text' }), undefined, 'text: no constraint');
  t.same(readResponseFormat({ type: 'json_object' }), { guideType: 'json_schema', guide: '{"type":"object"}' }, 'json_object: any object');
  t.same(readResponseFormat({ type: 'json_schema', json_schema: { name: 'answer', schema, strict: true, description: 'd' } }), { guideType: 'json_schema', guide: JSON.stringify(schema) });
  t.same(readResponseFormat({ type: 'json_schema', json_schema: { name: 'a-b_1', schema, strict: false } }), { guideType: 'json_schema', guide: JSON.stringify(schema) }, 'strict: false is enforced all the same');
  const rf = (v: unknown, pattern: RegExp) => bad(t, () => readResponseFormat(v), 'response_format', pattern);
  rf('json', /response_format must be an object such as \{"type": "json_object"\}, got "json" \(string\)/);
  rf({ type: 'xml' }, /response_format\.type must be one of "text", "json_object", "json_schema", got "xml" \(string\)/);
  rf({}, /response_format\.type must be one of .*got undefined/);
  rf({ type: 'json_schema' }, /response_format\.json_schema must be an object \{"name": \.\.\., "schema": \{\.\.\.\}\}, got undefined/);
  rf({ type: 'json_schema', json_schema: { name: 'x', schema: 1 } }, /response_format\.json_schema\.schema must be an object \(a JSON Schema\), got 1 \(number\)/);
  rf({ type: 'json_schema', json_schema: { name: 'x', schema: [] } }, /schema must be an object .*got an array of length 0/);
  rf({ type: 'json_schema', json_schema: { name: 'x' } }, /response_format\.json_schema\.schema must be an object .*got undefined/);
  rf({ type: 'json_schema', json_schema: { schema } }, /response_format\.json_schema\.name must be 1 to 64 letters, digits, underscores or dashes, got undefined/);
  rf({ type: 'json_schema', json_schema: { name: 'has space', schema } }, /json_schema\.name must be .*got "has space"/);
  rf({ type: 'json_schema', json_schema: { name: 'x', schema, strict: 'yes' } }, /response_format\.json_schema\.strict must be a boolean, got "yes"/);
  rf({ type: 'json_schema', json_schema: { name: 'x', schema, schemaa: {} } }, /unknown field 'response_format\.json_schema\.schemaa'; response_format\.json_schema takes name, schema, strict, description/);
  rf({ type: 'json_object', schema }, /unknown field 'response_format\.schema'/);
});

t.test("vLLM's guided_* fields, and one constraint per request", async (t) => {
  t.same(readOpenAiGuide({}), undefined);
  t.same(readOpenAiGuide({ guided_json: schema }), { guided: { guideType: 'json_schema', guide: JSON.stringify(schema) }, field: 'guided_json' });
  t.same(readOpenAiGuide({ guided_json: JSON.stringify(schema) })?.guided, { guideType: 'json_schema', guide: JSON.stringify(schema) }, 'a schema as text');
  t.same(readOpenAiGuide({ guided_regex: '\\d{3}-\\d{4}' }), { guided: { guideType: 'regex', guide: '\\d{3}-\\d{4}' }, field: 'guided_regex' });
  t.same(readOpenAiGuide({ guided_grammar: 'root ::= "yes" | "no"' }), { guided: { guideType: 'ebnf_grammar', guide: 'root ::= "yes" | "no"' }, field: 'guided_grammar' });
  t.same(readOpenAiGuide({ guided_choice: ['yes', 'no'] }), { guided: { guideType: 'ebnf_grammar', guide: 'root ::= "yes" | "no"\n' }, field: 'guided_choice' });
  t.same(readOpenAiGuide({ response_format: { type: 'json_object' }, guided_json: null }), { guided: { guideType: 'json_schema', guide: '{"type":"object"}' }, field: 'response_format' }, 'null fields are absent');
  t.same(readOpenAiGuide({ response_format: { type: 'text' }, guided_regex: 'a+' })?.field, 'guided_regex', 'text is no constraint');
  const forced = { guided: { guideType: 'json_schema' as const, guide: '{}' }, field: 'tool_choice' };
  t.same(readOpenAiGuide({}, forced), forced, 'a forced tool call counts as the constraint');
  const g = (body: Record<string, unknown>, param: string, pattern: RegExp, extra?: typeof forced) => bad(t, () => readOpenAiGuide(body, extra), param, pattern);
  g({ response_format: { type: 'json_object' }, guided_regex: 'a' }, 'guided_regex', /response_format and guided_regex both constrain the output; send only one of them/);
  g({ guided_json: schema, guided_choice: ['a'] }, 'guided_choice', /guided_json and guided_choice both constrain the output/);
  g({ response_format: { type: 'json_object' } }, 'tool_choice', /response_format and tool_choice both constrain the output/, forced);
  g({ guided_json: 'not json' }, 'guided_json', /guided_json is a string that is not JSON \(.*\); send a JSON Schema object or its text/);
  g({ guided_json: [1] }, 'guided_json', /guided_json must be a JSON Schema object \(or its text\), got an array of length 1/);
  g({ guided_json: '5' }, 'guided_json', /guided_json must be a JSON Schema object.*got "5"/);
  g({ guided_regex: '' }, 'guided_regex', /guided_regex must be a non-empty string \(a regular expression the whole output matches\), got "" \(string\)/);
  g({ guided_grammar: 5 }, 'guided_grammar', /guided_grammar must be a non-empty string \(a GBNF grammar with a `root` rule\), got 5 \(number\)/);
  g({ guided_choice: [] }, 'guided_choice', /guided_choice must be a non-empty array of strings, got an array of length 0/);
  g({ guided_choice: 'yes' }, 'guided_choice', /guided_choice must be a non-empty array of strings, got "yes"/);
  g({ guided_choice: ['a', 1] }, 'guided_choice', /guided_choice\[1\] must be a non-empty string, got 1 \(number\)/);
  g({ guided_choice: ['a', ''] }, 'guided_choice', /guided_choice\[1\] must be a non-empty string, got ""/);
});

t.test('guided_choice: a GBNF alternation of exact literals', async (t) => {
  t.equal(gbnfLiteral('plain text'), '"plain text"');
  t.equal(gbnfLiteral('say "hi" \\ bye'), '"say \\"hi\\" \\\\ bye"', 'quotes and backslashes');
  t.equal(gbnfLiteral('a\nb\tc\rd'), '"a\\nb\\tc\\rd"');
  t.equal(gbnfLiteral('\u0001\u007f'), '"\\x01\\x7f"', 'other control characters as \\xHH');
  t.equal(gbnfLiteral('café 猫 🐈 [x] | (y) .*'), '"café 猫 🐈 [x] | (y) .*"', 'UTF-8 and regex/grammar metacharacters as they are');
  t.same(choiceGrammar(['Paris', 'New "York"']), { guideType: 'ebnf_grammar', guide: 'root ::= "Paris" | "New \\"York\\""\n' });
});

t.test('KServe: guided_decoding_guide_type and guided_decoding_guide, per batch element', async (t) => {
  const get = (values: Record<string, unknown>) => (name: string) => values[name];
  t.equal(readKserveGuide(get({})), undefined);
  t.same(readKserveGuide(get({ guided_decoding_guide_type: 'json' })), { guideType: 'json' });
  t.same(readKserveGuide(get({ guided_decoding_guide_type: 'json', guided_decoding_guide: 'ignored' })), { guideType: 'json' }, 'json takes no guide (TensorRT-LLM ignores it)');
  for (const type of ['json_schema', 'regex', 'ebnf_grammar']) {
    t.same(readKserveGuide(get({ guided_decoding_guide_type: type, guided_decoding_guide: 'G' })), { guideType: type, guide: 'G' }, type);
  }
  const k = (values: Record<string, unknown>, param: string, pattern: RegExp) => bad(t, () => readKserveGuide(get(values)), param, pattern);
  k({ guided_decoding_guide_type: 'xml' }, 'guided_decoding_guide_type', /guided_decoding_guide_type must be one of json, json_schema, regex, ebnf_grammar, got "xml" \(string\)/);
  k({ guided_decoding_guide_type: 'JSON' }, 'guided_decoding_guide_type', /got "JSON"/);
  k({ guided_decoding_guide_type: 3 }, 'guided_decoding_guide_type', /got 3 \(number\)/);
  k({ guided_decoding_guide_type: 'regex' }, 'guided_decoding_guide', /guided_decoding_guide is required with guided_decoding_guide_type "regex" \(the regular expression\), got none/);
  k({ guided_decoding_guide_type: 'json_schema', guided_decoding_guide: '' }, 'guided_decoding_guide', /required with guided_decoding_guide_type "json_schema" \(the JSON Schema text\), got "" \(string\)/);
  k({ guided_decoding_guide: 'a+' }, 'guided_decoding_guide_type', /guided_decoding_guide needs guided_decoding_guide_type/);
  const values: NamedValues = new Map([
    ['text_input', fromJsonField('text_input', ['a', 'b'])],
    ['max_tokens', fromJsonField('max_tokens', 4)],
    ['guided_decoding_guide_type', fromJsonField('guided_decoding_guide_type', ['regex', 'json'])],
    ['guided_decoding_guide', fromJsonField('guided_decoding_guide', '[ab]+')],
  ]);
  const params = readTextParams(values, 8);
  t.same(params.map((p) => p.guidedDecoding), [{ guideType: 'regex', guide: '[ab]+' }, { guideType: 'json' }], 'one type per element, one guide for all');
  const request = textNativeRequest(params[0]!, [1, 2], new Map(), { endId: 0, padId: 0 }, false);
  t.same(request.guidedDecoding, { guideType: 'regex', guide: '[ab]+' }, 'onto the NativeRequest');
  const none = textNativeRequest(readTextParams(new Map([['text_input', fromJsonField('text_input', 'a')], ['max_tokens', fromJsonField('max_tokens', 1)]]), 8)[0]!, [1], new Map(), { endId: 0, padId: 0 }, false);
  t.notOk('guidedDecoding' in none, 'no inputs: no guidedDecoding at all');
});

t.test("the engine's guide rejections name the client's field", async (t) => {
  const compile = new TrtllmError('json_schema: unsupported keyword "patternProperties" at /properties/x', 'invalid_argument');
  const openai = guideError(compile, { field: 'response_format', param: 'response_format' }) as HttpError;
  t.ok(openai instanceof HttpError && openai.status === 400);
  t.equal(openai.message, 'response_format: json_schema: unsupported keyword "patternProperties" at /properties/x');
  t.equal(openai.param, 'response_format');
  const kserve = guideError(new TrtllmError('guidedDecoding.guide is empty; guideType regex needs one', 'invalid_argument'), KSERVE_GUIDE_SOURCE) as HttpError;
  t.equal(kserve.message, 'guided_decoding_guide is empty; guided_decoding_guide_type regex needs one');
  const missing = guideError(new TrtllmError("unknown parameter 'guidedDecoding'; known: inputTokenIds", 'invalid_argument'), { field: 'guided_regex' }) as HttpError;
  t.match(missing.message, /^guided_regex: guided decoding is not supported by this server's engine/);
  const noVocab = guideError(new TrtllmError("guidedDecoding needs the executor's guided-decoding vocabulary (the tokenizer's token bytes), which this executor was started without", 'invalid_argument'), { field: 'response_format' }) as HttpError;
  t.match(noVocab.message, /^response_format: guided decoding is not supported by this server's engine/);
  const other = new TrtllmError('maxTokens must be an integer', 'invalid_argument');
  t.equal(guideError(other, { field: 'response_format' }), other, 'other errors pass through');
  t.equal(guideError(compile, undefined), compile, 'no guide: untouched');
  const full = new TrtllmError('queue is full', 'queue_full');
  t.equal(guideError(full, { field: 'x' }), full);
});

t.test('client: --json / --json-schema / --regex / --grammar as the KServe inputs', async (t) => {
  const files: Record<string, string> = { 's.json': JSON.stringify(schema), 'g.gbnf': 'root ::= "a"', 'bad.json': '{', 'arr.json': '[1]', 'empty': ' ' };
  const read = (p: string) => {
    if (!(p in files)) throw Object.assign(new Error('no such file'), { code: 'ENOENT' });
    return files[p]!;
  };
  t.equal(clientGuide({}, read), undefined);
  t.same(clientGuide({ json: true }, read), { type: 'json' });
  t.same(clientGuide({ jsonSchema: 's.json' }, read), { type: 'json_schema', guide: JSON.stringify(schema) });
  t.same(clientGuide({ regex: '[0-9]+' }, read), { type: 'regex', guide: '[0-9]+' });
  t.same(clientGuide({ grammar: 'g.gbnf' }, read), { type: 'ebnf_grammar', guide: 'root ::= "a"' });
  t.throws(() => clientGuide({ jsonSchema: 's.json', regex: 'a' }, read), /--json-schema and --regex both constrain the output; give only one/);
  t.throws(() => clientGuide({ jsonSchema: 'nope.json' }, read), /--json-schema nope\.json: cannot read it \(ENOENT\)/);
  t.throws(() => clientGuide({ jsonSchema: 'bad.json' }, read), /--json-schema bad\.json: not JSON/);
  t.throws(() => clientGuide({ jsonSchema: 'arr.json' }, read), /--json-schema arr\.json: a JSON Schema must be an object, the file holds an array/);
  t.throws(() => clientGuide({ grammar: 'empty' }, read), /--grammar empty: the file is empty/);
  t.throws(() => clientGuide({ regex: '' }, read), /--regex needs a pattern/);
  const o: ClientOptions = {
    protocol: 'http', modelName: 'ensemble', text: 'a', requestOutputLen: 5, streaming: false, returnLogProbs: false,
    returnContextLogits: false, returnGenerationLogits: false, excludeInputInOutput: false, guide: { type: 'regex', guide: '[0-9]+' },
  };
  t.match(generateBody(o, 'text', { prompts: ['p'] }, true, undefined), { guided_decoding_guide_type: 'regex', guided_decoding_guide: '[0-9]+' });
  const infer = inferBody({ ...o, guide: { type: 'json' } }, 'text', { prompts: ['p', 'q'] }, undefined) as { inputs: { name: string }[] };
  t.same(infer.inputs.filter((i) => i.name.startsWith('guided')), [{ name: 'guided_decoding_guide_type', datatype: 'BYTES', shape: [2, 1], data: ['json', 'json'] }], '"json": the type alone, one per row');
});
