// The KServe v2 API over real HTTP on the tiny GPT-2 fixture: the seeds' curl verbatim, generate_stream, infer
// with Triton's tensors, batches with batch_index, the stop request, client disconnects, health and errors.
import { request } from 'node:http';

import { execa } from 'execa';
import t from 'tap';

import { loadTokenizer } from '../../../worker/tokenizer.js';
import { fixtureDir } from '../../helpers/fixtures.js';
import { localExecutor, parseSse, postJson, postSse, startTestServer, waitFor } from '../../helpers/serving.js';

const PROMPT = 'What is machine learning?';

t.test('KServe v2 over HTTP', async (t) => {
  const { base, server } = await startTestServer(t);
  const executor = localExecutor(server);
  const allFree = () => { const s = executor.kvCacheStats(); return s.freeNumBlocks === s.maxNumBlocks && executor.numActiveRequests() === 0; };
  const tok = loadTokenizer(fixtureDir('tiny-gpt2'));

  t.test("the seeds' curl, verbatim, returns the seeds' shape", async (t) => {
    const port = new URL(base).port;
    const r = await execa('curl', ['-s', '-X', 'POST', `localhost:${port}/v2/models/ensemble/generate`, '-d',
      '{"text_input": "What is machine learning?", "max_tokens": 20, "bad_words": "", "stop_words": ""}']);
    const body = JSON.parse(r.stdout);
    t.same(Object.keys(body), ['model_name', 'model_version', 'sequence_end', 'sequence_id', 'sequence_start', 'text_output']);
    t.match(body, { model_name: 'ensemble', model_version: '1', sequence_end: false, sequence_id: 0, sequence_start: false });
    t.ok(body.text_output.startsWith(PROMPT) && body.text_output.length > PROMPT.length, 'prompt included, then the continuation');
    const bls = await execa('curl', ['-s', '-X', 'POST', `localhost:${port}/v2/models/tensorrt_llm_bls/generate`, '-d',
      '{"text_input": "What is machine learning?", "max_tokens": 20, "bad_words": "", "stop_words": ""}']);
    t.equal(JSON.parse(bls.stdout).text_output, body.text_output, 'tensorrt_llm_bls: the same greedy text');
    const ex = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: PROMPT, max_tokens: 20, exclude_input_in_output: true });
    t.equal(PROMPT + ex.json.text_output, body.text_output, 'exclude_input_in_output drops the prompt');
  });

  t.test('generate_stream: one SSE event per iteration, concatenating to the whole text', async (t) => {
    const whole = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: PROMPT, max_tokens: 12, exclude_input_in_output: true, return_log_probs: true });
    const { status, events } = await postSse(`${base}/v2/models/ensemble/generate_stream`, { text_input: PROMPT, max_tokens: 12, return_log_probs: true });
    t.equal(status, 200);
    t.ok(events.length >= 2, `${events.length} events`);
    t.equal(events.map((e) => e.text_output).join(''), whole.json.text_output, 'streamed text = whole text');
    t.equal(events.flatMap((e) => e.output_log_probs).length, 12, 'a log prob per token');
    t.ok(Math.abs(events.at(-1).cum_log_probs - whole.json.cum_log_probs) < 1e-4, 'cum_log_probs on the last event');
  });

  t.test('stop words as text and as ids; bad words', async (t) => {
    const free = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: PROMPT, max_tokens: 20, exclude_input_in_output: true });
    const text: string = free.json.text_output;
    const stop = text.slice(4, 6);
    const cut = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: PROMPT, max_tokens: 20, exclude_input_in_output: true, stop_words: JSON.stringify([stop]) });
    t.equal(cut.json.text_output, text.slice(0, text.indexOf(stop) + stop.length), `stops at ${JSON.stringify(stop)}, Triton keeps the stop word`);
    const comma = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: PROMPT, max_tokens: 20, exclude_input_in_output: true, stop_words: `zzzz,${stop}` });
    t.equal(comma.json.text_output, cut.json.text_output, 'comma list');
    const bad = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: PROMPT, max_tokens: 20, bad_words: [text.slice(0, 1)] });
    t.equal(bad.status, 200, 'bad_words accepted (the engine enforces them)');
  });

  t.test('infer with tensors; batch with batch_index; preprocessing and postprocessing', async (t) => {
    const ids = tok.encode(PROMPT);
    const r = await postJson(`${base}/v2/models/tensorrt_llm/infer`, {
      id: 'x1',
      inputs: [
        { name: 'input_ids', datatype: 'INT32', shape: [1, ids.length], data: ids },
        { name: 'input_lengths', datatype: 'INT32', shape: [1, 1], data: [ids.length] },
        { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [6] },
        { name: 'return_log_probs', datatype: 'BOOL', shape: [1, 1], data: [true] },
      ],
    });
    t.equal(r.status, 200, JSON.stringify(r.json).slice(0, 200));
    const out = Object.fromEntries(r.json.outputs.map((o: { name: string }) => [o.name, o]));
    t.same(out.output_ids.shape, [1, 1, ids.length + 6], 'prompt + 6 tokens');
    t.same(out.output_ids.data.slice(0, ids.length), ids);
    t.same(out.sequence_length.data, [ids.length + 6]);
    t.same(out.output_log_probs.shape, [1, 1, 6]);
    t.equal(r.json.id, 'x1');
    const whole = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: PROMPT, max_tokens: 6, exclude_input_in_output: true });
    t.equal(tok.decode(out.output_ids.data.slice(ids.length)), whole.json.text_output, 'token model = text model');

    const batch = await postSse(`${base}/v2/models/ensemble/generate_stream`, { text_input: ['Hello', PROMPT, 'abc'], max_tokens: [2, 9, 4], stream: false });
    t.same(batch.events.map((e) => e.batch_index).sort(), [0, 1, 2], 'one result per element, each with batch_index');
    const single = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: PROMPT, max_tokens: 9 });
    t.equal(batch.events.find((e) => e.batch_index === 1).text_output, single.json.text_output, 'element 1 = the same prompt alone');
    const gb = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: ['Hello', 'abc'], max_tokens: 3 });
    t.same(gb.json.batch_index, [0, 1], 'generate with a batch: lists in batch order');
    const ib = await postJson(`${base}/v2/models/ensemble/infer`, { inputs: [
      { name: 'text_input', datatype: 'BYTES', shape: [2, 1], data: ['Hello', 'abc'] },
      { name: 'max_tokens', datatype: 'INT32', shape: [2, 1], data: [3, 3] },
    ] });
    t.same(ib.json.outputs.find((o: { name: string }) => o.name === 'text_output').data, gb.json.text_output, 'infer on ensemble');

    const pre = await postJson(`${base}/v2/models/preprocessing/infer`, { inputs: [
      { name: 'QUERY', datatype: 'BYTES', shape: [1, 1], data: [PROMPT] },
      { name: 'REQUEST_OUTPUT_LEN', datatype: 'INT32', shape: [1, 1], data: [4] },
      { name: 'STOP_WORDS_DICT', datatype: 'BYTES', shape: [1, 1], data: ['a,b'] },
    ] });
    const preOut = Object.fromEntries(pre.json.outputs.map((o: { name: string }) => [o.name, o]));
    t.same(preOut.INPUT_ID.data, ids, 'preprocessing: ids');
    t.same(preOut.STOP_WORDS_IDS.shape, [1, 2, 2]);
    const post = await postJson(`${base}/v2/models/postprocessing/infer`, { inputs: [
      { name: 'TOKENS_BATCH', datatype: 'INT32', shape: [1, 1, ids.length], data: ids },
      { name: 'SEQUENCE_LENGTH', datatype: 'INT32', shape: [1, 1], data: [ids.length] },
    ] });
    t.same(post.json.outputs[0].data, [PROMPT], 'postprocessing: text');
    t.ok(await waitFor(allFree), 'KV all free');
  });

  t.test('a client that disconnects mid-stream cancels its request and frees its KV blocks', async (t) => {
    // The loop runs the request's first iteration and holds: only the disconnect can end it while it holds.
    executor.holdIterations(1);
    let events = 0;
    await new Promise<void>((resolve) => {
      const req = request(`${base}/v2/models/ensemble/generate_stream`, { method: 'POST' }, (res) => {
        res.on('data', (chunk: Buffer) => {
          events += (chunk.toString().match(/data: /g) ?? []).length;
          if (events >= 1) req.destroy();
        });
        res.on('close', () => resolve());
      });
      req.on('error', () => resolve());
      req.end(JSON.stringify({ text_input: PROMPT, max_tokens: 100 }));
    });
    t.equal(events, 1, 'one event before the disconnect');
    t.ok(await waitFor(allFree), 'the request is cancelled and its KV blocks freed while the loop still holds');
    executor.holdIterations(-1);
  });

  t.test('health, metadata, config', async (t) => {
    for (const path of ['/v2/health/live', '/v2/health/ready', '/v2/models/ensemble/ready', '/v2/models/tensorrt_llm/versions/1/ready']) {
      t.equal((await fetch(base + path)).status, 200, path);
    }
    const server = await (await fetch(`${base}/v2`)).json() as any;
    t.equal(server.name, 'trtllm-launch');
    const meta = await (await fetch(`${base}/v2/models/tensorrt_llm`)).json() as any;
    t.ok(meta.inputs.some((i: { name: string }) => i.name === 'input_ids') && meta.outputs.some((o: { name: string }) => o.name === 'output_ids'));
    const config = await (await fetch(`${base}/v2/models/ensemble/config`)).json() as any;
    t.equal(config.model_transaction_policy.decoupled, true);
    t.equal((await fetch(`${base}/v2/models/nope/ready`)).status, 404);
    t.equal((await fetch(`${base}/v2/models/ensemble/versions/7`)).status, 404);
  });

  t.test('errors: 400 naming the field and value, 404, 405, 413, KServe shape', async (t) => {
    const cases: [string, unknown, number, RegExp][] = [
      ['/v2/models/nope/generate', { text_input: 'a', max_tokens: 1 }, 404, /unknown model 'nope'/],
      ['/v2/models/ensemble/generate', { text_input: 'a', max_tokens: -2 }, 400, /max_tokens must be an integer >= 1, got -2 \(number\)/],
      ['/v2/models/ensemble/generate', { text_input: 'a', max_tokens: 2, top_k: 'x' }, 400, /top_k must be an integer >= 0, got "x"/],
      ['/v2/models/ensemble/generate', { text_input: 'a', max_tokens: 2, wat: 1 }, 400, /unexpected input 'wat' for model 'ensemble'/],
      ['/v2/models/ensemble/generate', { text_input: 'a', max_tokens: 100000 }, 400, /max_seq_len|maxTokens/],
      ['/v2/models/ensemble/generate', '{"text_input": ', 400, /not valid JSON/],
      ['/v2/models/tensorrt_llm/generate', { input_ids: [1, 99999], request_output_len: 2 }, 400, /99999/],
      ['/v2/models/tensorrt_llm/infer', { inputs: 'x' }, 400, /inputs must be an array/],
    ];
    for (const [path, body, status, pattern] of cases) {
      const r = await postJson(base + path, body);
      t.equal(r.status, status, `${path} ${JSON.stringify(body).slice(0, 60)}`);
      t.match(r.json.error, pattern);
    }
    t.equal((await fetch(`${base}/v2/models/ensemble/generate`)).status, 405);
    const big = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'x'.repeat(2 * 1024 * 1024), max_tokens: 1 });
    t.equal(big.status, 413);
    t.match(big.json.error, /exceeds the limit of 1048576 bytes/);
    t.ok(await waitFor(allFree), 'KV all free');
  });
});

