// Issue 23: one client must never stall, starve or hurt the server. Over real HTTP and gRPC on the tiny GPT-2: a
// request that would fan out past the max batch size is a 400 naming the count, and a prompt too long in bytes to
// fit the model is a 400 naming its size — both answered while the tokenizer pool is held, so neither can have
// tokenized anything. A maximal prompt that must be tokenized (a tokenizer with no byte bound) is tokenized in a
// pool thread, held there, while health checks and other requests are answered; only then is it released. No step
// waits on time: the pool's test hold orders them.
import { copyFileSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { credentials, type Client, Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { loadPackageDefinition, type ServiceClientConstructor } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import t from 'tap';

import { packageRoot } from '../../../worker/common/package-root.js';
import type { RunningServer } from '../../../worker/serve.js';
import { loadTokenizer } from '../../../worker/tokenizer.js';
import { fixtureDir } from '../../helpers/fixtures.js';
import { postJson, startTestServer, waitFor } from '../../helpers/serving.js';
import { tempDir } from '../../helpers/temp-dir.js';

const MODEL = fixtureDir('tiny-gpt2');
const BODY_LIMIT = 1024 * 1024;   // --max-body-bytes of these servers

const definition = loadSync(join(packageRoot(), 'worker', 'frontend', 'grpc', 'kserve-v2.proto'),
  { keepCase: true, longs: Number, enums: String, bytes: Buffer, defaults: true, oneofs: true });
const Service = (loadPackageDefinition(definition) as any).inference.GRPCInferenceService as ServiceClientConstructor;
type AnyClient = Client & Record<string, any>;

function grpcClient(t: { teardown(fn: () => unknown): void }, server: RunningServer): AnyClient {
  const client = new Service(`127.0.0.1:${server.grpcPort}`, credentials.createInsecure(),
    { 'grpc.max_send_message_length': -1 }) as AnyClient;
  t.teardown(() => client.close());
  return client;
}

function unary(c: AnyClient, method: string, req: unknown): Promise<any> {
  return new Promise((resolve, reject) => c[method](req, new Metadata(), (e: ServiceError | null, r: unknown) => (e ? reject(e) : resolve(r))));
}

/** ModelInfer on ensemble with these prompts: the call's error, or the answer. */
function inferText(c: AnyClient, prompts: string[]): Promise<ServiceError | { ok: true }> {
  return unary(c, 'ModelInfer', {
    model_name: 'ensemble',
    inputs: [
      { name: 'text_input', datatype: 'BYTES', shape: [prompts.length, 1], contents: { bytes_contents: prompts.map((p) => Buffer.from(p)) } },
      { name: 'max_tokens', datatype: 'INT32', shape: [prompts.length, 1], contents: { int_contents: prompts.map(() => 1) } },
    ],
  }).then(() => ({ ok: true as const }), (e: ServiceError) => e);
}

/** One request on a ModelStreamInfer call (half-closed at once): its first response. */
function streamOne(c: AnyClient, prompts: string[]): Promise<any> {
  const call = c.ModelStreamInfer();
  const first = new Promise((resolve, reject) => {
    call.once('data', resolve);
    call.once('error', reject);
  });
  call.write({
    model_name: 'ensemble',
    inputs: [
      { name: 'text_input', datatype: 'BYTES', shape: [prompts.length, 1], contents: { bytes_contents: prompts.map((p) => Buffer.from(p)) } },
      { name: 'max_tokens', datatype: 'INT32', shape: [prompts.length, 1], contents: { int_contents: prompts.map(() => 1) } },
    ],
  });
  call.end();
  return first;
}

/** A promise with a flag saying whether it has settled yet. */
function tracked<T>(promise: Promise<T>): { promise: Promise<T>; settled: () => boolean } {
  let done = false;
  const p = promise.finally(() => { done = true; });
  return { promise: p, settled: () => done };
}

t.test('fan-out over the max batch size: a 400 naming the count, before anything is tokenized', async (t) => {
  const { base, server } = await startTestServer(t, { maxBatchSize: 4, grpcPort: 0 });
  const pool = server.context.tokenizerPool;
  const client = grpcClient(t, server);
  // Held: a request that tokenized anything would wait here, unanswered.
  pool.holdTasks();
  t.teardown(() => pool.releaseTasks());

  const many = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt: Array.from({ length: 500 }, (_, i) => `prompt ${i}`), n: 16, max_tokens: 1 });
  t.equal(many.status, 400);
  t.same(many.json.error, {
    message: "500 prompts × n=16 = 8000 sequences exceeds the model's max batch size 4 (--max-batch-size)",
    type: 'BadRequestError', param: 'prompt', code: 400,
  });
  const choices = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt: 'one', n: 5, max_tokens: 1 });
  t.equal(choices.json.error.message, "1 prompt × n=5 = 5 sequences exceeds the model's max batch size 4 (--max-batch-size)");
  t.equal(choices.json.error.param, 'n');
  const ids = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt: [[1, 2], [3], [4], [5], [6]], max_tokens: 1 });
  t.match(ids.json.error.message, /^5 prompts × n=1 = 5 sequences exceeds/, 'prompts as id lists count the same');
  const huge = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt: Array.from({ length: 50_000 }, () => 'x'), max_tokens: 1 });
  t.match(huge.json.error.message, /^50000 prompts × n=1 = 50000 sequences exceeds the model's max batch size 4/, '50,000 prompts: counted, not read');

  const generate = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: ['a', 'b', 'c', 'd', 'e'], max_tokens: 1 });
  t.equal(generate.status, 400);
  t.same(generate.json, { error: "text_input's batch of 5 prompts exceeds the model's max batch size 4 (--max-batch-size)" });
  const infer = await postJson(`${base}/v2/models/ensemble/infer`, { inputs: [
    { name: 'text_input', datatype: 'BYTES', shape: [5, 1], data: ['a', 'b', 'c', 'd', 'e'] },
    { name: 'max_tokens', datatype: 'INT32', shape: [5, 1], data: [1, 1, 1, 1, 1] },
  ] });
  t.match(infer, { status: 400, json: { error: /text_input's batch of 5 prompts exceeds/ } });
  const tokens = await postJson(`${base}/v2/models/tensorrt_llm/infer`, { inputs: [
    { name: 'input_ids', datatype: 'INT32', shape: [5, 2], data: [1, 2, 1, 2, 1, 2, 1, 2, 1, 2] },
    { name: 'request_output_len', datatype: 'INT32', shape: [5, 1], data: [1, 1, 1, 1, 1] },
  ] });
  t.match(tokens, { status: 400, json: { error: /input_ids' batch of 5 rows exceeds the model's max batch size 4/ } });
  const pre = await postJson(`${base}/v2/models/preprocessing/infer`, { inputs: [
    { name: 'QUERY', datatype: 'BYTES', shape: [5, 1], data: ['a', 'b', 'c', 'd', 'e'] },
    { name: 'REQUEST_OUTPUT_LEN', datatype: 'INT32', shape: [5, 1], data: [1, 1, 1, 1, 1] },
  ] });
  t.match(pre, { status: 400, json: { error: /QUERY's batch of 5 queries exceeds/ } });
  const post = await postJson(`${base}/v2/models/postprocessing/infer`, { inputs: [
    { name: 'TOKENS_BATCH', datatype: 'INT32', shape: [5, 1, 1], data: [1, 2, 3, 4, 5] },
  ] });
  t.match(post, { status: 400, json: { error: /TOKENS_BATCH's batch of 5 exceeds/ } });
  const grpc = await inferText(client, ['a', 'b', 'c', 'd', 'e']) as ServiceError;
  t.equal(grpc.code, status.INVALID_ARGUMENT);
  t.match(grpc.details, /text_input's batch of 5 prompts exceeds the model's max batch size 4/);
  t.equal(server.context.executor.numActiveRequests(), 0, 'nothing reached the executor');

  pool.releaseTasks();
  const four = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: ['a', 'b', 'c', 'd'], max_tokens: 1 });
  t.equal(four.status, 200, 'a batch of exactly the max batch size is served');
  const twoByTwo = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt: ['a', 'b'], n: 2, max_tokens: 1 });
  t.equal(twoByTwo.json.choices.length, 4, '2 prompts × n=2 fit');
});

t.test('a prompt too long in bytes for the model: a 400 naming its size, before anything is tokenized', async (t) => {
  const { base, server } = await startTestServer(t, { grpcPort: 0, maxBodyBytes: BODY_LIMIT });
  const pool = server.context.tokenizerPool;
  const client = grpcClient(t, server);
  // tiny-gpt2: max_seq_len 128 leaves 127 prompt tokens; its longest token ("Ġcopyright") is 10 bytes.
  t.same(server.context.tokenizer.byteBound, { bytesPerToken: 10 });
  const why = 'at most 127 tokens \\(max_seq_len 128 less one output token\\) of at most 10 bytes each \\(the most text one of this tokenizer\'s tokens stands for\\) is 1270 bytes';
  pool.holdTasks();
  t.teardown(() => pool.releaseTasks());

  const over = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt: 'é'.repeat(700), max_tokens: 1 });
  t.equal(over.status, 400);
  t.match(over.json.error.message, new RegExp(`^prompt is 1400 bytes of UTF-8, more than any prompt this model takes: ${why}$`), '700 characters, 1400 bytes');
  t.equal(over.json.error.param, 'prompt');
  const maximal = 'a'.repeat(BODY_LIMIT - 100);
  const body = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt: maximal, max_tokens: 1 });
  t.match(body.json.error.message, new RegExp(`^prompt is at least ${maximal.length} bytes of UTF-8 \\(${maximal.length} characters\\), more than any prompt this model takes: ${why}$`), 'a maximal body');
  const second = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt: ['fine', 'b'.repeat(1271)], max_tokens: 1 });
  t.match(second.json.error.message, /^prompt\[1\] is at least 1271 bytes of UTF-8 \(1271 characters\)/, 'the prompt of a list is named');
  t.ok(server.context.chatTemplate, 'the fixture has a chat template');
  const chat = await postJson(`${base}/v1/chat/completions`, { model: 'tiny-gpt2', messages: [{ role: 'user', content: 'c'.repeat(5000) }] });
  t.equal(chat.status, 400);
  t.match(chat.json.error.message, /^messages \(as the chat template renders them\) is at least \d+ bytes/, 'chat: the rendered prompt');
  t.equal(chat.json.error.param, 'messages');
  const generate = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: ['ok', 'd'.repeat(2000)], max_tokens: 1 });
  t.equal(generate.status, 400);
  t.match(generate.json.error, /^text_input\[1\] is at least 2000 bytes of UTF-8 \(2000 characters\)/);
  const pre = await postJson(`${base}/v2/models/preprocessing/infer`, { inputs: [
    { name: 'QUERY', datatype: 'BYTES', shape: [1, 1], data: ['q'.repeat(3000)] },
    { name: 'REQUEST_OUTPUT_LEN', datatype: 'INT32', shape: [1, 1], data: [1] },
  ] });
  t.match(pre, { status: 400, json: { error: /^QUERY is at least 3000 bytes/ } });
  const grpc = await inferText(client, ['g'.repeat(BODY_LIMIT - 1000)]) as ServiceError;
  t.equal(grpc.code, status.INVALID_ARGUMENT, 'gRPC ModelInfer: INVALID_ARGUMENT');
  t.match(grpc.details, /^text_input is at least \d+ bytes of UTF-8 \(\d+ characters\), more than any prompt this model takes/);
  const streamed = await streamOne(client, ['h'.repeat(5000)]);
  t.match(streamed, { error_message: /^text_input is at least 5000 bytes of UTF-8/ }, 'ModelStreamInfer: failed in-band');
  t.equal(server.context.executor.numActiveRequests(), 0, 'nothing reached the executor');

  // Within the byte bound but over the token limit: tokenized (in the pool), then refused by its count.
  pool.releaseTasks();
  const spaced = 'a '.repeat(600);
  const count = loadTokenizer(MODEL).encode(spaced).length;
  t.ok(count > 127 && Buffer.byteLength(spaced) <= 1270, `${count} tokens in ${Buffer.byteLength(spaced)} bytes`);
  const tooMany = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt: spaced, max_tokens: 1 });
  t.equal(tooMany.json.error.message, `prompt is ${count} tokens, more than any prompt this model takes: at most 127 (max_seq_len 128 less one output token)`);
  const idPrompt = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt: new Array(200).fill(5), max_tokens: 1, echo: true });
  t.equal(idPrompt.json.error.message, 'prompt has 200 token ids, more than any prompt this model takes: at most 127 (max_seq_len 128 less one output token)');
  const echo = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt: [loadTokenizer(MODEL).encode('What is')], max_tokens: 1, echo: true });
  t.ok(echo.json.choices[0].text.startsWith('What is'), 'an id prompt is decoded (in the pool) for echo');
});

