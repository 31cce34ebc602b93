// A per-request field sent through every frontend that takes it — KServe generate (ensemble, tensorrt_llm), /infer,
// gRPC ModelInfer (ensemble, tensorrt_llm), OpenAI completions and chat — with the executor's requests recorded, so
// a test can see what each frontend enqueued for a value (or that it enqueued nothing and answered 400 /
// INVALID_ARGUMENT with which message).
import { type ServiceError, status } from '@grpc/grpc-js';
import type { Test } from 'tap';

import type { NativeRequest } from '../../worker/binding/addon-types.js';
import { inferRequest, kserveClient, type Tensor, unary } from './kserve-grpc.js';
import { localExecutor, postJson, recordRequests, startTestServer } from './serving.js';

export type Sent = { ok: boolean; message: string };
export type Frontend = [name: string, send: (value: unknown) => Promise<Sent>];

const datatype = (v: unknown): Tensor['datatype'] => (typeof v === 'string' ? 'BYTES' : typeof v === 'boolean' ? 'BOOL' : Number.isInteger(v) ? 'INT32' : 'FP32');

/** A test server (bundled model, gRPC on) whose executor records every request it is given in `seen`. */
export async function fieldFrontends(t: Test, field: string): Promise<{ seen: NativeRequest[]; frontends: Frontend[]; executor: ReturnType<typeof localExecutor> }> {
  const { base, server } = await startTestServer(t, { grpcPort: 0 });
  const executor = localExecutor(server);
  const seen = recordRequests(executor);
  const grpc = kserveClient(t, `127.0.0.1:${server.grpcPort}`);
  const tensor = (v: unknown): Tensor[] => (v === undefined ? [] : [{ name: field, datatype: datatype(v), shape: [1, 1], data: [v] }]);
  const body = (v: unknown) => (v === undefined ? {} : { [field]: v });
  const http = async (path: string, b: unknown): Promise<Sent> => {
    const r = await postJson(`${base}${path}`, b);
    return { ok: r.status === 200, message: r.status === 400 ? (r.json.error?.message ?? r.json.error) : `status ${r.status}: ${JSON.stringify(r.json)}` };
  };
  const viaGrpc = async (request: Record<string, unknown>): Promise<Sent> => {
    try {
      await unary(grpc, 'ModelInfer', request);
      return { ok: true, message: '' };
    } catch (error) {
      const e = error as ServiceError;
      return { ok: false, message: e.code === status.INVALID_ARGUMENT ? e.details : `${status[e.code]}: ${e.details}` };
    }
  };
  const frontends: Frontend[] = [
    ['generate (ensemble)', (v) => http('/v2/models/ensemble/generate', { text_input: 'hi', max_tokens: 2, ...body(v) })],
    ['generate (tensorrt_llm)', (v) => http('/v2/models/tensorrt_llm/generate', { input_ids: [1, 2, 3], request_output_len: 2, ...body(v) })],
    ['infer (tensorrt_llm)', (v) => http('/v2/models/tensorrt_llm/infer', { inputs: [
      { name: 'input_ids', datatype: 'INT32', shape: [1, 3], data: [1, 2, 3] },
      { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [2] }, ...tensor(v)] })],
    ['gRPC ModelInfer (ensemble)', (v) => viaGrpc(inferRequest('ensemble', [
      { name: 'text_input', datatype: 'BYTES', shape: [1, 1], data: ['hi'] },
      { name: 'max_tokens', datatype: 'INT32', shape: [1, 1], data: [2] }, ...tensor(v)]))],
    ['gRPC ModelInfer (tensorrt_llm)', (v) => viaGrpc(inferRequest('tensorrt_llm', [
      { name: 'input_ids', datatype: 'INT32', shape: [1, 3], data: [1, 2, 3] },
      { name: 'request_output_len', datatype: 'UINT32', shape: [1, 1], data: [2] }, ...tensor(v)]))],
    ['OpenAI completions', (v) => http('/v1/completions', { model: 'tiny-gpt2', prompt: 'hi', max_tokens: 2, temperature: 0, ...body(v) })],
    ['OpenAI chat', (v) => http('/v1/chat/completions', { model: 'tiny-gpt2', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, temperature: 0, ...body(v) })],
  ];
  return { seen, frontends, executor };
}

/** Each bad value refused by `send` with the message `${rule} ${shown}` and nothing enqueued. */
export async function expectRefusals(t: Test, send: Frontend[1], seen: readonly NativeRequest[], bad: readonly [unknown, string][], rule: string): Promise<void> {
  for (const [value, shown] of bad) {
    const before = seen.length;
    const r = await send(value);
    t.notOk(r.ok, `${JSON.stringify(value)} is refused`);
    t.equal(r.message, `${rule} ${shown}`, `${JSON.stringify(value)}: the field and the value named`);
    t.equal(seen.length, before, 'nothing enqueued');
  }
}
