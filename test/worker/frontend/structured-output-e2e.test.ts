// Structured output and tool calling end to end on the bundled model (examples/models/brown-llama-17m): every
// schema of test/fixtures/json-schemas/*.json asked for through the official `openai` client (response_format
// json_schema, whole and streamed) and through KServe (guided_decoding_guide_type json_schema), each answer parsed
// and checked with ajv (the fixtures' own valid / invalid examples check ajv first); every schema of invalid/ refused
// with a 400 that contains its .expect.txt; regex, choice and grammar outputs matched against their patterns; tool calls (required,
// named, auto) read back by the client with parsed arguments; `trtllm-launch client --json-schema`; and a subset of
// every schema again on a world-size-2 (tp 2) cluster.
//
// An engine without grammar support (an addon built before it) fails the file; TRTLLM_REQUIRE_GUIDED=0 makes it skip
// itself instead, saying why.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Ajv, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import OpenAI from 'openai';
import t, { type Test } from 'tap';

import { runClient } from '../../../launcher/client/client-run.js';
import type { ClientOptions } from '../../../launcher/client/client-options.js';
import { defaultModelDir, packageRoot } from '../../../worker/common/package-root.js';
import { startLauncher } from '../../helpers/launched-cluster.js';
import { freePort } from '../../helpers/processes.js';
import { postJson, postSse, startTestServer } from '../../helpers/serving.js';

const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

const MODEL = 'brown-llama-17m';
const SCHEMA_DIR = join(packageRoot(), 'test', 'fixtures', 'json-schemas');
// Room for the largest fixture's shortest answer: the engine keeps every answer completable within max_tokens, so
// a model that would never close a string still ends with valid JSON (finish reason length).
const MAX_TOKENS = 160;
const SCHEMAS_AT_ONCE = 4;              // × 3 paths: requests in flight together
const REQUIRE_GUIDED = process.env.TRTLLM_REQUIRE_GUIDED !== '0';

interface SchemaCase { name: string; schema: Record<string, unknown>; valid: unknown[]; invalid: unknown[] }
interface BadSchemaCase { name: string; text: string; expect: string }

function jsonFile(path: string, fallback: unknown): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return fallback;
  }
}

function files(dir: string, suffix: string): string[] {
  try {
    return readdirSync(dir).filter((f) => f.endsWith(suffix)).sort();
  } catch {
    return [];
  }
}

/** Every fixture schema: NN-name.json, with example answers NN-name.valid.json / NN-name.invalid.json. */
function schemaCases(): SchemaCase[] {
  return files(SCHEMA_DIR, '.json').filter((f) => !/\.(in)?valid\.json$/.test(f)).map((f) => {
    const name = f.replace(/\.json$/, '');
    return {
      name, schema: jsonFile(join(SCHEMA_DIR, f), {}) as Record<string, unknown>,
      valid: jsonFile(join(SCHEMA_DIR, `${name}.valid.json`), []) as unknown[], invalid: jsonFile(join(SCHEMA_DIR, `${name}.invalid.json`), []) as unknown[],
    };
  });
}

/** Schemas the engine must refuse: invalid/NN-name.json (its text, which may not even be JSON) and the words its
 * error must contain (invalid/NN-name.expect.txt). */
function badSchemaCases(): BadSchemaCase[] {
  const dir = join(SCHEMA_DIR, 'invalid');
  return files(dir, '.json').map((f) => {
    const name = f.replace(/\.json$/, '');
    return { name, text: readFileSync(join(dir, f), 'utf8'), expect: readFileSync(join(dir, `${name}.expect.txt`), 'utf8').trim() };
  });
}

/** A compiled validator for the schema's draft (draft-07 when its $schema names an older draft, 2020-12 otherwise:
 * OpenAI's structured outputs and the fixtures use 2020-12's prefixItems), with formats. */
function compile(schema: Record<string, unknown>): ValidateFunction {
  const old = typeof schema.$schema === 'string' && /draft-0[467]/.test(schema.$schema);
  const ajv = old ? new Ajv({ strict: false, allErrors: true }) : new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv as Ajv);
  return ajv.compile(schema);
}

