// KServe v2 over gRPC against a real server on the tiny Llama: a grpc-js client built in this file from the .proto
// file (its own tensor encoding, not the server's), every answer compared with the HTTP endpoint's for the same
// request — unary and streamed inference, batches with batch_index, Triton's final-response flag, cancellation
// (the call cancelled, or Triton's stop) freeing the KV cache, malformed requests, a full queue, the API key.
import { join } from 'node:path';

import { credentials, type Client, Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { loadPackageDefinition, type ServiceClientConstructor } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import t from 'tap';

import { packageRoot } from '../../../worker/common/package-root.js';
import type { ServeOptions } from '../../../worker/options/serve-options.js';
import { loadTokenizer } from '../../../worker/tokenizer.js';
import { fixtureDir } from '../../helpers/fixtures.js';
import { localExecutor, postJson, startTestServer, waitFor } from '../../helpers/serving.js';

const PROMPT = 'What is machine learning?';
const MODEL = fixtureDir('tiny-llama');

// ---- a client of our own: proto-loader on the shipped .proto, tensors encoded here ----
const definition = loadSync(join(packageRoot(), 'worker', 'frontend', 'grpc', 'kserve-v2.proto'),
  { keepCase: true, longs: Number, enums: String, bytes: Buffer, defaults: true, oneofs: true });
const Service = (loadPackageDefinition(definition) as any).inference.GRPCInferenceService as ServiceClientConstructor;

interface Tensor { name: string; datatype: string; shape: number[]; data: any[] }

const FIELD: Record<string, string> = { BOOL: 'bool_contents', INT32: 'int_contents', UINT32: 'uint_contents', FP32: 'fp32_contents', BYTES: 'bytes_contents', INT64: 'int64_contents' };

function raw(tensor: Tensor): Buffer {
  switch (tensor.datatype) {
    case 'INT32': return Buffer.from(Int32Array.from(tensor.data).buffer);
    case 'UINT32': return Buffer.from(Uint32Array.from(tensor.data).buffer);
    case 'FP32': return Buffer.from(Float32Array.from(tensor.data).buffer);
    case 'BOOL': return Buffer.from(tensor.data.map((b) => (b ? 1 : 0)));
    case 'BYTES': return Buffer.concat(tensor.data.flatMap((s: string) => {
      const b = Buffer.from(s);
      const n = Buffer.alloc(4);
      n.writeUInt32LE(b.length);
      return [n, b];
    }));
    default: throw new Error(tensor.datatype);
  }
}

function unraw(datatype: string, b: Buffer): any[] {
  switch (datatype) {
    case 'INT32': return [...new Int32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length))];
    case 'FP32': return [...new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length))];
    case 'BOOL': return [...b].map((x) => x !== 0);
    case 'BYTES': {
      const out: string[] = [];
      for (let at = 0; at < b.length;) { const n = b.readUInt32LE(at); out.push(b.toString('utf8', at + 4, at + 4 + n)); at += 4 + n; }
      return out;
    }
    default: throw new Error(datatype);
  }
}

/** A ModelInferRequest: typed contents, or raw_input_contents when `asRaw`. */
function request(model: string, inputs: Tensor[], extra: Record<string, unknown> = {}, asRaw = false): Record<string, unknown> {
  return {
    model_name: model, ...extra,
    inputs: inputs.map((i) => ({
      name: i.name, datatype: i.datatype, shape: i.shape,
      ...(asRaw ? {} : { contents: { [FIELD[i.datatype]!]: i.datatype === 'BYTES' ? i.data.map((s: string) => Buffer.from(s)) : i.data } }),
    })),
    ...(asRaw ? { raw_input_contents: inputs.map(raw) } : {}),
  };
}

/** A response's outputs as plain tensors, whichever form they came in. */
function outputs(r: any): Tensor[] {
  return r.outputs.map((o: any, i: number) => ({
    name: o.name, datatype: o.datatype, shape: o.shape,
    data: r.raw_output_contents.length > 0 ? unraw(o.datatype, r.raw_output_contents[i])
      : o.datatype === 'BYTES' ? o.contents[FIELD.BYTES!].map((b: Buffer) => b.toString()) : o.contents[FIELD[o.datatype]!],
  }));
}
const byName = (ts: Tensor[]) => Object.fromEntries(ts.map((x) => [x.name, x]));
const isFinal = (r: any) => r.infer_response?.parameters?.triton_final_response?.bool_param;

