// The logits budget (issue 23): what a request's logits take is decided before it runs — alone over
// --max-logits-bytes-per-request a 400 naming the option, the bytes and the fields, on every interface that returns
// logits; past --max-logits-bytes-in-flight a 503 / UNAVAILABLE while others hold it — and what a request holds is
// given back however it ends (finished, rejected by the engine, stopped, the client gone, cut by a drain). Logits
// answers are written a slice at a time; joined, the slices are exactly JSON.stringify's text. Against a real server
// on the tiny Llama (vocab 512); the executor's test hold keeps requests in flight for as long as a test looks.
import { type IncomingMessage, request as httpRequest, type ServerResponse } from 'node:http';
import { Writable } from 'node:stream';

import t from 'tap';

import { GrpcClient, type GrpcRequest } from '../../../launcher/client/grpc.js';
import type { NativeRequest } from '../../../worker/binding/addon-types.js';
import { offloaded } from '../../../worker/frontend/frontend-thread-pool.js';
import { HttpError } from '../../../worker/frontend/http-errors.js';
import { LogitsBudget, logitsCost } from '../../../worker/frontend/logits-budget.js';
import { holdsLogits, jsonPieces, sendAnswer } from '../../../worker/frontend/logits-json.js';
import { fixtureDir, referenceCases } from '../../helpers/fixtures.js';
import { localExecutor, parseSse, postJson, startTestServer, waitFor } from '../../helpers/serving.js';

const MODEL = fixtureDir('tiny-llama');
const VOCAB = 512;
const IDS = referenceCases('tiny-llama')[0]!.input_ids;            // 16 tokens
const CONTEXT_BYTES = IDS.length * VOCAB * 4;                       // 32768: the per-request limit below
const LIMITS = { maxLogitsBytesPerRequest: CONTEXT_BYTES, maxLogitsBytesInFlight: CONTEXT_BYTES * 1.5 };
const NAMES = { prompt: 'input_ids', maxTokens: 'request_output_len' };

const contextBody = (ids: number[], extra: Record<string, unknown> = {}) => ({ input_ids: ids, request_output_len: 2, return_context_logits: true, ...extra });
const grpcContext = (ids: number[], streaming = false): GrpcRequest => ({
  model: 'tensorrt_llm',
  inputs: [
    { name: 'input_ids', datatype: 'INT32', shape: [1, ids.length], data: ids },
    { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [2] },
    { name: 'return_context_logits', datatype: 'BOOL', shape: [1, 1], data: [true] },
    { name: 'streaming', datatype: 'BOOL', shape: [1, 1], data: [streaming] },
  ],
});
const settle = <T>(p: Promise<T>) => p.then((value) => ({ value }), (error: Error) => ({ error }));
const request = (n: number, output: NativeRequest['output'], beamWidth?: number): NativeRequest => ({
  inputTokenIds: Array.from({ length: n }, (_, i) => i), maxTokens: 10, output, ...(beamWidth ? { sampling: { beamWidth } } : {}),
});

t.test('the cost: prompt x vocab x 4 for context logits, max tokens x beams x vocab x 4 for generation logits, per sequence', async (t) => {
  t.same(logitsCost([request(1000, {})], 32000, NAMES), { bytes: 0, parts: [] }, 'no logits asked for: nothing');
  t.equal(logitsCost([request(1000, { returnContextLogits: true })], 32000, NAMES).bytes, 1000 * 32000 * 4);
  t.equal(logitsCost([request(5, { returnGenerationLogits: true }, 4)], 32000, NAMES).bytes, 10 * 4 * 32000 * 4, 'beams count');
  const batch = logitsCost([request(3, { returnContextLogits: true, returnGenerationLogits: true }), request(7, { returnContextLogits: true })], 100, NAMES);
  t.equal(batch.bytes, 3 * 400 + 10 * 400 + 7 * 400, 'summed over the sequences');
  t.same(batch.parts.map((p) => p.why), [
    'return_context_logits: input_ids[0] 3 tokens x vocab_size 100 x 4 bytes = 1200',
    'return_generation_logits: request_output_len[0] 10 x beam_width 1 x vocab_size 100 x 4 bytes = 4000',
    'return_context_logits: input_ids[1] 7 tokens x vocab_size 100 x 4 bytes = 2800',
  ]);
});