/** Parses `text` and checks it against `validate`; the failure, or undefined when it is valid. */
function invalidity(text: string, validate: ValidateFunction): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return `not JSON (${(error as Error).message}): ${JSON.stringify(text.slice(0, 300))}`;
  }
  if (validate(value)) return undefined;
  return `${JSON.stringify(validate.errors?.slice(0, 3))} for ${JSON.stringify(text.slice(0, 300))}`;
}

function prompt(c: SchemaCase): string {
  const about = [c.schema.title, c.schema.description].filter((s) => typeof s === 'string').join(': ');
  return `Write a JSON object for "${c.name}"${about ? ` (${about})` : ''}.`;
}

/** Why the engine cannot be tested here, or undefined when a constraint is kept. */
async function guidedDecodingMissing(base: string): Promise<string | undefined> {
  const r = await postJson(`${base}/v1/chat/completions`, {
    model: MODEL, messages: [{ role: 'user', content: 'Say something.' }], max_tokens: 16, temperature: 0, guided_choice: ['PROBE-OK'],
  });
  if (r.status === 400 && /guided decoding|guidedDecoding|not supported/i.test(JSON.stringify(r.json))) return `the server says: ${r.json.error?.message}`;
  if (r.status !== 200) return undefined;   // anything else is a real failure, and the tests below will show it
  const content = r.json.choices?.[0]?.message?.content;
  if (content !== 'PROBE-OK') return `the engine accepted guided_choice but did not keep it (answered ${JSON.stringify(content)}); an addon built before grammar support?`;
  return undefined;
}

/** The streamed chat answer's content and finish reason. */
async function streamedChat(client: OpenAI, body: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming): Promise<{ text: string; finish: string | null | undefined }> {
  const stream = await client.chat.completions.create({ ...body, stream: true });
  let text = '';
  let finish: string | null | undefined;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      finish = c.finish_reason ?? finish;
    }
  }
  return { text, finish };
}

/** The whole answer through parse(), the client's own reading of a json_schema answer (message.parsed; it refuses
 * one cut short by max_tokens). */
async function wholeAnswer(client: OpenAI, body: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming, validate: ValidateFunction): Promise<string | undefined> {
  try {
    const choice = (await client.chat.completions.parse(body)).choices[0]!;
    const content = choice.message.content ?? '';
    const bad = invalidity(content, validate);
    if (bad) return bad;
    if (JSON.stringify(choice.message.parsed) !== JSON.stringify(JSON.parse(content))) return 'message.parsed differs from the content';
    return choice.finish_reason === 'stop' ? undefined : `finish_reason ${choice.finish_reason}`;
  } catch (error) {
    return (error as Error).message;
  }
}

/** One schema through the three paths at once; what went wrong, if anything. */
async function schemaCase(client: OpenAI, base: string, c: SchemaCase): Promise<string[]> {
  const validate = compile(c.schema);
  const body: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming = {
    model: MODEL, messages: [{ role: 'user', content: prompt(c) }], max_tokens: MAX_TOKENS, temperature: 0,
    response_format: { type: 'json_schema', json_schema: { name: c.name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64), schema: c.schema, strict: true } },
  };
  const [whole, streamed, kserve] = await Promise.all([
    wholeAnswer(client, body, validate),
    streamedChat(client, body).then((s) => {
      const bad = invalidity(s.text, validate);
      return bad ? `${bad} (finish_reason ${s.finish})` : undefined;
    }),
    postJson(`${base}/v2/models/ensemble/generate`, {
      text_input: prompt(c), max_tokens: MAX_TOKENS, exclude_input_in_output: true,
      guided_decoding_guide_type: 'json_schema', guided_decoding_guide: JSON.stringify(c.schema),
    }).then((r) => (r.status === 200 ? invalidity(r.json.text_output, validate) : `status ${r.status}: ${JSON.stringify(r.json)}`)),
  ]);
  return ([['whole', whole], ['streamed', streamed], ['KServe', kserve]] as const).flatMap(([path, bad]) => (bad ? [`${c.name} (${path}): ${bad}`] : []));
}

