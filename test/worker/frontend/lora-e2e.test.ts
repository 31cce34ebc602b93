// END-TO-END, against a real server on tiny-llama with LoRA adapters THIS TEST WRITES (test/helpers/lora-adapter.ts:
// a PEFT directory in f32 and the same adapter as TensorRT-LLM's request tensors) — no recorded numeric references.
// It asserts what holds whatever the adapter computes: the server starts with --lora-modules and lists the adapter
// in /v1/models under its base; OpenAI requests naming the adapter, the base and neither reach the engine as they
// should; KServe's lora_task_id alone and with lora_weights + lora_config (JSON, HTTP binary data, gRPC raw bytes,
// FP32 / BF16) run, are cached by task id, and bad inputs are 400s naming the field; an uncached task id and LoRA on
// a server without it get the engine's 400. Two relations need no reference: the adapter sent as tensors and read
// from its directory give the same greedy tokens, and an adapter whose B is zero gives the base model's.
import { join } from 'node:path';

import { type ServiceError, status } from '@grpc/grpc-js';
import { execa } from 'execa';
import t from 'tap';

import { packageRoot } from '../../../worker/common/package-root.js';
import { startServer } from '../../../worker/serve.js';
import { fixtureDir } from '../../helpers/fixtures.js';
import { kserveClient, unary } from '../../helpers/kserve-grpc.js';
import { type TinyAdapter, writeTinyLlamaAdapter } from '../../helpers/lora-adapter.js';
import { localExecutor, postJson, recordRequests, startTestServer } from '../../helpers/serving.js';
import { tempDir } from '../../helpers/temp-dir.js';

const MODEL = fixtureDir('tiny-llama');
const dir = tempDir('lora-e2e-');
const strong = writeTinyLlamaAdapter(dir, 'strong', { seed: 7, scale: 0.5 });
const zero = writeTinyLlamaAdapter(dir, 'zero', { seed: 9, scale: 0 });
const PROMPT = [1, 17, 33, 90, 4, 250];

// The server: the two adapters preloaded (task ids 1 and 2), gRPC on, every request the executor gets recorded.
const { base, server } = await startTestServer(t, {
  model: MODEL, grpcPort: 0, loraModules: [`strong=${strong.dir}`, `zero=${zero.dir}`], maxBodyBytes: 8 * 1024 * 1024,
});
const executor = localExecutor(server);
const seen = recordRequests(executor);
const grpc = kserveClient(t, `127.0.0.1:${server.grpcPort}`);

const tensor = (name: string, datatype: string, shape: number[], data: unknown[]) => ({ name, datatype, shape, data });
const loraTensors = (a: TinyAdapter) => [
  tensor('lora_weights', 'FP32', [1, ...a.weightsShape], Array.from(a.weights)),
  tensor('lora_config', 'INT32', [1, ...a.configShape], Array.from(a.config)),
];

/** Greedy output ids of the token model for PROMPT, through /infer with the given extra inputs. */
async function infer(extra: unknown[]): Promise<{ status: number; ids: number[]; message: string }> {
  const r = await postJson(`${base}/v2/models/tensorrt_llm/infer`, { inputs: [
    tensor('input_ids', 'INT32', [1, PROMPT.length], PROMPT), tensor('request_output_len', 'INT32', [1, 1], [8]), ...extra,
  ] });
  const ids = r.status === 200 ? (r.json.outputs.find((o: { name: string }) => o.name === 'output_ids').data as number[]).slice(PROMPT.length) : [];
  return { status: r.status, ids, message: r.status === 200 ? '' : r.json.error };
}

t.test('/v1/models lists each adapter under its base; GET /v1/models/{adapter} too', async (t) => {
  const models = await (await fetch(`${base}/v1/models`)).json() as { data: Record<string, unknown>[] };
  t.same(models.data.map((m) => m.id), ['tiny-llama', 'strong', 'zero']);
  t.match(models.data[1], { id: 'strong', object: 'model', owned_by: 'trtllm-launch', root: strong.dir, parent: 'tiny-llama' });
  t.match(await (await fetch(`${base}/v1/models/zero`)).json(), { id: 'zero', parent: 'tiny-llama', root: zero.dir });
  t.equal((await fetch(`${base}/v1/models/nope`)).status, 404);
});