t.test('the budget: 400 alone over a limit, 503 while others hold it, released once; 0 is no limit', async (t) => {
  const cost = (bytes: number) => ({ bytes, parts: [{ field: 'return_context_logits' as const, bytes, why: `x = ${bytes}` }] });
  const budget = new LogitsBudget({ perRequestBytes: 100, inFlightBytes: 150 });
  const caught = (f: () => unknown) => { try { f(); } catch (e) { return e as HttpError; } return undefined; };
  const over = caught(() => budget.reserve(cost(101)));
  t.ok(over instanceof HttpError);
  t.equal(over?.status, 400);
  t.equal(over?.message, 'the logits this request asks for take 101 bytes, more than --max-logits-bytes-per-request 100: x = 101; ask for a shorter prompt, fewer tokens or no logits');
  t.equal(over?.param, 'return_context_logits');
  const a = budget.reserve(cost(100));
  t.equal(budget.inFlightBytes, 100);
  const busy = caught(() => budget.reserve(cost(60)));
  t.equal(busy?.status, 503);
  t.equal(busy?.message, 'the server\'s logits budget is in use: this request\'s logits take 60 bytes and requests in flight hold 100 of --max-logits-bytes-in-flight 150; retry when they have finished');
  const b = budget.reserve(cost(50));
  t.equal(budget.inFlightBytes, 150, 'a request that fits beside the others is admitted');
  budget.reserve(cost(0)).release();
  t.equal(budget.inFlightBytes, 150, 'a request without logits takes nothing and is never refused');
  a.release();
  a.release();
  t.equal(budget.inFlightBytes, 50, 'a lease is given back once, however often it is released');
  b.release();
  t.equal(budget.inFlightBytes, 0);

  const inFlightOnly = new LogitsBudget({ perRequestBytes: 0, inFlightBytes: 150 });
  t.match(caught(() => inFlightOnly.reserve(cost(151))), { status: 400, message: /take 151 bytes, more than --max-logits-bytes-in-flight 150/ },
    'a request that could never fit in flight is the client\'s 400, not a retry');
  const none = new LogitsBudget({ perRequestBytes: 0, inFlightBytes: 0 });
  none.reserve(cost(2 ** 40));
  t.equal(none.inFlightBytes, 2 ** 40, '0: no limit');
});

t.test('logits JSON, a slice at a time: joined it is JSON.stringify\'s text, non-finite values null', async (t) => {
  const logits = Float32Array.from({ length: 10_000 }, (_, i) => Math.sin(i) * 10 ** ((i % 20) - 10));
  logits[3] = -Infinity;
  logits[4] = NaN;
  logits[5] = -0;
  const body = { model_name: 'm', id: undefined, text_output: 'a "quoted" \u0000 text', outputs: [{ name: 'context_logits', shape: [1, 10_000], data: logits }, { name: 'n', data: [1, 2] }], batch: [Float32Array.of(1.5), null, undefined] };
  const plain = JSON.parse(JSON.stringify(body, (_k, v: unknown) => (v instanceof Float32Array ? Array.from(v) : v)));
  const pieces = [...jsonPieces(body)];
  t.ok(pieces.length > 3, `${pieces.length} pieces`);
  t.equal(pieces.join(''), JSON.stringify(plain), 'the same text');
  t.ok(holdsLogits(body));
  t.notOk(holdsLogits({ a: [1, 2, { b: 'c' }] }));
  t.equal([...jsonPieces({ a: [1] })].join(''), '{"a":[1]}', 'no logits: one piece');
  t.equal([...jsonPieces(new Float32Array(0))].join(''), '[]');
});

