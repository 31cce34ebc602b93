// Thousands of malformed bodies and parameter values against every endpoint: each must get a 4xx with an error
// body, the server must keep serving, and no KV block may leak. Then hostile HTTP — nesting past the limit, bodies
// of the wrong type, methods not served, bodies cut short, bodies over the size limit — with the same verdict, and
// no line of the server's log an error.
import t from 'tap';

import { MAX_JSON_DEPTH } from '../../../worker/frontend/json-depth.js';
import { keptLog, RawConnection, responses, send } from '../../helpers/raw-http.js';
import { leftPending, startTestServer, waitFor } from '../../helpers/serving.js';

// A deterministic generator, so a failure reproduces: a 32-bit linear congruential one, computed exactly (Math.imul;
// in doubles the product outgrew 2^53 and lost its low bits, and consecutive draws came out correlated).
let state = 12345;
const rand = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32;
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;

const BAD_INT = ['x', 1.5, -5, 1e20, {}, [1, 2, 3], true, '20'];
const BAD_POSITIVE_FLOAT = ['x', -1, {}, true, [1, 2], '0.5'];
const BAD_ANY_FLOAT = ['x', {}, true, [1, 2], '1'];
const BAD_BOOL = ['x', 1, {}, [], 'true'];
const BAD_TEXT = [1, {}, true, [], [1], ''];
const BAD_WORDS = [1, {}, [1], '[1,', true];

const TEXT_FIELDS: Record<string, readonly unknown[]> = {
  text_input: BAD_TEXT, max_tokens: [...BAD_INT, 0, 100000], end_id: [...BAD_INT, 99999], pad_id: [...BAD_INT, 99999],
  temperature: BAD_POSITIVE_FLOAT, top_k: BAD_INT, top_p: [...BAD_POSITIVE_FLOAT, 2], length_penalty: BAD_ANY_FLOAT,
  repetition_penalty: [...BAD_POSITIVE_FLOAT, 0], min_length: BAD_INT, presence_penalty: BAD_ANY_FLOAT,
  frequency_penalty: BAD_ANY_FLOAT, random_seed: BAD_INT, return_log_probs: BAD_BOOL, return_context_logits: BAD_BOOL,
  return_generation_logits: BAD_BOOL, beam_width: [...BAD_INT, 0], stream: BAD_BOOL, exclude_input_in_output: BAD_BOOL,
  stop_words: BAD_WORDS, bad_words: BAD_WORDS, bogus_field: [1, 'x'], embedding_bias_words: [1, {}, [1], '[1,'],
  embedding_bias_weights: ['x', [1, 2, 3], [{}], [true]],
  prompt_embedding_table: ['x', [1, 2], [[1, 2]], [[{}]], [[[1]], [[2]]]], prompt_vocab_size: [...BAD_INT, 7],
};
const TOKEN_FIELDS: Record<string, readonly unknown[]> = {
  input_ids: [[], 'x', [-1], [1.5], [99999], [[1, 2], [3]], {}], request_output_len: [...BAD_INT, 0, 100000],
  runtime_top_k: BAD_INT, runtime_top_p: [...BAD_POSITIVE_FLOAT, 2], streaming: BAD_BOOL, end_id: BAD_INT,
  stop_words_list: [[1, 2, 3], 'x', [[1, 2], [5, 9]]], beam_width: [...BAD_INT, 0], wat: [1],
  embedding_bias: [[1, 2], 'x', [[1], [2]], [Number.MAX_VALUE * 0]],
  prompt_embedding_table: ['x', [1, 2], [[1, 2]], [[{}]]], prompt_vocab_size: [...BAD_INT, 7],
};
const OPENAI_FIELDS: Record<string, readonly unknown[]> = {
  model: [1, '', 'nope', {}], max_tokens: [...BAD_INT, 0, 100000], temperature: [...BAD_POSITIVE_FLOAT, 3], top_p: [0, 2, 'x'],
  n: [0, 17, 'x', 1.5], stream: BAD_BOOL, stop: [1, [1], {}], seed: BAD_INT, presence_penalty: [3, 'x'],
  frequency_penalty: [-3, {}], logit_bias: [{ x: 5 }, { 1: 500 }, { 99999: 1 }, 'x', [1], { 1: 'a' }], best_of: [5, 'x'], stream_options: ['x', 1, { include_usage: 'x' }],
  unknown_param: [1], response_format: [{ type: 'xml' }, 'json', { type: 'json_schema' }, { type: 'json_schema', json_schema: { name: 'x', schema: 1 } }],
  guided_json: ['not json', 5, []], guided_regex: ['', 1], guided_grammar: [{}], guided_choice: [[], [1], 'a'],
};
const COMPLETION_FIELDS = { ...OPENAI_FIELDS, prompt: [1, {}, [], [{}], [-1], [99999], '', [[]]], logprobs: [-1, 6, 'x', true], echo: BAD_BOOL, suffix: ['x'] };
const CHAT_FIELDS = {
  ...OPENAI_FIELDS,
  messages: [[], 'x', [{}], [{ role: 'robot', content: 'x' }], [{ role: 'user', content: 1 }], [{ role: 'user', content: [{ type: 'image_url' }] }], [null]],
  logprobs: [1, 'x'], top_logprobs: [-1, 21, 'x'], tools: [[{ type: 'function' }], [{ type: 'function', function: { name: 'a b' } }], 'x'],
  tool_choice: ['sometimes', 'required', { type: 'function', function: { name: 'nope' } }], parallel_tool_calls: ['x'],
};