type AnyClient = Client & Record<string, any>;

function unary(c: AnyClient, method: string, req: unknown, metadata = new Metadata()): Promise<any> {
  return new Promise((resolve, reject) => c[method](req, metadata, (e: ServiceError | null, r: unknown) => (e ? reject(e) : resolve(r))));
}

async function rejected(c: AnyClient, method: string, req: unknown, metadata?: Metadata): Promise<ServiceError> {
  try {
    await unary(c, method, req, metadata);
  } catch (e) {
    return e as ServiceError;
  }
  throw new Error(`${method} succeeded`);
}

/** Sends requests on one ModelStreamInfer call, half-closes, and collects every response until the server ends it. */
async function stream(c: AnyClient, requests: unknown[]): Promise<any[]> {
  const call = c.ModelStreamInfer();
  const got: any[] = [];
  const done = new Promise<void>((resolve, reject) => {
    call.on('data', (r: unknown) => got.push(r));
    call.on('end', resolve);
    call.on('error', reject);
  });
  for (const r of requests) call.write(r);
  call.end();
  await done;
  return got;
}

async function startGrpc(t: Parameters<typeof startTestServer>[0], overrides: Partial<ServeOptions> = {}) {
  const s = await startTestServer(t, { model: MODEL, grpcPort: 0, ...overrides });
  const client = new Service(`127.0.0.1:${s.server.grpcPort}`, credentials.createInsecure()) as AnyClient;
  t.teardown(() => client.close());
  return { ...s, client };
}

const tokenInputs = (ids: number[], len: number, extra: Tensor[] = []): Tensor[] => [
  { name: 'input_ids', datatype: 'INT32', shape: [1, ids.length], data: ids },
  { name: 'input_lengths', datatype: 'INT32', shape: [1, 1], data: [ids.length] },
  { name: 'request_output_len', datatype: 'UINT32', shape: [1, 1], data: [len] },
  ...extra,
];
const textInputs = (prompts: string[], maxTokens: number[], extra: Tensor[] = []): Tensor[] => [
  { name: 'text_input', datatype: 'BYTES', shape: [prompts.length, 1], data: prompts },
  { name: 'max_tokens', datatype: 'INT32', shape: [prompts.length, 1], data: maxTokens },
  ...extra,
];
const flag = (name: string, value: boolean, batch = 1): Tensor => ({ name, datatype: 'BOOL', shape: [batch, 1], data: new Array(batch).fill(value) });

