// P-tuning END-TO-END, against a real server on tiny-llama: the seeds' prompt_embedding_table + prompt_vocab_size
// through HTTP generate, /infer (JSON and binary data) and gRPC on tensorrt_llm (virtual ids in input_ids), and on
// ensemble / tensorrt_llm_bls (the table's rows lead the text's tokens). The reference cannot lie: a table whose
// row i is the checkpoint's embedding of a real token t_i must give exactly what the prompt with t_i in place of the
// virtual id gives. Bad inputs are 400s (INVALID_ARGUMENT) naming the input and the numbers, and the server keeps
// serving with its KV cache free. Under mpirun (tp 2) the leader's iteration plan carries the rows to the follower.
import { join } from 'node:path';

import { type ServiceError, status } from '@grpc/grpc-js';
import t from 'tap';

import { loadTokenizer } from '../../../worker/tokenizer.js';
import { fixtureDir, readSafetensorsF32 } from '../../helpers/fixtures.js';
import { kserveClient, unary } from '../../helpers/kserve-grpc.js';
import { startServingCluster } from '../../helpers/launched-cluster.js';
import { localExecutor, postJson, recordRequests, startTestServer, waitFor } from '../../helpers/serving.js';

const MODEL = fixtureDir('tiny-llama');
const VOCAB = 512;
const HIDDEN = 64;
const embedding = readSafetensorsF32(join(MODEL, 'model.safetensors')).get('model.embed_tokens.weight')!.data;
const rowOf = (token: number) => Array.from(embedding.subarray(token * HIDDEN, (token + 1) * HIDDEN));

// Row i copies real token ROW_TOKENS[i]: VIRTUAL must then run exactly as REAL.
const ROW_TOKENS = [17, 250, 3, 99];
const TABLE = ROW_TOKENS.map(rowOf);
const VIRTUAL = [1, VOCAB + 0, 33, VOCAB + 2, VOCAB + 1, VOCAB + 3, 90];
const REAL = [1, 17, 33, 3, 250, 99, 90];

const { base, server } = await startTestServer(t, { model: MODEL, grpcPort: 0, maxBodyBytes: 4 * 1024 * 1024 });
const executor = localExecutor(server);
const seen = recordRequests(executor);
const grpc = kserveClient(t, `127.0.0.1:${server.grpcPort}`);
const tok = loadTokenizer(MODEL);

const trt = (body: Record<string, unknown>) => postJson(`${base}/v2/models/tensorrt_llm/generate`, {
  request_output_len: 6, exclude_input_in_output: true, ...body,
});
const want = (await trt({ input_ids: REAL })).json.output_ids as number[];

t.test('the inputs are declared (optional) on the three models', async (t) => {
  for (const model of ['tensorrt_llm', 'ensemble', 'tensorrt_llm_bls']) {
    const meta = await (await fetch(`${base}/v2/models/${model}`)).json() as { inputs: { name: string; datatype: string; shape: number[] }[] };
    t.same(meta.inputs.filter((i) => i.name.startsWith('prompt_')), [
      { name: 'prompt_embedding_table', datatype: 'FP16', shape: [-1, -1] }, { name: 'prompt_vocab_size', datatype: 'INT32', shape: [1] },
    ], model);
  }
});

t.test('tensorrt_llm over HTTP: virtual ids take their table rows', async (t) => {
  t.equal(want.length, 6);
  const a = await trt({ input_ids: VIRTUAL, prompt_embedding_table: TABLE, prompt_vocab_size: 4 });
  t.equal(a.status, 200, JSON.stringify(a.json));
  t.same(a.json.output_ids, want, 'generate, [rows, hidden]: the real tokens\' output');
  t.same(seen.at(-1)?.promptTuning?.shape, [4, HIDDEN], 'the executor got the table');
  const b = await trt({ input_ids: VIRTUAL, prompt_embedding_table: [TABLE] });
  t.same(b.json.output_ids, want, 'generate, [1, rows, hidden], without prompt_vocab_size');
  const inputs = [
    { name: 'input_ids', datatype: 'INT32', shape: [1, VIRTUAL.length], data: VIRTUAL },
    { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [6] },
    { name: 'prompt_embedding_table', datatype: 'FP32', shape: [1, 4, HIDDEN], data: TABLE.flat() },
    { name: 'prompt_vocab_size', datatype: 'INT32', shape: [1, 1], data: [4] },
  ];
  const c = await postJson(`${base}/v2/models/tensorrt_llm/infer`, { inputs });
  t.equal(c.status, 200, JSON.stringify(c.json));
  t.same((c.json.outputs.find((o: { name: string }) => o.name === 'output_ids').data as number[]).slice(VIRTUAL.length), want, '/infer JSON FP32');
  // FP16 and BF16 on the wire round the rows: only that they run (the values are the model's data type).
  for (const datatype of ['FP16', 'BF16'] as const) {
    const bits = datatype === 'BF16'
      ? Uint16Array.from(new Uint32Array(Float32Array.from(TABLE.flat()).buffer), (b) => b >>> 16)
      : Uint16Array.from(TABLE.flat(), () => 0x3c00);  // (1.0 everywhere)
    const bytes = Buffer.from(bits.buffer);
    const json = Buffer.from(JSON.stringify({ inputs: [...inputs.slice(0, 2),
      { name: 'prompt_embedding_table', datatype, shape: [1, 4, HIDDEN], parameters: { binary_data_size: bytes.length } }] }));
    const r = await fetch(`${base}/v2/models/tensorrt_llm/infer`, {
      method: 'POST', body: Buffer.concat([json, bytes]), headers: { 'inference-header-content-length': String(json.length) },
    });
    t.equal(r.status, 200, `/infer binary ${datatype}: ${await r.clone().text()}`);
  }
});