function mutate(valid: Record<string, unknown>, fields: Record<string, readonly unknown[]>): Record<string, unknown> {
  const body = { ...valid };
  const key = pick(Object.keys(fields));
  body[key] = pick(fields[key]!);
  return body;
}

function inferBody(): unknown {
  const good = [
    { name: 'input_ids', datatype: 'INT32', shape: [1, 3], data: [1, 2, 3] },
    { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [2] },
  ];
  const breakers: (() => unknown)[] = [
    () => ({ inputs: [{ ...good[0], shape: [1, 4] }, good[1]] }),
    () => ({ inputs: [{ ...good[0], datatype: 'FLOAT' }, good[1]] }),
    () => ({ inputs: [{ ...good[0], data: ['a', 'b', 'c'] }, good[1]] }),
    () => ({ inputs: [good[0], { ...good[1], data: [-1] }] }),
    () => ({ inputs: [good[0]] }),
    () => ({ inputs: [good[0], good[0], good[1]] }),
    () => ({ inputs: [{ ...good[0], name: '' }, good[1]] }),
    () => ({ inputs: [{ ...good[0], shape: 'x' }, good[1]] }),
    () => ({ inputs: [good[0], good[1], { name: 'bogus', datatype: 'INT32', shape: [1], data: [1] }] }),
    () => ({ inputs: {} }),
    () => ({ inputs: [good[0], good[1]], outputs: 'x' }),
    () => ({ inputs: [good[0], good[1]], id: 5 }),
    () => ({ inputs: [null] }),
  ];
  return pick(breakers)();
}

function structural(): string {
  return pick([
    '', '{', '{"text_input": "x", "max_tokens": 1', '[]', '[1,2]', '42', '"str"', 'null', 'true', '{"a":}', '\u0000\u0001\u0002',
    String.fromCharCode(...Array.from({ length: 40 }, () => Math.floor(rand() * 256))), '{"text_input": "x"}{"x":1}',
  ]);
}