t.test('a logits answer lets the event loop run between slices, also when the socket takes every write at once', async (t) => {
  // A fast client's socket takes each write at once, yet says "wait for drain" past its high-water mark and drains
  // from a tick (as a net.Socket does): a writer that only waited for 'drain' would never give the event loop (other
  // requests: a health check) a turn until the whole answer was written.
  let written = '';
  const socket = new Writable({
    highWaterMark: 1024,
    write(chunk: Buffer, _encoding, done) { written += chunk.toString(); process.nextTick(done); },
  });
  const res = Object.assign(socket, { headersSent: false, writeHead() { return res; } }) as unknown as ServerResponse;
  const logits = Float32Array.from({ length: 100_000 }, (_, i) => i / 7);
  let finished = false;
  let turns = 0;
  const count = () => { if (!finished) { turns += 1; setImmediate(count); } };
  setImmediate(count);
  await sendAnswer(res, 200, { context_logits: logits });
  finished = true;
  t.ok(turns >= 10, `the event loop had ${turns} turns while the answer was written`);
  t.same(JSON.parse(written).context_logits, Array.from(logits), 'and the answer is whole');
});

t.test('a large logits tensor is printed on the frontend thread, with the same text as JSON.stringify', async (t) => {
  let written = '';
  const socket = new Writable({ write(chunk: Buffer, _encoding, done) { written += chunk.toString(); done(); } });
  const res = Object.assign(socket, { headersSent: false, writeHead() { return res; } }) as unknown as ServerResponse;
  const logits = Float32Array.from({ length: 200_003 }, (_, i) => Math.sin(i) * 1e3 / (i + 1));
  logits[3] = -Infinity;
  logits[70_000] = NaN;
  logits[140_000] = -0;
  logits[200_002] = Infinity;
  const small = Float32Array.of(0.1, -Infinity);
  const before = offloaded.print;
  await sendAnswer(res, 200, { context_logits: logits, generation_logits: small, text_output: 'x' });
  t.equal(offloaded.print - before, 13, 'thirteen slices of 16,384 values went to the thread (the small tensor did not)');
  const plain = JSON.stringify({ context_logits: Array.from(logits), generation_logits: Array.from(small), text_output: 'x' });
  t.equal(written, plain, 'the text JSON.stringify gives the same values (non-finite ones as null)');
});

t.test('over --max-logits-bytes-per-request: 400 before anything runs, on every interface that returns logits', async (t) => {
  const { server, base } = await startTestServer(t, { model: MODEL, grpcPort: 0, ...LIMITS });
  const executor = localExecutor(server);
  const budget = server.context.logitsBudget;
  const client = new GrpcClient(`127.0.0.1:${server.grpcPort}`);
  t.teardown(() => client.close());
  const longer = [...IDS, IDS[1]!];
  const message = `the logits this request asks for take ${longer.length * VOCAB * 4} bytes, more than --max-logits-bytes-per-request ${CONTEXT_BYTES}: `
    + `return_context_logits: input_ids ${longer.length} tokens x vocab_size ${VOCAB} x 4 bytes = ${longer.length * VOCAB * 4}; ask for a shorter prompt, fewer tokens or no logits`;

  const whole = await postJson(`${base}/v2/models/tensorrt_llm/generate`, contextBody(IDS));
  t.equal(whole.status, 200, 'exactly at the limit: served');
  t.equal(whole.json.context_logits.length, CONTEXT_BYTES / 4, 'with its context logits');
  t.same(await postJson(`${base}/v2/models/tensorrt_llm/generate`, contextBody(longer)), { status: 400, json: { error: message } }, 'generate');
  t.same(await postJson(`${base}/v2/models/tensorrt_llm/generate_stream`, contextBody(longer)), { status: 400, json: { error: message } }, 'generate_stream: before the stream starts');
  const infer = await postJson(`${base}/v2/models/tensorrt_llm/infer`, {
    inputs: [
      { name: 'input_ids', datatype: 'INT32', shape: [1, longer.length], data: longer },
      { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [2] },
      { name: 'return_context_logits', datatype: 'BOOL', shape: [1, 1], data: [true] },
    ],
  });
  t.same(infer, { status: 400, json: { error: message } }, 'infer');
  t.match(await settle(client.infer(grpcContext(longer))), { error: { message: `127.0.0.1:${server.grpcPort} ModelInfer answered INVALID_ARGUMENT: ${message}` } }, 'gRPC ModelInfer');
  const call = client.stream();
  call.send(grpcContext(longer, true));
  call.end();
  const streamed = await settle((async () => { for await (const r of call.responses) void r; })());
  t.match(streamed, { error: { message: `ModelStreamInfer request "" failed: ${message}` } }, 'gRPC ModelStreamInfer: in-band');

  const text = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'What is', max_tokens: 17, return_generation_logits: true });
  t.equal(text.status, 400, 'the text models: generation logits of max_tokens');
  t.match(text.json.error, /take 34816 bytes, more than --max-logits-bytes-per-request 32768: return_generation_logits: max_tokens 17 x beam_width 1 x vocab_size 512 x 4 bytes = 34816;/);
  const batch = await postJson(`${base}/v2/models/tensorrt_llm/generate`, {
    input_ids: [IDS.slice(0, 8), IDS.slice(8, 16)], input_lengths: [8, 8], request_output_len: 2, return_context_logits: true, return_generation_logits: true,
  });
  t.equal(batch.status, 400, 'a batch: its rows together');
  t.match(batch.json.error, /take 40960 bytes.*input_ids\[0\] 8 tokens.*request_output_len\[0\] 2 x .*input_ids\[1\] 8 tokens.*request_output_len\[1\] 2 x /);
  t.equal(executor.numActiveRequests(), 0, 'none of them ran');
  t.equal(budget.inFlightBytes, 0, 'and none holds budget');
});

