// A request's max_attention_window_size through every frontend that takes it — KServe generate and /infer, gRPC
// ModelInfer (ensemble and tensorrt_llm), OpenAI completions and chat: a good value reaches the executor's request as
// maxAttentionWindow, 0 or none sends nothing (the server's window), and a bad one is a 400 / INVALID_ARGUMENT naming
// the field and the value before anything is enqueued. (That the engine then attends over that window is the
// executor's tests' to show.)
import { type ServiceError, status } from '@grpc/grpc-js';
import t, { type Test } from 'tap';

import type { NativeRequest } from '../../../worker/binding/addon-types.js';
import { readAttentionWindow } from '../../../worker/frontend/attention-window.js';
import { HttpError } from '../../../worker/frontend/http-errors.js';
import { readOpenAiParams } from '../../../worker/frontend/openai-params.js';
import { inferRequest, kserveClient, type Tensor, unary } from '../../helpers/kserve-grpc.js';
import { localExecutor, postJson, startTestServer, waitFor } from '../../helpers/serving.js';

const RULE = 'max_attention_window_size must be an integer in [1, 2147483647] (0 or absent: the server\'s window), got';
const BAD: [unknown, string][] = [[-1, '-1 (number)'], [1.5, '1.5 (number)'], ['abc', '"abc" (string)'], [true, 'true (boolean)']];

function rejects400(t: Test, fn: () => unknown, message: string): void {
  try {
    fn();
    t.fail(`expected a 400: ${message}`);
  } catch (error) {
    t.ok(error instanceof HttpError && error.status === 400 && error.param === 'max_attention_window_size', `400 naming the field (${(error as Error).message})`);
    t.equal((error as Error).message, message);
  }
}

t.test('read once for every frontend: an int32 >= 1, 0 or none for the server\'s', async (t) => {
  t.equal(readAttentionWindow(64), 64);
  t.equal(readAttentionWindow(2 ** 31 - 1), 2 ** 31 - 1, 'the largest int32');
  for (const none of [0, null, undefined]) t.equal(readAttentionWindow(none), undefined, `${String(none)}: the server's`);
  for (const [bad, shown] of [...BAD, [2 ** 31, '2147483648 (number)'], ['64', '"64" (string)'], [[64], 'an array of length 1']] as [unknown, string][]) {
    rejects400(t, () => readAttentionWindow(bad), `${RULE} ${shown}`);
  }
  t.equal(readOpenAiParams({ model: 'm', max_attention_window_size: 64 }).maxAttentionWindow, 64, 'OpenAI body field');
  t.equal(readOpenAiParams({ model: 'm' }).maxAttentionWindow, undefined);
  for (const [bad, shown] of BAD) rejects400(t, () => readOpenAiParams({ model: 'm', max_attention_window_size: bad }), `${RULE} ${shown}`);
});

type Sent = { ok: boolean; message: string };
const datatype = (v: unknown): Tensor['datatype'] => (typeof v === 'string' ? 'BYTES' : typeof v === 'boolean' ? 'BOOL' : Number.isInteger(v) ? 'INT32' : 'FP32');
const windowTensor = (v: unknown): Tensor[] => (v === undefined ? [] : [{ name: 'max_attention_window_size', datatype: datatype(v), shape: [1, 1], data: [v] }]);
const field = (v: unknown) => (v === undefined ? {} : { max_attention_window_size: v });

t.test('through every frontend to the executor\'s request', async (t) => {
  const { base, server } = await startTestServer(t, { grpcPort: 0 });
  const executor = localExecutor(server);
  const seen: NativeRequest[] = [];
  const enqueue = executor.enqueue.bind(executor);
  executor.enqueue = (request) => {
    seen.push(request);
    return enqueue(request);
  };
  const grpc = kserveClient(t, `127.0.0.1:${server.grpcPort}`);
  const http = async (path: string, body: unknown): Promise<Sent> => {
    const r = await postJson(`${base}${path}`, body);
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
  const frontends: [string, (v: unknown) => Promise<Sent>][] = [
    ['generate (ensemble)', (v) => http('/v2/models/ensemble/generate', { text_input: 'hi', max_tokens: 2, ...field(v) })],
    ['generate (tensorrt_llm)', (v) => http('/v2/models/tensorrt_llm/generate', { input_ids: [1, 2, 3], request_output_len: 2, ...field(v) })],
    ['infer (tensorrt_llm)', (v) => http('/v2/models/tensorrt_llm/infer', { inputs: [
      { name: 'input_ids', datatype: 'INT32', shape: [1, 3], data: [1, 2, 3] },
      { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [2] }, ...windowTensor(v)] })],
    ['gRPC ModelInfer (ensemble)', (v) => viaGrpc(inferRequest('ensemble', [
      { name: 'text_input', datatype: 'BYTES', shape: [1, 1], data: ['hi'] },
      { name: 'max_tokens', datatype: 'INT32', shape: [1, 1], data: [2] }, ...windowTensor(v)]))],
    ['gRPC ModelInfer (tensorrt_llm)', (v) => viaGrpc(inferRequest('tensorrt_llm', [
      { name: 'input_ids', datatype: 'INT32', shape: [1, 3], data: [1, 2, 3] },
      { name: 'request_output_len', datatype: 'UINT32', shape: [1, 1], data: [2] }, ...windowTensor(v)]))],
    ['OpenAI completions', (v) => http('/v1/completions', { model: 'tiny-gpt2', prompt: 'hi', max_tokens: 2, temperature: 0, ...field(v) })],
    ['OpenAI chat', (v) => http('/v1/chat/completions', { model: 'tiny-gpt2', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, temperature: 0, ...field(v) })],
  ];
  for (const [name, send] of frontends) {
    t.test(name, async (t) => {
      let before = seen.length;
      const good = await send(64);
      t.ok(good.ok, `64 is served ${good.message}`);
      t.equal(seen.length, before + 1, 'one request enqueued');
      t.equal(seen.at(-1)?.maxAttentionWindow, 64, 'the executor\'s request carries maxAttentionWindow 64');
      for (const none of [0, undefined]) {
        before = seen.length;
        t.ok((await send(none)).ok, `${String(none)} is served`);
        t.equal(seen.length, before + 1);
        t.notOk(seen.at(-1) && 'maxAttentionWindow' in seen.at(-1)!, `${String(none)}: nothing sent (the server's window)`);
      }
      for (const [bad, shown] of BAD) {
        before = seen.length;
        const r = await send(bad);
        t.notOk(r.ok, `${JSON.stringify(bad)} is refused`);
        t.equal(r.message, `${RULE} ${shown}`, `${JSON.stringify(bad)}: the field and the value named`);
        t.equal(seen.length, before, 'nothing enqueued');
      }
    });
  }
  t.test('nothing left running', async (t) => {
    t.ok(await waitFor(() => executor.numActiveRequests() === 0));
  });
});