t.test('KServe v2 over gRPC = over HTTP', async (t) => {
  const { base, metricsBase, server, client } = await startGrpc(t);
  const executor = server.context.executor;
  const allFree = () => { const s = executor.kvCacheStats(); return s.freeNumBlocks === s.maxNumBlocks && executor.numActiveRequests() === 0; };
  const ids = loadTokenizer(MODEL).encode(PROMPT);

  t.test('health, server and model metadata, model config', async (t) => {
    t.same(await unary(client, 'ServerLive', {}), { live: true });
    t.same(await unary(client, 'ServerReady', {}), { ready: true });
    for (const name of ['ensemble', 'tensorrt_llm', 'tensorrt_llm_bls', 'preprocessing', 'postprocessing']) {
      t.same(await unary(client, 'ModelReady', { name }), { ready: true }, `${name} ready`);
    }
    const http = await (await fetch(`${base}/v2`)).json();
    t.match(await unary(client, 'ServerMetadata', {}), http, 'ServerMetadata = GET /v2');
    const meta = await unary(client, 'ModelMetadata', { name: 'tensorrt_llm' });
    const httpMeta = await (await fetch(`${base}/v2/models/tensorrt_llm`)).json() as any;
    t.same({ name: meta.name, versions: meta.versions, platform: meta.platform }, { name: httpMeta.name, versions: httpMeta.versions, platform: httpMeta.platform });
    t.same(meta.inputs.map((i: any) => [i.name, i.datatype, i.shape]), httpMeta.inputs.map((i: any) => [i.name, i.datatype, i.shape]), 'inputs = HTTP metadata');
    const { config } = await unary(client, 'ModelConfig', { name: 'tensorrt_llm', version: '1' });
    const httpConfig = await (await fetch(`${base}/v2/models/tensorrt_llm/config`)).json() as any;
    t.equal(config.model_transaction_policy.decoupled, true, 'decoupled, so clients stream it');
    t.equal(config.max_batch_size, httpConfig.max_batch_size);
    t.equal(config.parameters.vocab_size.string_value, httpConfig.parameters.vocab_size.string_value);
    t.same(config.input.map((i: any) => [i.name, i.data_type, i.dims]), httpConfig.input.map((i: any) => [i.name, i.data_type, i.dims.map(Number)]));
    const missing = await rejected(client, 'ModelConfig', { name: 'llama' });
    t.equal(missing.code, status.NOT_FOUND);
    t.match(missing.details, /unknown model 'llama'; this server serves ensemble/);
    t.equal((await rejected(client, 'ModelReady', { name: 'ensemble', version: '7' })).code, status.NOT_FOUND, 'an unknown version');
  });

  t.test('ModelInfer = POST /infer: tensorrt_llm, typed and raw tensors, log probs', async (t) => {
    const inputs = tokenInputs(ids, 6, [flag('return_log_probs', true)]);
    const httpBody = { id: 'h1', inputs: inputs.map((i) => ({ ...i, datatype: i.datatype === 'UINT32' ? 'INT32' : i.datatype })) };
    const http = await postJson(`${base}/v2/models/tensorrt_llm/infer`, httpBody);
    t.equal(http.status, 200);
    const typed = await unary(client, 'ModelInfer', request('tensorrt_llm', inputs, { id: 'g1' }));
    t.equal(typed.id, 'g1', 'the request id is echoed');
    t.equal(typed.model_name, 'tensorrt_llm');
    t.equal(typed.raw_output_contents.length, 0, 'typed contents in, typed contents out');
    const rawAnswer = await unary(client, 'ModelInfer', request('tensorrt_llm', inputs, { id: 'g2' }, true));
    t.ok(rawAnswer.raw_output_contents.length > 0, 'raw in, raw out (as Triton answers)');
    const want = byName(http.json.outputs);
    for (const got of [outputs(typed), outputs(rawAnswer)]) {
      t.same(got.map((o) => o.name).sort(), Object.keys(want).sort());
      for (const o of got) {
        t.same(o.shape, want[o.name]!.shape, `${o.name} shape`);
        t.same(o.datatype, want[o.name]!.datatype);
        t.same(o.data, want[o.name]!.data, `${o.name} data`);
      }
    }
    t.same(byName(outputs(typed)).output_ids!.data.slice(0, ids.length), ids, 'the prompt, then the generated tokens');
    t.same(byName(outputs(typed)).output_ids!.shape, [1, 1, ids.length + 6]);
  });

  t.test("ModelInfer with tensorrt_llm's embedding_bias, typed and raw FP32: +100 on a token makes it every choice", async (t) => {
    const vocab = executor.modelConfig.vocabSize;
    const bias = new Array<number>(vocab).fill(0);
    bias[7] = 100;
    const inputs = tokenInputs(ids, 3, [{ name: 'embedding_bias', datatype: 'FP32', shape: [1, vocab], data: bias }]);
    for (const raw of [false, true]) {
      const got = byName(outputs(await unary(client, 'ModelInfer', request('tensorrt_llm', inputs, {}, raw))));
      t.same(got.output_ids!.data.slice(ids.length), [7, 7, 7], raw ? 'raw_input_contents' : 'fp32_contents');
    }
    const short = tokenInputs(ids, 3, [{ name: 'embedding_bias', datatype: 'FP32', shape: [1, 3], data: [1, 2, 3] }]);
    const refused = await rejected(client, 'ModelInfer', request('tensorrt_llm', short));
    t.equal(refused.code, status.INVALID_ARGUMENT);
    t.match(refused.details, new RegExp(`embedding_bias must have shape \\[${vocab}\\] \\(vocab_size\\) or \\[1, ${vocab}\\], got \\[1, 3\\]`));
  });

  t.test('ModelInfer = POST /infer: ensemble batch, requested outputs; preprocessing and postprocessing', async (t) => {
    const inputs = textInputs([PROMPT, 'The cat is'], [5, 3], [flag('return_log_probs', true, 2)]);
    const http = await postJson(`${base}/v2/models/ensemble/infer`, { inputs, outputs: [{ name: 'text_output' }, { name: 'cum_log_probs' }] });
    const grpc = await unary(client, 'ModelInfer', request('ensemble', inputs, { outputs: [{ name: 'text_output' }, { name: 'cum_log_probs' }] }, true));
    const got = byName(outputs(grpc));
    t.same(Object.keys(got).sort(), ['cum_log_probs', 'text_output'], 'only what was asked for');
    t.same(got.text_output!.data, byName(http.json.outputs).text_output!.data, 'the same texts');
    t.same(got.text_output!.shape, [2], 'text_output flat, one string per element (Triton\'s postprocessing)');
    // Two runs of a batch may be scheduled into different iteration batches: float sums then differ in the last bits.
    const httpCum = byName(http.json.outputs).cum_log_probs!.data;
    t.ok(got.cum_log_probs!.data.every((x: number, i: number) => Math.abs(x - httpCum[i]) < 1e-3), `cum_log_probs ${got.cum_log_probs!.data} ≈ ${httpCum}`);

    const pre = textInputs(['Hello there', PROMPT], [1, 1]).map((x) => x.name === 'text_input' ? { ...x, name: 'QUERY' } : { ...x, name: 'REQUEST_OUTPUT_LEN' });
    const httpPre = await postJson(`${base}/v2/models/preprocessing/infer`, { inputs: pre });
    const grpcPre = outputs(await unary(client, 'ModelInfer', request('preprocessing', pre)));
    t.same(grpcPre.map((o) => [o.name, o.shape, o.data]), httpPre.json.outputs.map((o: Tensor) => [o.name, o.shape, o.data]), 'preprocessing');
    const post = [{ name: 'TOKENS_BATCH', datatype: 'INT32', shape: [1, 1, ids.length], data: ids }];
    const grpcPost = outputs(await unary(client, 'ModelInfer', request('postprocessing', post, {}, true)));
    t.same(grpcPost[0]!.data, [loadTokenizer(MODEL).decode(ids)], 'postprocessing decodes');
  });

  t.test('ModelStreamInfer on tensorrt_llm: one response per iteration, the final one flagged, = the whole result', async (t) => {
    const whole = await unary(client, 'ModelInfer', request('tensorrt_llm', tokenInputs(ids, 12, [flag('return_log_probs', true)])));
    const wholeOut = byName(outputs(whole));
    const got = await stream(client, [request('tensorrt_llm', tokenInputs(ids, 12, [flag('streaming', true), flag('return_log_probs', true)]), { id: 's1' }, true)]);
    t.ok(got.length >= 2, `${got.length} responses`);
    t.ok(got.every((r) => r.error_message === '' && r.infer_response.id === 's1'), 'no errors; every response carries the request id');
    t.same(got.map(isFinal), [...new Array(got.length - 1).fill(false), true], 'triton_final_response on every response, true on the last');
    const tokens = got.flatMap((r) => byName(outputs(r.infer_response)).output_ids!.data);
    t.same(tokens, wholeOut.output_ids!.data.slice(ids.length), 'streamed tokens = the whole result\'s new tokens');
    t.same(byName(outputs(got[0].infer_response)).output_ids!.shape.slice(0, 2), [1, 1], 'output_ids [1, beams, tokens]');
    const logProbs = got.flatMap((r) => byName(outputs(r.infer_response)).output_log_probs!.data);
    t.same(logProbs, wholeOut.output_log_probs!.data, 'log probs too');
    t.same(byName(outputs(got.at(-1).infer_response)).cum_log_probs!.data, wholeOut.cum_log_probs!.data);
  });

  t.test('ModelStreamInfer on ensemble: text deltas = generate; empty final response on request', async (t) => {
    const http = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: PROMPT, max_tokens: 10, exclude_input_in_output: true });
    const got = await stream(client, [request('ensemble', textInputs([PROMPT], [10], [flag('stream', true)]), {
      id: 'e1', parameters: { triton_enable_empty_final_response: { bool_param: true } },
    })]);
    const last = got.at(-1).infer_response;
    t.equal(last.outputs.length, 0, 'the last response is empty');
    t.equal(isFinal(got.at(-1)), true, '... and flagged final');
    t.ok(got.slice(0, -1).every((r) => isFinal(r) === false && r.infer_response.outputs.length > 0), 'the data responses are not final');
    const text = got.slice(0, -1).map((r) => byName(outputs(r.infer_response)).text_output!.data[0]).join('');
    t.equal(text, http.json.text_output, 'streamed text = generate\'s text');
    t.same(byName(outputs(got[0].infer_response)).text_output!.shape, [1]);
    for (const how of [[flag('stream', false)], []]) {
      const whole = await stream(client, [request('ensemble', textInputs([PROMPT], [10], how))]);
      t.equal(whole.length, 1, `${how.length ? 'stream: false' : 'no stream input (Triton\'s default: false)'} → one response`);
      t.equal(isFinal(whole[0]), true);
      t.equal(byName(outputs(whole[0].infer_response)).text_output!.data[0], PROMPT + http.json.text_output, 'the whole text, prompt first (as /generate)');
    }
    const tokens = await stream(client, [request('tensorrt_llm', tokenInputs(ids, 4))]);
    t.equal(tokens.length, 1, 'tensorrt_llm without streaming: one response');
    t.same(byName(outputs(tokens[0].infer_response)).output_ids!.shape, [1, 1, ids.length + 4], 'the prompt and the 4 tokens, as ModelInfer');
  });

  t.test('batch > 1 streamed: per element with batch_index, each = the prompt alone; several requests on one call', async (t) => {
    const prompts = ['Hello', PROMPT, 'The cat is'];
    const lens = [2, 9, 4];
    const got = await stream(client, [
      request('ensemble', textInputs(prompts, lens, [flag('stream', true, 3)]), { id: 'b' }),
      request('tensorrt_llm', tokenInputs(ids, 5, [flag('streaming', true)]), { id: 't' }),
    ]);
    const batch = got.filter((r) => r.infer_response.id === 'b');
    const texts = ['', '', ''];
    for (const r of batch) {
      const out = byName(outputs(r.infer_response));
      t.same(out.batch_index!.shape, [1, 1]);
      texts[out.batch_index!.data[0]] += out.text_output!.data[0];
    }
    t.equal(batch.filter(isFinal).length, 1, 'one final response for the whole batch');
    t.equal(isFinal(batch.at(-1)), true, '... the last one');
    for (const [i, p] of prompts.entries()) {
      const alone = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: p, max_tokens: lens[i], exclude_input_in_output: true });
      t.equal(texts[i], alone.json.text_output, `element ${i} = "${p}" alone`);
    }
    const tokens = got.filter((r) => r.infer_response.id === 't');
    t.equal(tokens.flatMap((r) => byName(outputs(r.infer_response)).output_ids!.data).length, 5, 'the other request on the same call: its own 5 tokens');
    // perf_analyzer keeps --concurrency requests in flight on one stream: many at once, each answered to the end.
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    const many = await stream(client, Array.from({ length: 24 }, (_, i) => request('tensorrt_llm', tokenInputs(ids, 40, [flag('streaming', true)]), { id: `m${i}` })));
    process.off('warning', onWarning);
    t.equal(many.filter(isFinal).length, 24, '24 requests on one call, each with its final response');
    t.same(warnings, [], 'no warnings');
    t.ok(await waitFor(allFree), 'KV all free');
  });

  t.test('ModelStatistics: the metrics port\'s counters, per model', async (t) => {
    const { model_stats: all } = await unary(client, 'ModelStatistics', {});
    t.same(all.map((m: any) => m.name).sort(), ['ensemble', 'postprocessing', 'preprocessing', 'tensorrt_llm', 'tensorrt_llm_bls']);
    const { model_stats: [ens] } = await unary(client, 'ModelStatistics', { name: 'ensemble', version: '1' });
    const text = await (await fetch(`${metricsBase}/metrics`)).text();
    const counter = (name: string) => Number(new RegExp(`^${name}\\{model="ensemble",version="1"\\} (\\S+)$`, 'm').exec(text)![1]);
    t.ok(ens.inference_stats.success.count > 0, `${ens.inference_stats.success.count} successes so far`);
    t.equal(ens.inference_stats.success.count, counter('nv_inference_request_success'), 'success = nv_inference_request_success');
    t.equal(ens.inference_stats.success.ns, counter('nv_inference_request_duration_us') * 1000, 'durations in ns');
    t.equal(ens.execution_count, counter('nv_inference_exec_count'));
    t.equal((await rejected(client, 'ModelStatistics', { name: 'llama' })).code, status.NOT_FOUND);
  });

  t.test('malformed requests: the status names the field; a stream reports in-band and carries on', async (t) => {
    const cases: [string, Record<string, unknown>, number, RegExp][] = [
      ['unknown model', request('llama', textInputs([PROMPT], [2])), status.NOT_FOUND, /unknown model 'llama'/],
      ['unknown version', request('ensemble', textInputs([PROMPT], [2]), { model_version: '3' }), status.NOT_FOUND, /no version '3'/],
      ['missing input', request('ensemble', [textInputs([PROMPT], [2])[1]!]), status.INVALID_ARGUMENT, /text_input is required/],
      ['unknown input', request('ensemble', textInputs([PROMPT], [2], [flag('streem', true)])), status.INVALID_ARGUMENT, /unexpected input 'streem' for model 'ensemble'/],
      ['bad datatype', request('ensemble', [{ name: 'text_input', datatype: 'STRING', shape: [1], data: [] }]), status.INVALID_ARGUMENT, /input 'text_input': datatype must be one of .*got "STRING"/],
      ['shape vs data', request('tensorrt_llm', [{ name: 'input_ids', datatype: 'INT32', shape: [1, 3], data: [1, 2] }]), status.INVALID_ARGUMENT, /input 'input_ids': shape \[1, 3\] needs 3 elements, data has 2/],
      ['wrong contents field', { model_name: 'tensorrt_llm', inputs: [{ name: 'input_ids', datatype: 'INT32', shape: [1], contents: { fp32_contents: [1.5] } }] }, status.INVALID_ARGUMENT, /input 'input_ids': a INT32 tensor's data goes in int_contents, got fp32_contents/],
      ['raw bytes not whole elements', { model_name: 'tensorrt_llm', inputs: [{ name: 'input_ids', datatype: 'INT32', shape: [1] }], raw_input_contents: [Buffer.alloc(6)] }, status.INVALID_ARGUMENT, /raw_input_contents\[0\] holds 6 bytes, not a whole number of 4-byte INT32 elements/],
      ['raw count', { model_name: 'tensorrt_llm', inputs: [{ name: 'input_ids', datatype: 'INT32', shape: [1] }, { name: 'request_output_len', datatype: 'INT32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)] }, status.INVALID_ARGUMENT, /raw_input_contents has 1 entries for 2 inputs/],
      ['truncated BYTES', { model_name: 'ensemble', inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1] }], raw_input_contents: [Buffer.from([9, 0, 0, 0, 65])] }, status.INVALID_ARGUMENT, /input 'text_input': raw_input_contents\[0\] element 0 claims 9 bytes, only 1 remain/],
      ['bad value', request('tensorrt_llm', tokenInputs([1, 99999], 2)), status.INVALID_ARGUMENT, /99999/],
      ['too long', request('tensorrt_llm', tokenInputs(ids, 100000)), status.INVALID_ARGUMENT, /request_output_len must be an integer in \[1, \d+\] \(max_seq_len\), got 100000/],
      ['reserved parameter', request('ensemble', textInputs([PROMPT], [2]), { parameters: { triton_enable_empty_final_response: { string_param: 'yes' } } }), status.INVALID_ARGUMENT, /invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param/],
      ['stop without id', request('tensorrt_llm', [flag('stop', true)]), status.INVALID_ARGUMENT, /stop: true needs the id/],
    ];
    for (const [what, req, code, message] of cases) {
      const e = await rejected(client, 'ModelInfer', req);
      t.equal(e.code, code, `${what}: ${status[e.code]}`);
      t.match(e.details, message, what);
    }
    const big = await rejected(client, 'ModelInfer', request('ensemble', textInputs(['x'.repeat(2 * 1024 * 1024)], [1])));
    t.equal(big.code, status.RESOURCE_EXHAUSTED, 'a message over --max-body-bytes');
    const got = await stream(client, [cases[2]![1], request('ensemble', textInputs([PROMPT], [3]), { id: 'ok' }), cases[0]![1]]);
    const errors = got.filter((r) => r.error_message !== '');
    t.equal(errors.length, 2, 'two requests failed in-band');
    t.match(errors.map((r) => r.error_message).join('\n'), /text_input is required[^]*unknown model 'llama'|unknown model 'llama'[^]*text_input is required/);
    t.ok(got.some((r) => r.infer_response.id === 'ok' && isFinal(r)), 'the good request between them was served to the end');
    t.ok(await waitFor(allFree), 'nothing left running, KV all free');
  });
});