t.test('OpenAI: "model" names the adapter (its task id), the base, or nothing served', async (t) => {
  for (const [model, lora] of [['strong', { taskId: 1 }], ['zero', { taskId: 2 }], ['tiny-llama', undefined]] as const) {
    const before = seen.length;
    const r = await postJson(`${base}/v1/completions`, { model, prompt: 'hello', max_tokens: 3, temperature: 0 });
    t.equal(r.status, 200, `${model}: served ${JSON.stringify(r.json)}`);
    t.equal(r.json.model, model, 'the answer names the model asked for');
    t.same(seen.slice(before).map((q) => q.lora), [lora], `${model}: the executor's request`);
  }
  const chat = await postJson(`${base}/v1/chat/completions`, { model: 'strong', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
  t.not(chat.status, 404, 'chat resolves the adapter too (the fixture may have no chat template: 400 then)');
  const r = await postJson(`${base}/v1/completions`, { model: 'nope', prompt: 'hello', max_tokens: 3 });
  t.equal(r.status, 404);
  t.equal(r.json.error.message, 'The model `nope` does not exist; this server serves `tiny-llama` and its LoRA adapters `strong`, `zero`');
});

t.test('KServe: lora_task_id alone runs a preloaded adapter, in every text and token model', async (t) => {
  const before = seen.length;
  const g = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'hello', max_tokens: 2, lora_task_id: 1 });
  t.equal(g.status, 200, JSON.stringify(g.json));
  const b = await postJson(`${base}/v2/models/tensorrt_llm_bls/generate`, { text_input: 'hello', max_tokens: 2, lora_task_id: 2 });
  t.equal(b.status, 200, JSON.stringify(b.json));
  const i = await infer([tensor('lora_task_id', 'UINT64', [1, 1], [1])]);
  t.equal(i.status, 200, i.message);
  t.same(seen.slice(before).map((q) => q.lora), [{ taskId: 1 }, { taskId: 2 }, { taskId: 1 }]);
});

t.test('an adapter sent as tensors equals the same adapter read from its directory; a zero one equals the base', async (t) => {
  const baseIds = (await infer([])).ids;
  const fromDir = await infer([tensor('lora_task_id', 'INT64', [1, 1], [1])]);
  const sent = await infer([tensor('lora_task_id', 'UINT64', [1, 1], [101]), ...loraTensors(strong)]);
  t.equal(sent.status, 200, sent.message);
  t.equal(sent.ids.length, 8);
  t.same(sent.ids, fromDir.ids, 'the two sources of one adapter run the same numbers');
  const cached = await infer([tensor('lora_task_id', 'INT32', [1, 1], [101])]);
  t.equal(cached.status, 200, `a later request names it alone: cached by task id ${cached.message}`);
  t.same(cached.ids, fromDir.ids);
  t.same((await infer([tensor('lora_task_id', 'UINT64', [1, 1], [2])])).ids, baseIds, 'B = 0: the base model\'s tokens');
  const zeroSent = await infer([tensor('lora_task_id', 'UINT64', [1, 1], [102]), ...loraTensors(zero)]);
  t.same(zeroSent.ids, baseIds, 'and sent as tensors');
  t.comment(`the strong adapter ${fromDir.ids.join(',') === baseIds.join(',') ? 'did not change' : 'changed'} the greedy tokens`);
});