t.test('past --max-logits-bytes-in-flight: 503 / UNAVAILABLE while others hold it; served once they have finished', async (t) => {
  const { server, base } = await startTestServer(t, { model: MODEL, grpcPort: 0, ...LIMITS });
  const executor = localExecutor(server);
  const budget = server.context.logitsBudget;
  const client = new GrpcClient(`127.0.0.1:${server.grpcPort}`);
  t.teardown(() => client.close());

  executor.holdIterations(0);
  const first = postJson(`${base}/v2/models/tensorrt_llm/generate`, contextBody(IDS));
  t.ok(await waitFor(() => budget.inFlightBytes === CONTEXT_BYTES), 'the first request holds its logits\' bytes');
  const busy = `the server's logits budget is in use: this request's logits take ${CONTEXT_BYTES} bytes and requests in flight hold ${CONTEXT_BYTES} of --max-logits-bytes-in-flight ${CONTEXT_BYTES * 1.5}; retry when they have finished`;
  t.same(await postJson(`${base}/v2/models/tensorrt_llm/generate`, contextBody(IDS)), { status: 503, json: { error: busy } }, 'HTTP: 503 naming the option');
  t.match(await settle(client.infer(grpcContext(IDS))), { error: { message: `127.0.0.1:${server.grpcPort} ModelInfer answered UNAVAILABLE: ${busy}` } }, 'gRPC: UNAVAILABLE');
  const small = postJson(`${base}/v2/models/tensorrt_llm/generate`, contextBody(IDS.slice(0, 8)));
  t.ok(await waitFor(() => budget.inFlightBytes === CONTEXT_BYTES * 1.5), 'a smaller one that fits beside it is admitted');
  t.equal(executor.numActiveRequests(), 2, 'the refused ones never reached the executor');

  executor.holdIterations(-1);
  t.equal((await first).status, 200);
  t.equal((await small).status, 200);
  t.ok(await waitFor(() => budget.inFlightBytes === 0), 'both finished: nothing held');
  t.equal((await postJson(`${base}/v2/models/tensorrt_llm/generate`, contextBody(IDS))).status, 200, 'the same request now runs');
  t.equal(budget.inFlightBytes, 0);
});