t.test('tensorrt_llm over gRPC: raw FP32 rows', async (t) => {
  const raw = (a: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  const response = await unary(grpc, 'ModelInfer', {
    model_name: 'tensorrt_llm',
    inputs: [
      { name: 'input_ids', datatype: 'INT32', shape: [1, VIRTUAL.length] }, { name: 'request_output_len', datatype: 'INT32', shape: [1, 1] },
      { name: 'prompt_embedding_table', datatype: 'FP32', shape: [1, 4, HIDDEN] }, { name: 'prompt_vocab_size', datatype: 'INT32', shape: [1, 1] },
    ],
    raw_input_contents: [raw(Int32Array.from(VIRTUAL)), raw(Int32Array.of(6)), raw(Float32Array.from(TABLE.flat())), raw(Int32Array.of(4))],
  });
  const ids = response.raw_output_contents[0] as Buffer;
  const out = Array.from(new Int32Array(ids.buffer.slice(ids.byteOffset, ids.byteOffset + ids.byteLength))).slice(VIRTUAL.length);
  t.same(out, want, 'the real tokens\' output');
  const e = await unary(grpc, 'ModelInfer', { model_name: 'tensorrt_llm', inputs: [
    { name: 'input_ids', datatype: 'INT32', shape: [1, 2], contents: { int_contents: [1, VOCAB + 4] } },
    { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], contents: { int_contents: [2] } },
    { name: 'prompt_embedding_table', datatype: 'FP32', shape: [4, HIDDEN], contents: { fp32_contents: TABLE.flat() } },
  ] }).then(() => undefined, (error: ServiceError) => error);
  t.equal(e?.code, status.INVALID_ARGUMENT);
  t.match(e?.details, /input_ids\[1\] = 516 is out of range \[0, 516\) \(vocab_size 512 \+ prompt_vocab_size 4/);
});

t.test('ensemble and tensorrt_llm_bls: the table\'s rows run before the text\'s tokens', async (t) => {
  const text = 'hello world';
  const before = seen.length;
  const plain = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: text, max_tokens: 5, exclude_input_in_output: true });
  t.equal(plain.status, 200);
  const textIds = seen[before]!.inputTokenIds;
  // The reference: the token model with the rows' real tokens in front of the text's.
  const ref = await trt({ input_ids: [...ROW_TOKENS, ...textIds], request_output_len: 5 });
  for (const model of ['ensemble', 'tensorrt_llm_bls']) {
    const at = seen.length;
    const r = await postJson(`${base}/v2/models/${model}/generate`, {
      text_input: text, max_tokens: 5, exclude_input_in_output: true, prompt_embedding_table: TABLE, prompt_vocab_size: 4,
    });
    t.equal(r.status, 200, JSON.stringify(r.json));
    t.same(seen[at]!.inputTokenIds, [VOCAB, VOCAB + 1, VOCAB + 2, VOCAB + 3, ...textIds], `${model}: virtual ids lead the prompt`);
    t.equal(r.json.text_output, tok.decode(ref.json.output_ids as number[]), `${model}: the text of the real tokens' run`);
  }
  const full = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: text, max_tokens: 2, prompt_embedding_table: TABLE });
  t.ok((full.json.text_output as string).startsWith(text), 'with the input in the output: the text as sent, no virtual tokens');
});

