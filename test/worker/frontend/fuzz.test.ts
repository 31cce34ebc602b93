// Thousands of malformed bodies and parameter values against every endpoint: each must get a 4xx with an error
// body, the server must keep serving, and no KV block may leak.
import t from 'tap';

import { startTestServer, waitFor } from '../../helpers/serving.js';

// A deterministic generator, so a failure reproduces.
let state = 12345;
const rand = () => ((state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
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
  stop_words: BAD_WORDS, bad_words: BAD_WORDS, bogus_field: [1, 'x'],
};
const TOKEN_FIELDS: Record<string, readonly unknown[]> = {
  input_ids: [[], 'x', [-1], [1.5], [99999], [[1, 2], [3]], {}], request_output_len: [...BAD_INT, 0, 100000],
  runtime_top_k: BAD_INT, runtime_top_p: [...BAD_POSITIVE_FLOAT, 2], streaming: BAD_BOOL, end_id: BAD_INT,
  stop_words_list: [[1, 2, 3], 'x', [[1, 2], [5, 9]]], beam_width: [...BAD_INT, 0], wat: [1],
};
const OPENAI_FIELDS: Record<string, readonly unknown[]> = {
  model: [1, '', 'nope', {}], max_tokens: [...BAD_INT, 0, 100000], temperature: [...BAD_POSITIVE_FLOAT, 3], top_p: [0, 2, 'x'],
  n: [0, 17, 'x', 1.5], stream: BAD_BOOL, stop: [1, [1], {}], seed: BAD_INT, presence_penalty: [3, 'x'],
  frequency_penalty: [-3, {}], logit_bias: [{ 1: 5 }], best_of: [5, 'x'], stream_options: ['x', 1, { include_usage: 'x' }],
  unknown_param: [1],
};
const COMPLETION_FIELDS = { ...OPENAI_FIELDS, prompt: [1, {}, [], [{}], [-1], [99999], '', [[]]], logprobs: [-1, 6, 'x', true], echo: BAD_BOOL, suffix: ['x'] };
const CHAT_FIELDS = {
  ...OPENAI_FIELDS,
  messages: [[], 'x', [{}], [{ role: 'robot', content: 'x' }], [{ role: 'user', content: 1 }], [{ role: 'user', content: [{ type: 'image_url' }] }], [null]],
  logprobs: [1, 'x'], top_logprobs: [-1, 21, 'x'], response_format: [{ type: 'json_object' }], tools: [[{ type: 'function' }]],
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
  const { base, server } = await startTestServer(t, { maxBodyBytes: 64 * 1024 });
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
      const res = await fetch(base + c.path, { method: 'POST', body: c.body });
      const body = await res.text();
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      let hasError = false;
      try { hasError = JSON.parse(body).error !== undefined; } catch { /* not JSON */ }
      if (res.status < 400 || res.status >= 500 || !hasError) bad.push(`${res.status} ${c.path} ${c.body.slice(0, 120)} → ${body.slice(0, 160)}`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  t.same(bad.slice(0, 10), [], `every one of ${cases.length} got a 4xx with an error body (${JSON.stringify([...statuses])})`);
  const ok = await fetch(`${base}/v2/models/ensemble/generate`, { method: 'POST', body: JSON.stringify(text) });
  t.equal(ok.status, 200, 'still serving');
  t.ok(await waitFor(() => executor.numActiveRequests() === 0 && executor.kvCacheStats().freeNumBlocks === executor.kvCacheStats().maxNumBlocks), 'KV all free');
});
