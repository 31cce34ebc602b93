// Seeded hostile gRPC traffic against a real server through grpc-js (the HTTP counterpart is fuzz.test.ts): bytes
// protobuf may or may not decode, ModelInfer requests with wrong datatypes, shapes, values, parameters, models and
// versions, ModelStreamInfer streams mixing good and bad messages, half-closed early or cancelled mid-stream. Every
// call ends with a well-formed status (never INTERNAL or UNKNOWN), nothing is logged as an ERROR, the channel keeps
// serving, and afterwards no request is left running and every KV block is free.
import { Metadata, type ServiceError, status } from '@grpc/grpc-js';
import t from 'tap';

import { fixtureDir } from '../../helpers/fixtures.js';
import { inferRequest, kserveClient, type KserveClient, outputsByName, rawUnary, type Tensor, unary } from '../../helpers/kserve-grpc.js';
import { keptLog } from '../../helpers/raw-http.js';
import { localExecutor, startTestServer, waitFor } from '../../helpers/serving.js';

const SEED = 20261123;
let state = SEED;
const rand = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32;
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const DATATYPES = ['INT32', 'UINT32', 'BOOL', 'BYTES', 'FP32'] as const;
const MODELS = ['ensemble', 'tensorrt_llm', 'preprocessing', 'postprocessing', 'tensorrt_llm_bls', 'nope', '', 'x'.repeat(5000)];
const NAMES = ['text_input', 'max_tokens', 'input_ids', 'input_lengths', 'request_output_len', 'stream', 'temperature', 'top_k',
  'end_id', 'bad_words', 'stop_words', 'embedding_bias', 'prompt_embedding_table', 'prompt_vocab_size', 'return_log_probs',
  'beam_width', 'QUERY', 'x', ''];
const BAD_STATUSES = new Set([status.INTERNAL, status.UNKNOWN]);

function value(datatype: (typeof DATATYPES)[number]): unknown {
  switch (datatype) {
    case 'BYTES': return pick(['Hello', '', 'x'.repeat(3000), '\u0000\uFFFF', '😀', '[1,2]']);
    case 'BOOL': return rand() < 0.5;
    case 'FP32': return pick([0, -1, 1.5, 1e30, -1e-30]);
    default: return pick([0, 1, 2, 3, -1, 2 ** 31 - 1, 100_000, 7]);
  }
}

/** A tensor that may lie about its shape and carry a datatype its name does not take. */
function tensor(): Tensor {
  const datatype = pick(DATATYPES);
  const n = pick([0, 1, 1, 1, 2, 3]);
  const shape = pick([[1, n], [n], [2, 1], [1, 1, n], [-1, 1], [1, 100_000]]);
  return { name: pick(NAMES), datatype, shape, data: Array.from({ length: n }, () => value(datatype)) as any[] };
}

/** Mostly plausible requests with one or two things wrong; some fully valid (small max_tokens: the run stays short). */
function hostileInfer(): Record<string, unknown> {
  const model = pick(MODELS);
  const inputs: Tensor[] = rand() < 0.7
    ? [{ name: 'text_input', datatype: 'BYTES', shape: [1, 1], data: [pick(['Hello', 'What is', ''])] },
      { name: 'max_tokens', datatype: pick(['INT32', 'INT32', 'INT32', 'FP32', 'BYTES'] as const), shape: [1, 1], data: [pick([1, 2, 3, 0, -5])] }]
    : [];
  for (let i = Math.floor(rand() * 3); i > 0; i -= 1) inputs.push(tensor());
  if (inputs[1] && inputs[1].datatype === 'BYTES') inputs[1].data = inputs[1].data.map(String);
  const extra: Record<string, unknown> = {};
  if (rand() < 0.2) extra.model_version = pick(['1', '2', '-1', 'v'.repeat(300)]);
  if (rand() < 0.3) extra.id = pick(['a', '', 'x'.repeat(1000), String(Math.floor(rand() * 1e6))]);
  if (rand() < 0.3) {
    extra.parameters = {
      [pick(['max_tokens', 'temperature', 'streaming', 'x', 'priority'])]: pick([
        { int64_param: -3 }, { bool_param: true }, { string_param: 'x' }, { double_param: Number.NaN }, {}]),
    };
  }
  return inferRequest(model, inputs, extra);
}