t.test('the big tensor as bytes: HTTP binary data (BF16) and gRPC raw_input_contents (FP32)', async (t) => {
  const fromDir = (await infer([tensor('lora_task_id', 'UINT64', [1, 1], [1])])).ids;
  // BF16 keeps f32's upper half: the adapter's values rounded toward zero, so only "it runs" is asserted here.
  const bf16 = Buffer.from(Uint16Array.from(new Uint32Array(strong.weights.buffer), (bits) => bits >>> 16).buffer);
  const json = Buffer.from(JSON.stringify({ inputs: [
    tensor('input_ids', 'INT32', [1, PROMPT.length], PROMPT), tensor('request_output_len', 'INT32', [1, 1], [8]),
    tensor('lora_task_id', 'UINT64', [1, 1], [201]),
    { name: 'lora_weights', datatype: 'BF16', shape: [1, ...strong.weightsShape], parameters: { binary_data_size: bf16.length } },
    tensor('lora_config', 'INT32', [1, ...strong.configShape], Array.from(strong.config)),
  ] }));
  const res = await fetch(`${base}/v2/models/tensorrt_llm/infer`, {
    method: 'POST', body: Buffer.concat([json, bf16]), headers: { 'inference-header-content-length': String(json.length) },
  });
  t.equal(res.status, 200, await res.clone().text());
  const raw = (a: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  const response = await unary(grpc, 'ModelInfer', {
    model_name: 'tensorrt_llm',
    inputs: [
      { name: 'input_ids', datatype: 'INT32', shape: [1, PROMPT.length] }, { name: 'request_output_len', datatype: 'INT32', shape: [1, 1] },
      { name: 'lora_task_id', datatype: 'UINT64', shape: [1, 1] }, { name: 'lora_weights', datatype: 'FP32', shape: [1, ...strong.weightsShape] },
      { name: 'lora_config', datatype: 'INT32', shape: [1, ...strong.configShape] },
    ],
    raw_input_contents: [raw(Int32Array.from(PROMPT)), raw(Int32Array.of(8)), raw(BigUint64Array.of(202n)), raw(strong.weights), raw(strong.config)],
  });
  const ids = response.raw_output_contents[0] as Buffer;
  const out = Array.from(new Int32Array(ids.buffer.slice(ids.byteOffset, ids.byteOffset + ids.byteLength))).slice(PROMPT.length);
  t.same(out, fromDir, 'gRPC raw FP32: the adapter\'s own numbers');
});

t.test('bad LoRA inputs are 400s naming the field, before anything runs', async (t) => {
  const task = tensor('lora_task_id', 'UINT64', [1, 1], [5]);
  const [weights, config] = loraTensors(strong);
  const frontend: [unknown[], RegExp][] = [
    [[weights!, config!], /^lora_weights and lora_config need lora_task_id/],
    [[task, weights!], /^lora_weights needs lora_config/],
    [[task, tensor('lora_weights', 'FP32', [2], [1, 2]), config!],
      /^lora_weights must have shape \[1, rows, cols\] or \[rows, cols\] \(one row per module and layer\), got \[2\]$/],
    [[task, weights!, tensor('lora_config', 'INT32', [1, 2, 6], [...Array(12).keys()])],
      /^lora_config must have shape \[1, rows, 3\] or \[rows, 3\] \(one row per module and layer\), got \[1, 2, 6\]$/],
    [[tensor('lora_task_id', 'INT32', [1, 1], [-1])], /^lora_task_id must be an integer >= 0 \(below 2\^53\), got -1 \(number\)$/],
  ];
  for (const [extra, message] of frontend) {
    const before = seen.length;
    const r = await infer(extra);
    t.equal(r.status, 400, String(message));
    t.match(r.message, message);
    t.equal(seen.length, before, 'the frontend refused it: nothing reached the executor');
  }
  // What the tensors hold is the engine's check, made as the request is enqueued (lora_from_tensors): 400 all the same.
  const engine: [unknown[], RegExp][] = [
    [[task, weights!, tensor('lora_config', 'INT32', [1, 4, 3], [9, 0, 4, 1, 0, 4, 1, 1, 4, 3, 1, 4])], /^lora_config row 0: module_id 9/],
    [[task, weights!, tensor('lora_config', 'INT32', [1, 3, 3], [1, 0, 4, 3, 0, 4, 1, 1, 4])], /^lora_weights has 4 rows but lora_config has 3/],
  ];
  for (const [extra, message] of engine) {
    const r = await infer(extra);
    t.equal(r.status, 400, String(message));
    t.match(r.message, message);
  }
  t.equal(executor.numActiveRequests(), 0, 'none of them runs');
  const g = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'hi', max_tokens: 2, lora_weights: [[1]], lora_config: [[1, 0, 1]] });
  t.equal(g.status, 400);
  t.match(g.json.error, /^lora_weights and lora_config need lora_task_id/);
});