t.test('the budget is given back however a request ends', async (t) => {
  const { server, base } = await startTestServer(t, { model: MODEL, grpcPort: 0, ...LIMITS });
  const executor = localExecutor(server);
  const budget = server.context.logitsBudget;
  const client = new GrpcClient(`127.0.0.1:${server.grpcPort}`);
  t.teardown(() => client.close());
  const idle = () => budget.inFlightBytes === 0 && executor.numActiveRequests() === 0;

  t.test('finished, on a stream (generate_stream, ModelStreamInfer) and whole (infer, ModelInfer)', async (t) => {
    const res = await fetch(`${base}/v2/models/tensorrt_llm/generate_stream`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(contextBody(IDS)) });
    const events = parseSse(await res.text());
    t.equal(events.filter((e) => e.context_logits !== undefined)[0].context_logits.length, CONTEXT_BYTES / 4);
    t.ok(await waitFor(idle), 'generate_stream');
    const call = client.stream();
    call.send(grpcContext(IDS, true));
    call.end();
    const streamed: number[] = [];
    for await (const r of call.responses) streamed.push(...(r.outputs.find((o) => o.name === 'context_logits')?.data as number[] ?? []));
    t.ok(await waitFor(idle), 'ModelStreamInfer');
    const unary = await client.infer(grpcContext(IDS));
    const raw = unary.outputs.find((o) => o.name === 'context_logits')!;
    t.same(raw.shape, [1, IDS.length, VOCAB], 'ModelInfer: [batch, prompt, vocab]');
    t.same(streamed, raw.data, 'the same logits on both gRPC calls');
    const json = await postJson(`${base}/v2/models/tensorrt_llm/infer`, {
      inputs: [
        { name: 'input_ids', datatype: 'INT32', shape: [1, IDS.length], data: IDS },
        { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [2] },
        { name: 'return_context_logits', datatype: 'BOOL', shape: [1, 1], data: [true] },
      ],
      outputs: [{ name: 'context_logits' }],
    });
    t.same(json.json.outputs[0].data, raw.data, 'HTTP infer\'s JSON numbers are the very float32 values of the raw gRPC bytes');
    t.ok(await waitFor(idle), 'infer and ModelInfer');

    // Triton's binary tensor data extension: logits as their 4-byte values after the JSON, not as text.
    const inputs = [
      { name: 'input_ids', datatype: 'INT32', shape: [1, IDS.length], data: IDS },
      { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [2] },
      { name: 'return_context_logits', datatype: 'BOOL', shape: [1, 1], data: [true] },
    ];
    const binary = await fetch(`${base}/v2/models/tensorrt_llm/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({
      inputs, outputs: [{ name: 'context_logits', parameters: { binary_data: true } }, { name: 'sequence_length' }],
    }) });
    t.equal(binary.headers.get('content-type'), 'application/octet-stream');
    const bytes = Buffer.from(await binary.arrayBuffer());
    const headerLength = Number(binary.headers.get('inference-header-content-length'));
    const header = JSON.parse(bytes.subarray(0, headerLength).toString());
    t.same(header.outputs, [
      { name: 'sequence_length', datatype: 'INT32', shape: [1, 1], data: [IDS.length + 2] },
      { name: 'context_logits', datatype: 'FP32', shape: [1, IDS.length, VOCAB], parameters: { binary_data_size: CONTEXT_BYTES } },
    ], 'the JSON names the binary output\'s size; the other output keeps its data');
    t.equal(bytes.length, headerLength + CONTEXT_BYTES, 'the logits\' bytes follow the JSON');
    const values = new Float32Array(bytes.buffer.slice(bytes.byteOffset + headerLength, bytes.byteOffset + bytes.length));
    t.same(Array.from(values), raw.data, 'the same float32 values');
    const everything = await fetch(`${base}/v2/models/tensorrt_llm/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ inputs, parameters: { binary_data_output: true } }) });
    const all = Buffer.from(await everything.arrayBuffer());
    const allHeader = JSON.parse(all.subarray(0, Number(everything.headers.get('inference-header-content-length'))).toString());
    t.ok(allHeader.outputs.length > 1 && allHeader.outputs.every((o: { parameters?: { binary_data_size?: number }; data?: unknown }) => o.parameters?.binary_data_size !== undefined && o.data === undefined),
      'binary_data_output: every output as binary data');
    t.same(await postJson(`${base}/v2/models/tensorrt_llm/infer`, { inputs, outputs: [{ name: 'context_logits', parameters: { binary_data: 'yes' } }] }),
      { status: 400, json: { error: 'outputs[0].parameters.binary_data must be a boolean, got "yes" (string)' } });
    t.ok(await waitFor(idle), 'binary answers too');
  });

  t.test('rejected by the engine after the budget admitted it', async (t) => {
    const r = await postJson(`${base}/v2/models/tensorrt_llm/generate`, contextBody(IDS, { beam_width: 2 }));
    t.equal(r.status, 400);
    t.match(r.json.error, /beam_width/);
    t.equal(budget.inFlightBytes, 0, 'given back at once');
  });

  t.test('stopped by its id', async (t) => {
    executor.holdIterations(0);
    const running = postJson(`${base}/v2/models/tensorrt_llm/generate`, contextBody(IDS, { id: 'logits-1', request_output_len: 50, end_id: -1 }));
    t.ok(await waitFor(() => budget.inFlightBytes === CONTEXT_BYTES));
    t.equal((await postJson(`${base}/v2/models/tensorrt_llm/generate`, { id: 'logits-1', stop: true })).status, 200);
    executor.holdIterations(-1);
    await running;
    t.ok(await waitFor(idle), 'nothing held, nothing running');
  });

  t.test('the client gone (HTTP disconnect, gRPC call cancelled)', async (t) => {
    executor.holdIterations(0);
    const aborter = new AbortController();
    const gone = settle(fetch(`${base}/v2/models/tensorrt_llm/generate_stream`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(contextBody(IDS, { request_output_len: 50, end_id: -1 })), signal: aborter.signal })
      .then((res) => res.text()));
    t.ok(await waitFor(() => budget.inFlightBytes === CONTEXT_BYTES));
    aborter.abort();
    await gone;
    t.ok(await waitFor(() => executor.numActiveRequests() === 0), 'the engine request is cancelled');
    t.ok(await waitFor(idle), 'HTTP: given back');
    const grpcAborter = new AbortController();
    const cancelled = settle(client.infer(grpcContext(IDS), grpcAborter.signal));
    t.ok(await waitFor(() => budget.inFlightBytes === CONTEXT_BYTES));
    grpcAborter.abort();
    await cancelled;
    t.ok(await waitFor(idle), 'gRPC: given back');
    executor.holdIterations(-1);
  });
});