t.test('queue full → 503 with Triton\'s message', async (t) => {
  const { base, server } = await startTestServer(t, { maxQueueSize: 1, maxBatchSize: 1 });
  const executor = localExecutor(server);
  // Held before its first iteration, the first request fills the queue of one: every other one is refused.
  executor.holdIterations(0);
  const first = postJson(`${base}/v2/models/ensemble/generate`, { text_input: PROMPT, max_tokens: 110 });
  t.ok(await waitFor(() => executor.numActiveRequests() === 1), 'the first request is queued');
  const others = await Promise.all(Array.from({ length: 5 }, () => postJson(`${base}/v2/models/ensemble/generate`, { text_input: PROMPT, max_tokens: 110 })));
  t.same(others.map((r) => r.status), [503, 503, 503, 503, 503], 'the five others are refused');
  t.match(others[0]?.json.error, /Maximum queue size of 1 has been reached/);
  executor.holdIterations(-1);
  t.equal((await first).status, 200, 'the queued one is served');
});

t.test("Triton's stop request cancels a request by id", async (t) => {
  const { base, server } = await startTestServer(t);
  const executor = localExecutor(server);
  const ids = loadTokenizer(fixtureDir('tiny-gpt2')).encode(PROMPT);
  // Request 42 and three others start together and run one iteration; the loop holds until the stop is in.
  executor.holdIterations(0);
  const blockers = [1, 2, 3].map(() => postJson(`${base}/v2/models/tensorrt_llm/generate`, { input_ids: ids, request_output_len: 100 }));
  const target = postSse(`${base}/v2/models/tensorrt_llm/generate_stream`, { id: '42', input_ids: ids, request_output_len: 100 });
  t.ok(await waitFor(() => executor.numActiveRequests() === 4), 'all four queued');
  executor.holdIterations(1);
  t.ok(await executor.awaitHeld(), 'the loop holds');
  const stop = await postJson(`${base}/v2/models/tensorrt_llm/generate`, { id: '42', input_ids: ids, request_output_len: 1, stop: true });
  t.equal(stop.status, 200, 'the stop request is answered');
  t.equal(stop.json.cancelled_requests, 1, 'and says it cancelled one request');
  executor.holdIterations(-1);
  const events = (await target).events;
  t.equal(events.flatMap((e) => e.output_ids).length, 1, 'request 42 ends after the one token of its first iteration');
  t.equal(events.at(-1).finish_reason, 'cancelled', 'its last event says it was cancelled');
  const others = await Promise.all(blockers);
  t.same(others.map((r) => r.json.sequence_length), [1, 2, 3].map(() => ids.length + 100), 'the others run to the end');
  t.ok(others.every((r) => !('finish_reason' in r.json)), 'with no finish_reason (Triton\'s shape)');
  t.ok(await waitFor(() => executor.kvCacheStats().freeNumBlocks === executor.kvCacheStats().maxNumBlocks), 'KV all free');
  const noId = await postJson(`${base}/v2/models/tensorrt_llm/generate`, { input_ids: ids, request_output_len: 1, stop: true });
  t.equal(noId.status, 400);
  t.match(noId.json.error, /stop: true needs the id/);
});

t.test('API key: bearer auth on the API, health open by default', async (t) => {
  const { base } = await startTestServer(t, { apiKey: 'sekret' });
  t.equal((await fetch(`${base}/v2/health/ready`)).status, 200, 'health open');
  const no = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'a', max_tokens: 1 });
  t.equal(no.status, 401);
  t.match(no.json.error, /API key/);
  const yes = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'a', max_tokens: 1 }, { authorization: 'Bearer sekret' });
  t.equal(yes.status, 200);
  t.same(parseSse('data: {"a":1}\n\ndata: [DONE]\n\n'), [{ a: 1 }, '[DONE]']);
});