t.test('a task id the server never got: the engine\'s 400 / INVALID_ARGUMENT says to send the adapter', async (t) => {
  const r = await infer([tensor('lora_task_id', 'UINT64', [1, 1], [424242])]);
  t.equal(r.status, 400);
  t.match(r.message, /lora_task_id 424242 is not in the LoRA cache .*send the adapter's lora_weights and lora_config/);
  const e = await unary(grpc, 'ModelInfer', { model_name: 'ensemble', inputs: [
    { name: 'text_input', datatype: 'BYTES', shape: [1, 1], contents: { bytes_contents: [Buffer.from('hi')] } },
    { name: 'max_tokens', datatype: 'INT32', shape: [1, 1], contents: { int_contents: [2] } },
    { name: 'lora_task_id', datatype: 'UINT64', shape: [1, 1], contents: { uint64_contents: [424243] } },
  ] }).then(() => undefined, (error: ServiceError) => error);
  t.equal(e?.code, status.INVALID_ARGUMENT);
  t.match(e?.details, /lora_task_id 424243 is not in the LoRA cache/);
});

t.test('a server without LoRA: a request naming an adapter is the engine\'s 400', async (t) => {
  const plain = await startTestServer(t, { model: MODEL });
  const r = await postJson(`${plain.base}/v2/models/ensemble/generate`, { text_input: 'hi', max_tokens: 2, lora_task_id: 1 });
  t.equal(r.status, 400);
  t.match(r.json.error, /lora_task_id 1: LoRA is not enabled on this server; start it with --lora-modules name=DIR or --enable-lora/);
  const models = await (await fetch(`${plain.base}/v1/models`)).json() as { data: { id: string }[] };
  t.same(models.data.map((m) => m.id), ['tiny-llama'], 'no adapters listed');
});

t.test('refused at startup: a directory without adapter_config.json, contradicting options, a taken name', async (t) => {
  const serve = { model: MODEL, host: '127.0.0.1', httpPort: 0, metricsPort: 0, authHealth: false, authMetrics: false, maxBodyBytes: 1024, drainTimeoutMs: 1000, logLevel: 'error' as const, threads: 1 };
  await t.rejects(startServer({ ...serve, loraModules: [`x=${dir}`] }),
    { code: 'invalid_argument', message: `--lora-modules x=${dir}: ${dir} has no adapter_config.json; give a Hugging Face PEFT adapter directory (as peft's save_pretrained writes it)` });
  await t.rejects(startServer({ ...serve, loraModules: [`tiny-llama=${strong.dir}`] }), { code: 'invalid_argument', message: /the name "tiny-llama" is the base model's/ });
  await t.rejects(startServer({ ...serve, maxLoras: 2 }), { code: 'invalid_argument', message: /--max-loras 2 sizes the LoRA adapter cache, but LoRA is off/ });
  const bin = join(packageRoot(), 'bin', 'trtllm-launch.js');
  const cli = await execa('node', [bin, '--model', MODEL, '--lora-modules', `a=${dir}/none`, '--dry-run'], { reject: false });
  t.equal(cli.exitCode, 2);
  t.match(cli.stderr, `--lora-modules a=${dir}/none: ${dir}/none does not exist; give a Hugging Face PEFT adapter directory`);
  const off = await execa('node', [bin, '--model', MODEL, '--lora-modules', `a=${strong.dir}`, '--enable-lora', 'false', '--dry-run'], { reject: false });
  t.equal(off.exitCode, 2);
  t.match(off.stderr, /--lora-modules a=.* serves LoRA adapters, which --enable-lora false turns off: drop one of them/);
});