function call(client: KserveClient, request: Record<string, unknown>): Promise<ServiceError | null> {
  return new Promise((resolve) => client.ModelInfer(request, new Metadata(), (e: ServiceError | null) => resolve(e)));
}

/** A stream of good and bad requests; ended early, cancelled after its first response, or left to finish. */
function stream(client: KserveClient): Promise<{ code: number | null; responses: number }> {
  const s = client.ModelStreamInfer();
  const how = pick(['finish', 'finish', 'half-close-first', 'cancel-after-first']);
  let responses = 0;
  return new Promise((resolve) => {
    s.on('data', () => {
      responses += 1;
      if (how === 'cancel-after-first' && responses === 1) s.cancel();
    });
    s.on('error', (e: ServiceError) => resolve({ code: e.code === status.CANCELLED && how === 'cancel-after-first' ? null : e.code, responses }));
    s.on('end', () => resolve({ code: null, responses }));
    const n = 1 + Math.floor(rand() * 3);
    for (let i = 0; i < n; i += 1) {
      s.write(rand() < 0.5 ? hostileInfer() : inferRequest('ensemble', [
        { name: 'text_input', datatype: 'BYTES', shape: [1, 1], data: ['Hello'] },
        { name: 'max_tokens', datatype: 'INT32', shape: [1, 1], data: [3] },
        { name: 'stream', datatype: 'BOOL', shape: [1, 1], data: [rand() < 0.5] }], { id: `s${i}` }));
      if (how === 'half-close-first' && i === 0) break;
    }
    s.end();
  });
}

t.test(`hostile gRPC traffic (seed ${SEED}): well-formed statuses, no ERROR, the channel and the KV cache clean`, async (t) => {
  const kept = keptLog();
  const { server } = await startTestServer(t, { model: fixtureDir('tiny-llama'), grpcPort: 0 }, kept.log);
  const client = kserveClient(t, `127.0.0.1:${server.grpcPort}`);
  const seen = new Map<string, number>();
  const note = (what: string, code: number | null) => {
    const key = `${what} ${code === null ? 'OK' : status[code]}`;
    seen.set(key, (seen.get(key) ?? 0) + 1);
    if (code !== null && BAD_STATUSES.has(code)) t.fail(`${what}: ${status[code]}`);
  };

  for (let i = 0; i < 120; i += 1) {
    const bytes = Buffer.from(Array.from({ length: Math.floor(rand() * 48) }, () => Math.floor(rand() * 256)));
    note('raw ModelInfer', (await rawUnary(client, pick(['ModelInfer', 'ModelInfer', 'ModelMetadata', 'ModelConfig', 'ServerReady']), bytes))?.code ?? null);
  }
  for (let i = 0; i < 200; i += 1) note('ModelInfer', (await call(client, hostileInfer()))?.code ?? null);
  // Several at once, as a busy client would send them.
  const burst = await Promise.all(Array.from({ length: 40 }, () => call(client, hostileInfer())));
  burst.forEach((e) => note('ModelInfer (burst)', e?.code ?? null));
  for (let i = 0; i < 40; i += 1) note('ModelStreamInfer', (await stream(client)).code);

  t.comment([...seen].map(([k, n]) => `${k}: ${n}`).sort().join('\n'));
  t.ok(seen.size > 4, `a variety of outcomes (${seen.size})`);
  t.same(await unary(client, 'ServerLive', {}), { live: true }, 'the channel still serves');
  const ok = await unary(client, 'ModelInfer', inferRequest('ensemble', [
    { name: 'text_input', datatype: 'BYTES', shape: [1, 1], data: ['Hello'] },
    { name: 'max_tokens', datatype: 'INT32', shape: [1, 1], data: [2] }]));
  t.equal(typeof outputsByName(ok).text_output?.data[0], 'string', 'and infers');
  const executor = localExecutor(server);
  // Cancelled streams end their requests at the executor's next iteration: wait for that, bounded by tap's timeout.
  t.ok(await waitFor(() => executor.numActiveRequests() === 0 && executor.kvCacheStats().freeNumBlocks === executor.kvCacheStats().maxNumBlocks),
    'no request left running, every KV block free');
  t.same(kept.lines.filter((l) => /\bERROR\b/.test(l)), [], 'nothing logged as an ERROR');
});