t.test('cancellation: the client cancels the call, or sends Triton\'s stop; KV is freed either way', async (t) => {
  // Each request runs one iteration and the loop holds (holdIterations) until the cancel or stop has done its work:
  // the cancel lands after exactly one token, however fast or slow this machine is.
  const { client, server, metricsBase } = await startGrpc(t);
  const executor = localExecutor(server);
  const allFree = () => { const s = executor.kvCacheStats(); return s.freeNumBlocks === s.maxNumBlocks && executor.numActiveRequests() === 0; };
  // (matched by hand: the default process metrics can read "Nan", which the strict helper parser refuses)
  const failures = async () => Number(/nv_inference_request_failure\{model="tensorrt_llm",version="1"\} (\d+)/.exec(await (await fetch(`${metricsBase}/metrics`)).text())![1]);
  const LEN = 200;
  const long = (id: string) => request('tensorrt_llm', tokenInputs([1, 2, 3], LEN, [flag('streaming', true), { name: 'end_id', datatype: 'INT32', shape: [1, 1], data: [-1] }]), { id }, true);

  t.test('the client cancels the call after the first tokens', async (t) => {
    const before = await failures();
    executor.holdIterations(1);
    const call = client.ModelStreamInfer();
    let tokens = 0;
    const ended = new Promise<string>((resolve) => {
      call.on('data', (r: any) => {
        tokens += byName(outputs(r.infer_response)).output_ids?.data.length ?? 0;
        call.cancel();
      });
      call.on('error', (e: ServiceError) => resolve(status[e.code]));
      call.on('end', () => resolve('end'));
    });
    call.write(long('c1'));
    t.equal(await ended, 'CANCELLED');
    t.equal(tokens, 1, 'one token before the cancel');
    t.ok(await waitFor(allFree), 'the request is gone, KV all free (while the loop still holds)');
    executor.holdIterations(-1);
    t.ok(await waitFor(async () => (await failures()) === before + 1), 'counted as not successful');
  });

  t.test("Triton's stop on the same stream (inflight_batcher_llm_client's request)", async (t) => {
    const call = client.ModelStreamInfer();
    const got: any[] = [];
    const ended = new Promise<void>((resolve, reject) => {
      call.on('data', (r: any) => {
        got.push(r);
        // The client's stop signal: the same id, `stop` true, placeholder input_ids and request_output_len 0.
        if (got.length === 1) {
          call.write(request('tensorrt_llm', [{ name: 'input_ids', datatype: 'INT32', shape: [1, 1], data: [0] },
            { name: 'input_lengths', datatype: 'INT32', shape: [1, 1], data: [0] },
            { name: 'request_output_len', datatype: 'UINT32', shape: [1, 1], data: [0] }, flag('stop', true)], { id: 's2' }, true));
        }
        if (isFinal(r)) call.end();
      });
      call.on('end', resolve);
      call.on('error', reject);
    });
    executor.holdIterations(1);
    call.write(long('s2'));
    // The stop is in once the request is gone; only then may the loop run again.
    t.ok(await waitFor(() => executor.numActiveRequests() === 0 && got.length > 0), 'the stop ended the request while the loop holds');
    executor.holdIterations(-1);
    await ended;
    const tokens = got.reduce((n, r) => n + (byName(outputs(r.infer_response)).output_ids?.data.length ?? 0), 0);
    t.equal(tokens, 1, `the one token of its first iteration, of ${LEN}`);
    t.equal(isFinal(got.at(-1)), true, 'the stopped request still ends with a final response');
    t.equal(got.at(-1).infer_response.parameters.finish_reason?.string_param, 'cancelled', 'marked cancelled');
    t.ok(got.every((r) => r.error_message === '' && r.infer_response.id === 's2'), 'the stop itself answers nothing (no empty final asked for)');
    t.ok(await waitFor(allFree), 'KV all free');
  });

  t.test("Triton's stop for a ModelInfer (inflight_batcher_llm_client without --streaming)", async (t) => {
    executor.holdIterations(0);
    const whole = unary(client, 'ModelInfer', request('tensorrt_llm', tokenInputs([1, 2, 3], LEN, [{ name: 'end_id', datatype: 'INT32', shape: [1, 1], data: [-1] }]), { id: 'u1' }, true));
    t.ok(await waitFor(() => executor.numActiveRequests() === 1), 'queued');
    executor.holdIterations(1);
    t.ok(await executor.awaitHeld(), 'the loop holds');
    const stop = await unary(client, 'ModelInfer', request('tensorrt_llm', [flag('stop', true)], { id: 'u1' }, true));
    t.same(stop.outputs, [], 'the stop request answers with no outputs');
    t.equal(stop.id, 'u1');
    t.equal(stop.parameters.cancelled_requests?.int64_param, 1, 'and says it cancelled one request');
    executor.holdIterations(-1);
    const answer = await whole;
    const ids = byName(outputs(answer)).output_ids!;
    t.equal(ids.data.length, 3 + 1, `the stopped request returns what it had: the prompt and one of ${LEN} tokens`);
    t.equal(answer.parameters.finish_reason?.string_param, 'cancelled', 'marked cancelled');
    t.ok(await waitFor(allFree), 'KV all free');
  });

  t.test('a ModelInfer cancelled by its client', async (t) => {
    const before = await failures();
    executor.holdIterations(0);
    let call: any;
    const answer = new Promise<ServiceError | null>((resolve) => { call = client.ModelInfer(long(''), (e: ServiceError | null) => resolve(e)); });
    t.ok(await waitFor(() => executor.numActiveRequests() === 1), 'queued');
    call.cancel();
    t.equal((await answer)?.code, status.CANCELLED);
    t.ok(await waitFor(allFree), 'KV all free once the unary call is cancelled (while the loop still holds)');
    executor.holdIterations(-1);
    t.ok(await waitFor(async () => (await failures()) === before + 1), 'counted as not successful (it did not run to the end)');
  });
});