t.test('a client that does not read: the budget is held until its answer is written, not only until the engine is done', async (t) => {
  const { server, base } = await startTestServer(t, { model: MODEL });
  const executor = localExecutor(server);
  const budget = server.context.logitsBudget;
  // 16 rows x 250 tokens x 512 values: 2M logits, ~38 MB of JSON, far more than the sockets' buffers hold.
  const rows = 16;
  const body = JSON.stringify({
    input_ids: Array.from({ length: rows }, (_, i) => [IDS[i]!]), request_output_len: 250, end_id: -1, return_generation_logits: true,
  });
  let bytes = 0;
  const answered = new Promise<IncomingMessage>((resolve, reject) => {
    const req = httpRequest(`${base}/v2/models/tensorrt_llm/generate`, { method: 'POST' }, (res) => {
      res.pause();
      resolve(res);
    });
    req.on('error', reject);
    req.end(body);
  });
  const res = await answered;
  t.equal(res.statusCode, 200, 'the answer has begun');
  t.ok(await waitFor(() => executor.numActiveRequests() === 0), 'the engine is done');
  t.equal(budget.inFlightBytes, rows * 250 * VOCAB * 4, 'and the answer, unread, still holds the budget');
  const read = new Promise<void>((resolve) => {
    res.on('data', (chunk: Buffer) => { bytes += chunk.length; });
    res.on('end', resolve);
  });
  res.resume();
  await read;
  t.ok(bytes > 20_000_000, `${bytes} bytes read`);
  t.ok(await waitFor(() => budget.inFlightBytes === 0), 'written: given back');
});

t.test('cut by a drain: given back', async (t) => {
  const { server, base } = await startTestServer(t, { model: MODEL, drainTimeoutMs: 50, ...LIMITS });
  const executor = localExecutor(server);
  const budget = server.context.logitsBudget;
  executor.holdIterations(0, { throughDrain: true });
  const running = postJson(`${base}/v2/models/tensorrt_llm/generate`, contextBody(IDS, { request_output_len: 50, end_id: -1 }));
  t.ok(await waitFor(() => budget.inFlightBytes === CONTEXT_BYTES));
  await server.close('SIGTERM');
  t.equal((await running).status, 503, 'cut at the drain deadline');
  t.equal(budget.inFlightBytes, 0, 'nothing held once the server has drained');
});