/** The schema suite against one server, SCHEMAS_AT_ONCE schemas at a time (the engine batches them): whole, streamed,
 * and through KServe's ensemble. Every answer must validate. */
async function schemaSuite(t: Test, base: string, cases: readonly SchemaCase[]): Promise<void> {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
  const failures: string[] = [];
  for (let i = 0; i < cases.length; i += SCHEMAS_AT_ONCE) {
    const results = await Promise.all(cases.slice(i, i + SCHEMAS_AT_ONCE).map((c) => schemaCase(client, base, c)));
    failures.push(...results.flat());
  }
  t.same(failures, [], `all ${cases.length} schemas × (whole, streamed, KServe) validate`);
}

const cases = schemaCases();
const badCases = badSchemaCases();

t.test('the fixtures agree with ajv: their valid examples pass and their invalid ones fail', async (t) => {
  for (const c of cases) {
    const validate = compile(c.schema);
    c.valid.forEach((v, i) => t.ok(validate(v), `${c.name}: valid example ${i}`));
    c.invalid.forEach((v, i) => t.notOk(validate(v), `${c.name}: invalid example ${i}`));
  }
});
const { base } = await startTestServer(t, { model: defaultModelDir(), servedModelName: MODEL });
const missing = await guidedDecodingMissing(base);
if (missing && !REQUIRE_GUIDED) {
  t.plan(0, `guided decoding is not available: ${missing}`);
} else {
  t.test('guided decoding is available', async (t) => {
    t.equal(missing, undefined, missing ?? 'a constraint is kept');
  });

  t.test(`json_schema: every fixture schema (${cases.length}), whole, streamed and through KServe`, async (t) => {
    t.ok(cases.length >= 50, `at least 50 schemas in ${SCHEMA_DIR} (found ${cases.length})`);
    await schemaSuite(t, base, cases);
  });

  t.test(`schemas the engine cannot honour (${badCases.length}): a 400 naming the construct and where it is`, async (t) => {
    for (const c of badCases) {
      const kserve = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'x', max_tokens: 4, guided_decoding_guide_type: 'json_schema', guided_decoding_guide: c.text });
      t.equal(kserve.status, 400, `${c.name} (KServe): 400`);
      t.ok(typeof kserve.json.error === 'string' && kserve.json.error.startsWith('guided_decoding_guide') && kserve.json.error.includes(c.expect), `${c.name} (KServe): ${JSON.stringify(kserve.json.error)} names ${JSON.stringify(c.expect)}`);
      const schema = jsonFile(join(SCHEMA_DIR, 'invalid', `${c.name}.json`), undefined);
      if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) continue;   // not a schema object: the frontend's own 400
      const openai = await postJson(`${base}/v1/chat/completions`, {
        model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 4, response_format: { type: 'json_schema', json_schema: { name: 'bad', schema } },
      });
      t.equal(openai.status, 400, `${c.name} (OpenAI): 400`);
      t.ok(openai.json.error?.param === 'response_format' && String(openai.json.error?.message).includes(c.expect), `${c.name} (OpenAI): ${JSON.stringify(openai.json.error?.message)}`);
    }
  });

  t.test('json_object, json, regex, choice and grammar outputs match', async (t) => {
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
    const messages = [{ role: 'user' as const, content: 'Give me a phone number.' }];
    const object = await client.chat.completions.create({ model: MODEL, messages, max_tokens: MAX_TOKENS, temperature: 0, response_format: { type: 'json_object' } });
    const objectText = object.choices[0]!.message.content ?? '';
    t.equal(invalidity(objectText, compile({ type: 'object' })), undefined, `json_object: an object (finish_reason ${object.choices[0]!.finish_reason})`);
    const json = await postJson(`${base}/v2/models/tensorrt_llm_bls/generate`, { text_input: 'Data:', max_tokens: MAX_TOKENS, exclude_input_in_output: true, guided_decoding_guide_type: 'json' });
    t.equal(invalidity(String(json.json.text_output), compile({})), undefined, 'KServe json: a JSON value');
    const pattern = '\\d{3}-\\d{4}';
    for (const stream of [false, true]) {
      const body = { model: MODEL, prompt: 'Call me at', max_tokens: 32, temperature: 0, guided_regex: pattern };
      const text = stream
        ? (await postSse(`${base}/v1/completions`, { ...body, stream: true })).events.filter((e) => typeof e === 'object').map((e) => e.choices?.[0]?.text ?? '').join('')
        : (await postJson(`${base}/v1/completions`, body)).json.choices[0].text;
      t.match(text, new RegExp(`^${pattern}$`), `guided_regex${stream ? ' (streamed)' : ''}: ${JSON.stringify(text)}`);
    }
    const regex = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'The year was', max_tokens: 16, exclude_input_in_output: true, guided_decoding_guide_type: 'regex', guided_decoding_guide: '(19|20)\\d\\d' });
    t.match(regex.json.text_output, /^(19|20)\d\d$/, 'KServe regex');
    const choice = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 16, temperature: 0, guided_choice: ['red', 'green', 'blue "sky"'] } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
    t.ok(['red', 'green', 'blue "sky"'].includes(choice.choices[0]!.message.content!), `guided_choice: ${choice.choices[0]!.message.content}`);
    const grammar = 'root ::= answer "."\nanswer ::= "yes" | "no"\n';
    const yesNo = await postJson(`${base}/v2/models/tensorrt_llm_bls/generate`, { text_input: 'Is it raining?', max_tokens: 16, exclude_input_in_output: true, guided_decoding_guide_type: 'ebnf_grammar', guided_decoding_guide: grammar });
    t.match(yesNo.json.text_output, /^(yes|no)\.$/, 'KServe ebnf_grammar');
    const badRegex = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'x', max_tokens: 4, guided_decoding_guide_type: 'regex', guided_decoding_guide: '(unclosed' });
    t.equal(badRegex.status, 400, `a bad regex is a 400: ${JSON.stringify(badRegex.json)}`);
    t.match(badRegex.json.error, /^guided_decoding_guide/);
    const badGrammar = await postJson(`${base}/v1/completions`, { model: MODEL, prompt: 'x', max_tokens: 4, guided_grammar: 'root ::= undefined_rule' });
    t.equal(badGrammar.status, 400, `a bad grammar is a 400: ${JSON.stringify(badGrammar.json)}`);
    t.equal(badGrammar.json.error?.param, 'guided_grammar');
  });

  t.test('tools through the official client: required, named and auto; whole and streamed; parsed arguments', async (t) => {
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
    const weather = { type: 'object', properties: { city: { type: 'string', maxLength: 40 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'], additionalProperties: false };
    const time = { type: 'object', properties: { zone: { type: 'string', maxLength: 40 } }, required: ['zone'], additionalProperties: false };
    const tools: OpenAI.Chat.ChatCompletionFunctionTool[] = [
      { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: weather, strict: true } },
      { type: 'function', function: { name: 'get_time', description: 'The time in a time zone', parameters: time, strict: true } },
    ];
    const validators = { get_weather: compile(weather), get_time: compile(time) } as Record<string, ValidateFunction>;
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
    for (const toolChoice of ['required', { type: 'function', function: { name: 'get_time' } }] as const) {
      const label = typeof toolChoice === 'string' ? toolChoice : `named ${toolChoice.function.name}`;
      const r = await client.chat.completions.parse({ model: MODEL, messages, tools, tool_choice: toolChoice, max_tokens: MAX_TOKENS, temperature: 0 });
      const choice = r.choices[0]!;
      t.equal(choice.finish_reason, 'tool_calls', `${label}: finish_reason`);
      const call = choice.message.tool_calls?.[0];
      t.ok(call && call.type === 'function' && call.id.startsWith('call_'), `${label}: a function call with an id`);
      if (!call || call.type !== 'function') continue;
      if (typeof toolChoice !== 'string') t.equal(call.function.name, toolChoice.function.name, 'the named function');
      t.ok(validators[call.function.name]?.(call.function.parsed_arguments), `${label}: parsed_arguments valid (${call.function.arguments})`);
      t.same(call.function.parsed_arguments, JSON.parse(call.function.arguments), 'the client parsed the arguments');
      const final = await client.chat.completions.stream({ model: MODEL, messages, tools, tool_choice: toolChoice, max_tokens: MAX_TOKENS, temperature: 0 }).finalChatCompletion();
      const streamedCall = final.choices[0]!.message.tool_calls?.[0];
      t.equal(final.choices[0]!.finish_reason, 'tool_calls', `${label} (streamed): finish_reason`);
      t.same(streamedCall?.type === 'function' ? [streamedCall.function.name, streamedCall.function.arguments] : undefined, [call.function.name, call.function.arguments], `${label}: streamed = whole`);
      // The call and its result go back in, as an agent loop sends them.
      const next = await client.chat.completions.create({
        model: MODEL, max_tokens: 8, temperature: 0, tools,
        messages: [...messages, { role: 'assistant', content: null, tool_calls: [{ id: call.id, type: 'function', function: { name: call.function.name, arguments: call.function.arguments } }] }, { role: 'tool', tool_call_id: call.id, content: '18 degrees' }],
      });
      t.ok(next.choices[0]!.finish_reason, `${label}: a conversation with the call and its result is accepted`);
    }
    const auto = await client.chat.completions.create({ model: MODEL, messages, tools, max_tokens: 32, temperature: 0 });
    const message = auto.choices[0]!.message;
    t.ok(typeof message.content === 'string' || (message.tool_calls?.length ?? 0) > 0, 'auto: content or calls, never an error');
  });

  t.test('trtllm-launch client --json-schema / --regex', async (t) => {
    const c = cases[0];
    if (!c) {
      t.plan(0, `no fixture schemas in ${SCHEMA_DIR}`);
      return;
    }
    const dir = mkdtempSync(join(tmpdir(), 'client-schema-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'schema.json');
    writeFileSync(file, JSON.stringify(c.schema));
    const options: ClientOptions = {
      url: new URL(base).host, protocol: 'http', modelName: 'ensemble', text: prompt(c), requestOutputLen: MAX_TOKENS, streaming: false,
      returnLogProbs: false, returnContextLogits: false, returnGenerationLogits: false, excludeInputInOutput: true, jsonSchema: file,
    };
    for (const streaming of [false, true]) {
      const run = await runClient({ ...options, streaming }, () => {});
      t.equal(invalidity(run.elements[0]!.outputText, compile(c.schema)), undefined, `--json-schema${streaming ? ' --streaming' : ''}: valid`);
    }
    const regex = await runClient({ ...options, jsonSchema: undefined, regex: '[A-Z][a-z]+', text: 'Name:', requestOutputLen: 16 }, () => {});
    t.match(regex.elements[0]!.outputText, /^[A-Z][a-z]+$/, '--regex');
  });

  t.test(`world size 2 (tp 2): every fixture schema (${cases.length}), whole, streamed and through KServe`, async (t) => {
    const ports = { http: await freePort(), metrics: await freePort(), grpc: await freePort() };
    const launcher = startLauncher(['--model', defaultModelDir(), '--served-model-name', MODEL, '--world-size', '2', '--oversubscribe',
      '--threads', '1', '--http-port', String(ports.http), '--metrics-port', String(ports.metrics), '--grpc-port', String(ports.grpc)]);
    t.teardown(async () => {
      launcher.child.kill('SIGINT');
      await launcher.child;
    });
    t.ok(await launcher.ready, `ready (${launcher.output().slice(-1500)})`);
    await schemaSuite(t, `http://127.0.0.1:${ports.http}`, cases);
  });
}