/** tiny-gpt2 with a normalizer that can delete text (Strip): its tokenizer has no byte bound, so a maximal prompt
 * must be tokenized to be judged — the case where tokenizing off the event loop is what keeps the server answering. */
function unboundedModel(t: { teardown(fn: () => unknown): void }): string {
  const dir = tempDir('bounded-work-', t);
  for (const file of ['config.json', 'generation_config.json', 'tokenizer_config.json']) copyFileSync(join(MODEL, file), join(dir, file));
  symlinkSync(join(MODEL, 'model.safetensors'), join(dir, 'model.safetensors'));
  const tokenizer = JSON.parse(readFileSync(join(MODEL, 'tokenizer.json'), 'utf8'));
  tokenizer.normalizer = { type: 'Strip', strip_left: false, strip_right: true };
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tokenizer));
  return dir;
}

t.test('a maximal prompt is tokenized in a pool thread: health and other requests are answered meanwhile', async (t) => {
  const { base, server } = await startTestServer(t, { model: unboundedModel(t), grpcPort: 0, maxBodyBytes: BODY_LIMIT });
  const pool = server.context.tokenizerPool;
  const client = grpcClient(t, server);
  t.match(server.context.tokenizer.byteBound.why, /normalizer Strip can delete text/, 'no byte bound: only tokenizing can judge it');
  const maximal = 'machine learning '.repeat(Math.floor((BODY_LIMIT - 200) / 17));

  pool.holdTasks();
  t.teardown(() => pool.releaseTasks());
  const big = tracked(postJson(`${base}/v1/completions`, { model: server.context.servedModelName, prompt: maximal, max_tokens: 1 }));
  // The prompt is in a tokenizer thread, held there: tokenizing it cannot be what the main thread is doing.
  await pool.awaitHeldTask();
  t.equal((await fetch(`${base}/v2/health/ready`)).status, 200, '/v2/health/ready answered');
  t.equal((await fetch(`${base}/v2/health/live`)).status, 200, '/v2/health/live answered');
  t.same(await unary(client, 'ServerReady', {}), { ready: true }, 'gRPC ServerReady answered');
  const other = await postJson(`${base}/v2/models/tensorrt_llm/generate`, { input_ids: [1, 2, 3], request_output_len: 2 });
  t.equal(other.status, 200, 'another client\'s request (token ids: nothing to tokenize) is served');
  t.equal(big.settled(), false, 'all before the maximal request is answered');
  pool.releaseTasks();
  // Then it is judged by its token count, counted in the thread.
  const refused = await big.promise;
  t.equal(refused.status, 400);
  t.match(refused.json.error.message, /^prompt is \d+ tokens, more than any prompt this model takes: at most 127/);

  // gRPC ModelInfer the same way.
  pool.holdTasks();
  const grpcBig = tracked(inferText(client, [maximal.slice(0, BODY_LIMIT / 2)]));
  await pool.awaitHeldTask();
  t.equal((await fetch(`${base}/v2/health/ready`)).status, 200, 'health answered while a gRPC prompt is held in the pool');
  t.equal(grpcBig.settled(), false, 'before the gRPC request is answered');
  pool.releaseTasks();
  const grpcRefused = await grpcBig.promise as ServiceError;
  t.equal(grpcRefused.code, status.INVALID_ARGUMENT);
  t.match(grpcRefused.details, /^text_input is \d+ tokens, more than any prompt this model takes/);
});