t.test('fuzz: malformed bodies and values all get 4xx; the server keeps serving; no KV leaks', async (t) => {
  const { base, metricsBase, server } = await startTestServer(t, { maxBodyBytes: 64 * 1024 });
  const executor = server.context.executor;
  const cases: { path: string; body: string }[] = [];
  const text = { text_input: 'Hello', max_tokens: 2 };
  const tokens = { input_ids: [1, 2, 3], request_output_len: 2 };
  const completion = { model: 'tiny-gpt2', prompt: 'Hello', max_tokens: 2 };
  const chat = { model: 'tiny-gpt2', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 };
  for (let i = 0; i < 2000; i += 1) {
    const r = rand();
    const model = pick(['ensemble', 'tensorrt_llm_bls']);
    let c: { path: string; body: unknown };
    if (r < 0.3) c = { path: `/v2/models/${model}/${pick(['generate', 'generate_stream'])}`, body: mutate(text, TEXT_FIELDS) };
    else if (r < 0.4) c = { path: `/v2/models/tensorrt_llm/${pick(['generate', 'generate_stream'])}`, body: mutate(tokens, TOKEN_FIELDS) };
    else if (r < 0.5) c = { path: '/v2/models/tensorrt_llm/infer', body: inferBody() };
    else if (r < 0.65) c = { path: '/v1/completions', body: mutate(completion, COMPLETION_FIELDS) };
    else if (r < 0.8) c = { path: '/v1/chat/completions', body: mutate(chat, CHAT_FIELDS) };
    else if (r < 0.95) c = { path: pick(['/v2/models/ensemble/generate', '/v2/models/tensorrt_llm/infer', '/v1/completions', '/v1/chat/completions', '/v2/models/preprocessing/infer']), body: structural() };
    else c = { path: pick(['/v2/models/nope/generate', '/v2/models/ensemble/versions/9/generate', '/v1/nothing', '/v2/models/%E0%A4%A/generate']), body: text };
    cases.push({ path: c.path, body: typeof c.body === 'string' ? c.body : JSON.stringify(c.body) });
  }
  cases.push({ path: '/v2/models/ensemble/generate', body: JSON.stringify({ text_input: 'x'.repeat(100 * 1024), max_tokens: 1 }) });
  const bad: string[] = [];
  const statuses = new Map<number, number>();
  let next = 0;
  const worker = async () => {
    while (next < cases.length) {
      const c = cases[next++]!;
      const res = await fetch(base + c.path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: c.body });
      const body = await res.text();
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      let hasError = false;
      try { hasError = JSON.parse(body).error !== undefined; } catch { /* not JSON */ }
      if (res.status < 400 || res.status >= 500 || !hasError) bad.push(`${res.status} ${c.path} ${c.body.slice(0, 120)} → ${body.slice(0, 160)}`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  t.same(bad.slice(0, 10), [], `every one of ${cases.length} got a 4xx with an error body (${JSON.stringify([...statuses])})`);
  const ok = await fetch(`${base}/v2/models/ensemble/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(text) });
  t.equal(ok.status, 200, 'still serving');
  t.ok(await waitFor(() => executor.numActiveRequests() === 0 && executor.kvCacheStats().freeNumBlocks === executor.kvCacheStats().maxNumBlocks), 'KV all free');
  // Every request answered, so none may still count as pending (a rejection at enqueue once left its gauge up).
  const { models, pending } = await leftPending(metricsBase);
  t.ok(models >= 5, 'a pending gauge per model');
  t.same(pending, [], 'no request left pending');
});

const JSON_PATHS = ['/v2/models/ensemble/generate', '/v2/models/tensorrt_llm_bls/generate_stream', '/v2/models/tensorrt_llm/generate',
  '/v2/models/tensorrt_llm/infer', '/v2/models/preprocessing/infer', '/v1/completions', '/v1/chat/completions'];
const ALL_PATHS = [...JSON_PATHS, '/v2/health/ready', '/v2/health/live', '/v2', '/v2/models/ensemble', '/v2/models/ensemble/config',
  '/v2/repository/index', '/v1/models', '/v1/nothing', '/v2/models/nope/generate'];
const VALID: Record<string, unknown> = {
  '/v2/models/ensemble/generate': { text_input: 'Hi', max_tokens: 1 },
  '/v2/models/tensorrt_llm_bls/generate_stream': { text_input: 'Hi', max_tokens: 1 },
  '/v2/models/tensorrt_llm/generate': { input_ids: [1, 2, 3], request_output_len: 1 },
  '/v2/models/tensorrt_llm/infer': { inputs: [{ name: 'input_ids', datatype: 'INT32', shape: [1, 3], data: [1, 2, 3] }, { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [1] }] },
  '/v2/models/preprocessing/infer': { inputs: [{ name: 'QUERY', datatype: 'BYTES', shape: [1, 1], data: ['Hi'] }, { name: 'REQUEST_OUTPUT_LEN', datatype: 'INT32', shape: [1, 1], data: [1] }] },
  '/v1/completions': { model: 'tiny-gpt2', prompt: 'Hi', max_tokens: 1 },
  '/v1/chat/completions': { model: 'tiny-gpt2', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1 },
};
const WRONG_TYPES = ['text/plain', 'text/plain;charset=UTF-8', 'multipart/form-data; boundary=----x', 'application/xml', 'text/html',
  'application/octet-stream', 'image/png', '*/*', 'application/json5', 'text/json', 'application/x-ndjson'];
const ODD_METHODS = ['PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'PROPFIND', 'MKCOL', 'LOCK', 'SEARCH', 'PURGE', 'LINK', 'GET', 'POST'];

/** A valid body with a value nested up to `room` bytes deep (arrays or objects, past the depth limit) put in at the
 * top or inside a field. */
function nestedBody(path: string, room: number): string {
  const open = pick(['[', '{"a":']);
  const depth = MAX_JSON_DEPTH + 1 + Math.floor(rand() * (room / (open.length + 1) - MAX_JSON_DEPTH));
  const value = open === '[' ? '['.repeat(depth) + ']'.repeat(depth) : `${open.repeat(depth)}1${'}'.repeat(depth)}`;
  const valid = JSON.stringify(VALID[path]);
  return rand() < 0.3 ? value : `${valid.slice(0, -1)}, ${JSON.stringify(pick(['text_input', 'inputs', 'prompt', 'messages', 'x', 'parameters']))}: ${value}}`;
}

t.test('fuzz: hostile HTTP gets a 4xx, never a 5xx; the server keeps serving; its log has no error', async (t) => {
  const kept = keptLog();
  const limit = 64 * 1024;
  const { base, server } = await startTestServer(t, { maxBodyBytes: limit }, kept.log);
  const port = Number(new URL(base).port);
  const executor = server.context.executor;
  const bad: string[] = [];
  const statuses = new Map<number, number>();
  const expect = (what: string, status: number, allowed: readonly number[], body: string) => {
    statuses.set(status, (statuses.get(status) ?? 0) + 1);
    let hasError = false;
    try { hasError = JSON.parse(body).error !== undefined; } catch { /* not JSON */ }
    if (!allowed.includes(status) || (status !== 200 && !hasError)) bad.push(`${status} ${what} -> ${body.slice(0, 160)}`);
  };

  // Over HTTP as clients send it: nesting, types, methods.
  const cases: { what: string; method: string; path: string; headers: Record<string, string>; body?: string; allowed: number[] }[] = [];
  for (let i = 0; i < 300; i += 1) {
    const r = rand();
    const path = pick(JSON_PATHS);
    if (r < 0.35) {
      const body = nestedBody(path, limit - 1024);  // under the size limit: up to 10k levels of objects, 32k of arrays
      cases.push({ what: `nested ${body.slice(0, 60)}`, method: 'POST', path, headers: { 'content-type': 'application/json' }, body, allowed: [400] });
    } else if (r < 0.6) {
      const type = pick(WRONG_TYPES);
      cases.push({ what: `type ${type}`, method: 'POST', path, headers: { 'content-type': type }, body: JSON.stringify(VALID[path]), allowed: [415] });
    } else if (r < 0.7) {
      const headers: Record<string, string> = { ...pick<Record<string, string>>([{ origin: 'https://evil.example' }, { 'sec-fetch-site': 'cross-site' }, { origin: 'null' }]) };
      if (rand() < 0.5) headers['content-type'] = 'application/x-www-form-urlencoded';
      cases.push({ what: `from a page ${JSON.stringify(headers)}`, method: 'POST', path, headers, body: JSON.stringify(VALID[path]), allowed: [415] });
    } else {
      const method = pick(ODD_METHODS);
      const anyPath = pick(ALL_PATHS);
      // Whatever the route does with it, only a refusal or an answer: 200 where the method is the route's own.
      cases.push({ what: `${method} ${anyPath}`, method, path: anyPath, headers: {}, ...(rand() < 0.5 ? { body: '{}' } : {}), allowed: [200, 400, 404, 405, 415] });
    }
  }
  let next = 0;
  const worker = async () => {
    while (next < cases.length) {
      const c = cases[next++]!;
      const r = await send(port, c.method, c.path, c.headers, c.body).catch((e: Error) => ({ status: 0, text: `${e.message}` }));
      expect(`${c.what} ${c.method} ${c.path}`, r.status, c.allowed, c.method === 'HEAD' ? '{"error":""}' : r.text);
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));

  // At the byte level: CONNECT, bodies over the limit written whole, bodies cut short.
  for (let i = 0; i < 5; i += 1) {
    const c = new RawConnection(port);
    await c.write(`CONNECT ${pick(['example.com:443', '127.0.0.1:22', '[::1]:80'])} HTTP/1.1\r\nHost: x\r\n\r\n`);
    await c.close();
    const [answer] = responses(c.received);
    expect('CONNECT', answer?.status ?? 0, [405], answer?.body ?? '');
  }
  for (let i = 0; i < 12; i += 1) {
    const path = pick(JSON_PATHS);
    const size = limit + 1 + Math.floor(rand() * 2 * 1024 * 1024);
    const chunked = rand() < 0.3;
    const c = new RawConnection(port);
    await c.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${size}`}\r\n\r\n`);
    const wrote = chunked ? await c.write(`${size.toString(16)}\r\n${' '.repeat(size)}\r\n0\r\n\r\n`) : await c.writeBody(size);
    await c.write('GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n');
    await c.until((text) => responses(text).length === 2);
    c.socket.destroy();
    const [refused, after] = responses(c.received);
    expect(`${size} bytes${chunked ? ' chunked' : ''} to ${path}`, refused?.status ?? 0, [413], refused?.body ?? '');
    if (!wrote || after?.status !== 200) bad.push(`${size} bytes to ${path}: written ${wrote}, then ${after?.status} (${c.error ?? 'no error'})`);
  }
  for (let i = 0; i < 20; i += 1) {
    const path = pick(JSON_PATHS);
    const body = JSON.stringify(VALID[path]);
    const declared = body.length + 1 + Math.floor(rand() * 1000);
    const from = kept.lines.length;
    const c = new RawConnection(port);
    // The 100 Continue says the server is reading the body: the client leaves mid-body, after it.
    await c.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\nExpect: 100-continue\r\n\r\n`);
    await c.until((text) => text.includes('100 Continue'));
    await c.write(body.slice(0, Math.floor(rand() * body.length)));
    if (rand() < 0.5) c.socket.resetAndDestroy();
    else c.socket.end();
    const line = await kept.next(/client gone|ERROR/, from);
    if (!/DEBUG client gone: .* the request body ended early/.test(line)) bad.push(`cut short on ${path}: ${line}`);
  }

  t.same(bad.slice(0, 10), [], `every hostile request got its 4xx (${JSON.stringify([...statuses].sort((a, b) => a[0] - b[0]))})`);
  t.same(kept.lines.filter((l) => / ERROR /.test(l)).slice(0, 5), [], 'no error in the log');
  const ok = await send(port, 'POST', '/v2/models/ensemble/generate', { 'content-type': 'application/json' }, JSON.stringify({ text_input: 'Hi', max_tokens: 2 }));
  t.equal(ok.status, 200, 'still serving');
  t.ok(await waitFor(() => executor.numActiveRequests() === 0 && executor.kvCacheStats().freeNumBlocks === executor.kvCacheStats().maxNumBlocks), 'KV all free');
});