t.test('queue full → UNAVAILABLE; API key → UNAUTHENTICATED; health open', async (t) => {
  const { client, server } = await startGrpc(t, { maxQueueSize: 1, maxBatchSize: 1, apiKey: 'sekret' });
  const executor = localExecutor(server);
  const auth = new Metadata();
  auth.set('authorization', 'Bearer sekret');
  t.same(await unary(client, 'ServerReady', {}), { ready: true }, 'readiness needs no key');
  const no = await rejected(client, 'ModelInfer', request('ensemble', textInputs([PROMPT], [1])));
  t.equal(no.code, status.UNAUTHENTICATED);
  t.match(no.details, /authorization: Bearer <key>/);
  // Held before its first iteration, the first request fills the queue of one: every other one is refused.
  executor.holdIterations(0);
  const first = unary(client, 'ModelInfer', request('ensemble', textInputs([PROMPT], [110])), auth);
  t.ok(await waitFor(() => executor.numActiveRequests() === 1), 'the first request is queued');
  const results = await Promise.allSettled(Array.from({ length: 5 }, () => unary(client, 'ModelInfer', request('ensemble', textInputs([PROMPT], [110])), auth)));
  const full = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason as ServiceError);
  t.equal(full.length, 5, 'the five others are refused');
  t.ok(full.every((e) => e.code === status.UNAVAILABLE), 'as UNAVAILABLE');
  t.match(full[0]?.details, /Maximum queue size of 1 has been reached/);
  executor.holdIterations(-1);
  t.ok(byName(outputs(await first)).text_output, 'the queued one is served');
});