t.test('a drain lets requests still being tokenized finish, and refuses new ones', async (t) => {
  const { base, server } = await startTestServer(t, { drainTimeoutMs: 600_000 });
  const pool = server.context.tokenizerPool;
  pool.holdTasks();
  t.teardown(() => pool.releaseTasks());
  // Both pass the readiness check, then wait in the pool.
  const kserve = postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'What is machine learning?', max_tokens: 3 });
  const openai = tracked(postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt: 'What is machine learning?', max_tokens: 3 }));
  t.ok(await waitFor(() => pool.jobs === 2), 'both are in the pool');
  const closed = server.close('test drain');
  const late = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'too late', max_tokens: 3 });
  t.equal(late.status, 503, 'a new request is refused');
  t.match(late.json.error, /draining \(test drain\)/);
  const lateOpenAi = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt: 'too late', max_tokens: 3 });
  t.equal(lateOpenAi.status, 503, 'on /v1 too');
  t.equal(openai.settled(), false, 'the admitted OpenAI request is still waiting for the pool');
  pool.releaseTasks();
  const first = await kserve;
  t.equal(first.status, 200, 'the admitted KServe request is served');
  t.ok(first.json.text_output.startsWith('What is machine learning?'));
  const second = await openai.promise;
  t.equal(second.status, 200, 'the admitted OpenAI request is served, not refused after its tokenizing');
  t.equal(second.json.choices[0].finish_reason, 'length');
  await closed;
});
