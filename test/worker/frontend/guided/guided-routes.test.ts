// Through a real server: what each route hands the executor for every way of asking for constrained output
// (response_format, guided_*, tools required / named on chat and completions; the KServe inputs on ensemble,
// tensorrt_llm_bls and tensorrt_llm, by generate, generate_stream and infer), and how the engine's rejection of a
// bad guide reaches the client: a 400 naming the field. The executor's enqueue is wrapped to record each request
// and answer as a grammar compiler would for a bad guide, so nothing here depends on the engine's grammar support.
import t from 'tap';

import { TrtllmError } from '../../../../worker/common/errors.js';
import type { NativeRequest } from '../../../../worker/binding/addon-types.js';
import { postJson, startTestServer } from '../../../helpers/serving.js';

const COMPILE_ERROR = 'json_schema: unsupported keyword "patternProperties" at /properties/x';
const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };

t.test('every way of asking reaches the executor as guidedDecoding; its rejection is a 400 naming the field', async (t) => {
  const { base, server } = await startTestServer(t);
  const executor = server.context.executor;
  const tokenizer = server.context.tokenizer;
  const seen: NativeRequest[] = [];
  const original = executor.enqueue.bind(executor);
  executor.enqueue = (request: NativeRequest) => {
    seen.push(request);
    if (request.guidedDecoding) throw new TrtllmError(COMPILE_ERROR, 'invalid_argument');
    return original(request);
  };
  t.teardown(() => { executor.enqueue = original; });
  const model = 'tiny-gpt2';
  const chat = { model, messages: [{ role: 'user', content: 'Weather?' }], max_tokens: 4 };
  const ask = async (path: string, body: Record<string, unknown>) => {
    seen.length = 0;
    const r = await postJson(`${base}${path}`, body);
    return { ...r, request: seen[0] };
  };

  const openAiCases: [string, Record<string, unknown>, unknown, string][] = [
    ['/v1/chat/completions', { ...chat, response_format: { type: 'json_object' } }, { guideType: 'json_schema', guide: '{"type":"object"}' }, 'response_format'],
    ['/v1/chat/completions', { ...chat, response_format: { type: 'json_schema', json_schema: { name: 'w', schema, strict: true } } }, { guideType: 'json_schema', guide: JSON.stringify(schema) }, 'response_format'],
    ['/v1/completions', { model, prompt: 'x', max_tokens: 4, response_format: { type: 'json_object' } }, { guideType: 'json_schema', guide: '{"type":"object"}' }, 'response_format'],
    ['/v1/completions', { model, prompt: 'x', max_tokens: 4, guided_json: schema }, { guideType: 'json_schema', guide: JSON.stringify(schema) }, 'guided_json'],
    ['/v1/chat/completions', { ...chat, guided_regex: '[0-9]{3}' }, { guideType: 'regex', guide: '[0-9]{3}' }, 'guided_regex'],
    ['/v1/completions', { model, prompt: 'x', max_tokens: 4, guided_grammar: 'root ::= "a"' }, { guideType: 'ebnf_grammar', guide: 'root ::= "a"' }, 'guided_grammar'],
    ['/v1/chat/completions', { ...chat, guided_choice: ['yes', 'no'] }, { guideType: 'ebnf_grammar', guide: 'root ::= "yes" | "no"\n' }, 'guided_choice'],
  ];
  for (const [path, body, guided, field] of openAiCases) {
    for (const stream of [false, true]) {
      const r = await ask(path, { ...body, stream });
      t.same(r.request?.guidedDecoding, guided, `${path} ${field}${stream ? ' (stream)' : ''}: guidedDecoding`);
      t.equal(r.status, 400, 'the rejection is a 400, before any stream starts');
      t.same(r.json.error, { message: `${field}: ${COMPILE_ERROR}`, type: 'BadRequestError', param: field, code: 400 }, 'naming the field, OpenAI-style');
    }
  }

  // Tools: "required" and a named function constrain the JSON after the family's opener (Hermes: the fixture's
  // template has no tool syntax of its own).
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: schema } }, { type: 'function', function: { name: 'now' } }];
  const required = await ask('/v1/chat/completions', { ...chat, tools, tool_choice: 'required' });
  t.equal(required.request?.guidedDecoding?.guideType, 'json_schema');
  t.same(JSON.parse(required.request!.guidedDecoding!.guide!).anyOf.map((s: { properties: { name: { const: string } } }) => s.properties.name.const), ['get_weather', 'now'], 'required: any tool');
  t.ok(tokenizer.decode(required.request!.inputTokenIds).endsWith('assistant:<tool_call>\n'), 'the opener follows the generation prompt');
  t.match(required.json.error, { message: `tool_choice: ${COMPILE_ERROR}`, param: 'tool_choice' });
  const named = await ask('/v1/chat/completions', { ...chat, tools, tool_choice: { type: 'function', function: { name: 'now' } } });
  t.same(JSON.parse(named.request!.guidedDecoding!.guide!).properties.name, { const: 'now' }, 'named: that tool only');
  const auto = await ask('/v1/chat/completions', { ...chat, tools });
  t.equal(auto.request?.guidedDecoding, undefined, 'auto: unconstrained');
  t.equal(auto.status, 200);
  t.notOk(tokenizer.decode(auto.request!.inputTokenIds).includes('<tool_call>'), 'auto: no opener in the prompt');
  const both = await ask('/v1/chat/completions', { ...chat, tools, tool_choice: 'required', response_format: { type: 'json_object' } });
  t.equal(both.status, 400);
  t.match(both.json.error, { message: /response_format and tool_choice both constrain the output/, param: 'tool_choice' });
  t.equal(both.request, undefined, 'nothing enqueued');
  const unknownTool = await ask('/v1/chat/completions', { ...chat, tools, tool_choice: { type: 'function', function: { name: 'nope' } } });
  t.match(unknownTool.json.error, { message: /tool_choice\.function\.name "nope" \(string\) names no tool; the tools are get_weather, now/, param: 'tool_choice' });

  // KServe: the TensorRT-LLM backend's inputs, on every generation model and endpoint.
  const guideInputs = { guided_decoding_guide_type: 'json_schema', guided_decoding_guide: JSON.stringify(schema) };
  const kserveCases: [string, Record<string, unknown>][] = [
    ['/v2/models/ensemble/generate', { text_input: 'x', max_tokens: 4, ...guideInputs }],
    ['/v2/models/tensorrt_llm_bls/generate_stream', { text_input: 'x', max_tokens: 4, ...guideInputs }],
    ['/v2/models/tensorrt_llm/generate', { input_ids: [1, 2, 3], request_output_len: 4, ...guideInputs }],
    ['/v2/models/ensemble/infer', { inputs: [
      { name: 'text_input', datatype: 'BYTES', shape: [1, 1], data: ['x'] }, { name: 'max_tokens', datatype: 'INT32', shape: [1, 1], data: [4] },
      { name: 'guided_decoding_guide_type', datatype: 'BYTES', shape: [1, 1], data: ['json_schema'] },
      { name: 'guided_decoding_guide', datatype: 'BYTES', shape: [1, 1], data: [JSON.stringify(schema)] },
    ] }],
    ['/v2/models/tensorrt_llm/infer', { inputs: [
      { name: 'input_ids', datatype: 'INT32', shape: [1, 3], data: [1, 2, 3] }, { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [4] },
      { name: 'guided_decoding_guide_type', datatype: 'BYTES', shape: [1, 1], data: ['json_schema'] },
      { name: 'guided_decoding_guide', datatype: 'BYTES', shape: [1, 1], data: [JSON.stringify(schema)] },
    ] }],
  ];
  for (const [path, body] of kserveCases) {
    const r = await ask(path, body);
    t.same(r.request?.guidedDecoding, { guideType: 'json_schema', guide: JSON.stringify(schema) }, `${path}: guidedDecoding`);
    t.equal(r.status, 400);
    t.same(r.json, { error: `guided_decoding_guide: ${COMPILE_ERROR}` }, 'naming the input');
  }
  const json = await ask('/v2/models/tensorrt_llm/generate', { input_ids: [1, 2, 3], request_output_len: 4, guided_decoding_guide_type: 'json' });
  t.same(json.request?.guidedDecoding, { guideType: 'json' });
  const badType = await ask('/v2/models/ensemble/generate', { text_input: 'x', max_tokens: 4, guided_decoding_guide_type: 'yaml' });
  t.same(badType.json, { error: 'guided_decoding_guide_type must be one of json, json_schema, regex, ebnf_grammar, got "yaml" (string)' });
  t.equal(badType.request, undefined);
  const noGuide = await ask('/v2/models/tensorrt_llm_bls/generate', { text_input: 'x', max_tokens: 4, guided_decoding_guide_type: 'regex' });
  t.match(noGuide.json.error, /guided_decoding_guide is required with guided_decoding_guide_type "regex"/);
  const metadata = await (await fetch(`${base}/v2/models/ensemble`)).json() as { inputs: { name: string; datatype: string }[] };
  t.same(metadata.inputs.filter((i) => i.name.startsWith('guided')), [
    { name: 'guided_decoding_guide_type', datatype: 'BYTES', shape: [1] }, { name: 'guided_decoding_guide', datatype: 'BYTES', shape: [1] },
  ], 'declared in the model metadata');
});