t.test('bad p-tuning inputs are 400s naming the input, and the server keeps serving', async (t) => {
  const cases: [Record<string, unknown>, RegExp, string][] = [
    [{ input_ids: VIRTUAL, prompt_embedding_table: TABLE.map((r) => r.slice(1)) },
      /^prompt_embedding_table rows have width 63 but must have the model's hidden_size 64/, 'prompt_embedding_table'],
    [{ input_ids: VIRTUAL, prompt_embedding_table: TABLE, prompt_vocab_size: 5 },
      /^prompt_vocab_size 5 does not match the 4 rows of prompt_embedding_table/, 'prompt_vocab_size'],
    [{ input_ids: [1, VOCAB + 4], prompt_embedding_table: TABLE },
      /^input_ids\[1\] = 516 is out of range \[0, 516\) \(vocab_size 512 \+ prompt_vocab_size 4/, 'input_ids'],
    [{ input_ids: VIRTUAL, prompt_embedding_table: [TABLE[0], TABLE[1]!.map((v, i) => (i === 5 ? 'NaN' : v))] },
      /^prompt_embedding_table\[1\]\[5\] must be a finite number, got "NaN"/, 'prompt_embedding_table'],
    [{ input_ids: [1, 2], prompt_vocab_size: 4 }, /^prompt_vocab_size needs prompt_embedding_table/, 'prompt_vocab_size'],
    [{ input_ids: [1, VOCAB] }, /input_ids\[1\] must be an integer in \[0, 512\) \(vocab_size\), got 512/, 'input_ids'],
    [{ input_ids: VIRTUAL, prompt_embedding_table: [1, 2, 3] },
      /^prompt_embedding_table must have shape \[prompt_vocab_size, 64\] or \[1, prompt_vocab_size, 64\]/, 'prompt_embedding_table'],
  ];
  for (const [body, pattern, field] of cases) {
    const r = await trt(body);
    t.equal(r.status, 400, `${field}: ${JSON.stringify(r.json)}`);
    t.match(r.json.error, pattern);
  }
  const wrongType = await postJson(`${base}/v2/models/tensorrt_llm/infer`, { inputs: [
    { name: 'input_ids', datatype: 'INT32', shape: [1, 2], data: [1, VOCAB] },
    { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [2] },
    { name: 'prompt_embedding_table', datatype: 'INT32', shape: [1, HIDDEN], data: new Array<number>(HIDDEN).fill(1) },
  ] });
  t.equal(wrongType.status, 400);
  t.match(wrongType.json.error, /^prompt_embedding_table must be FP16, BF16 or FP32 \(the model's data type\), got INT32/);
  const nan = Buffer.from(Float32Array.from(TABLE.flat(), (v, i) => (i === 7 ? Number.NaN : v)).buffer);
  const json = Buffer.from(JSON.stringify({ inputs: [
    { name: 'input_ids', datatype: 'INT32', shape: [1, 2], data: [1, VOCAB] },
    { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [2] },
    { name: 'prompt_embedding_table', datatype: 'FP32', shape: [4, HIDDEN], parameters: { binary_data_size: nan.length } },
  ] }));
  const binaryNan = await fetch(`${base}/v2/models/tensorrt_llm/infer`, {
    method: 'POST', body: Buffer.concat([json, nan]), headers: { 'inference-header-content-length': String(json.length) },
  });
  t.equal(binaryNan.status, 400);
  t.match(((await binaryNan.json()) as { error: string }).error, /input 'prompt_embedding_table': element 7 is NaN/);
  const textWidth = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'hi', max_tokens: 2, prompt_embedding_table: [[1, 2]] });
  t.equal(textWidth.status, 400);
  t.match(textWidth.json.error, /prompt_embedding_table rows have width 2 but must have the model's hidden_size 64/);

  // A table whose ids the prompt does not use is allowed, and changes nothing.
  const unused = await trt({ input_ids: REAL, prompt_embedding_table: TABLE });
  t.equal(unused.status, 200);
  t.same(unused.json.output_ids, want, 'an unused table: the plain output');
  t.same((await trt({ input_ids: REAL })).json.output_ids, want, 'still serving');
  t.ok(await waitFor(() => { const s = executor.kvCacheStats(); return s.freeNumBlocks === s.maxNumBlocks && executor.numActiveRequests() === 0; }),
    'the KV cache is free');
});

t.test('tp 2 under mpirun: the followers get the rows their chunks use', async (t) => {
  const cluster = await startServingCluster(t, ['--model', MODEL, '--world-size', '2', '--oversubscribe', '--threads', '1']);
  const run = (body: Record<string, unknown>) => postJson(`${cluster.base}/v2/models/tensorrt_llm/generate`, {
    request_output_len: 6, exclude_input_in_output: true, ...body,
  });
  // Each embedding row comes from one rank, the others add zeros: the grid's own real-token run is the reference.
  const real = await run({ input_ids: REAL });
  t.equal(real.status, 200, JSON.stringify(real.json));
  const virtual = await run({ input_ids: VIRTUAL, prompt_embedding_table: TABLE, prompt_vocab_size: 4 });
  t.equal(virtual.status, 200, JSON.stringify(virtual.json));
  t.same(virtual.json.output_ids, real.json.output_ids, 'virtual ids: the real tokens\' output on the grid');
  const text = await postJson(`${cluster.base}/v2/models/ensemble/generate`, { text_input: 'hello', max_tokens: 3, prompt_embedding_table: TABLE });
  t.equal(text.status, 200, JSON.stringify(text.json));
});