t.test('drain: close() lets a running streamed request finish, then ends the calls still open', async (t) => {
  const { client, server } = await startGrpc(t, { drainTimeoutMs: 60_000 });
  // The request runs one iteration and holds: the drain, not the machine's speed, must take it to the end.
  localExecutor(server).holdIterations(1);
  const call = client.ModelStreamInfer();
  const got: any[] = [];
  let first!: () => void;
  const firstResponse = new Promise<void>((resolve) => { first = resolve; });
  const ended = new Promise<string>((resolve) => {
    call.on('data', (r: any) => { got.push(r); first(); });
    call.on('error', (e: ServiceError) => resolve(status[e.code]));
    call.on('end', () => resolve('end'));
  });
  // The client never half-closes: the server must end the call itself once it has drained.
  call.write(request('tensorrt_llm', tokenInputs([1, 2, 3], 30, [flag('streaming', true), { name: 'end_id', datatype: 'INT32', shape: [1, 1], data: [-1] }])));
  await firstResponse;
  t.equal(got.reduce((n, r) => n + (byName(outputs(r.infer_response)).output_ids?.data.length ?? 0), 0), 1, 'one token when the drain starts');
  await server.close();
  t.pass('close() resolves');
  t.equal(got.reduce((n, r) => n + (byName(outputs(r.infer_response)).output_ids?.data.length ?? 0), 0), 30, 'the running request finished: all 30 tokens');
  t.equal(isFinal(got.at(-1)), true);
  t.not(await ended, undefined, `the open call was ended (${await ended})`);
});
