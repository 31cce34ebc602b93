// Triton's stop by id against a real server (HTTP and gRPC) on the tiny Llama: a running request's id is its own
// (a second request with it is refused, 409 / ALREADY_EXISTS), ids belong to a model and keep their JSON type, a
// stop cancels exactly the request it names and says how many it cancelled, and the cancelled request ends with
// finish_reason "cancelled" on every interface. Every request that must be live when a stop arrives has run one
// iteration and the executor's loop holds (holdIterations), so it is certainly still running, on any machine.
import { status } from '@grpc/grpc-js';
import t from 'tap';

import type { Executor } from '../../../worker/executor/executor.js';
import { fixtureDir, referenceCases } from '../../helpers/fixtures.js';
import { inferRequest, isFinal, kserveClient, type KserveClient, outputsByName, rejected, type Tensor, unary } from '../../helpers/kserve-grpc.js';
import { localExecutor, postJson, postSse, startTestServer, waitFor } from '../../helpers/serving.js';

const MODEL = fixtureDir('tiny-llama');
const IDS = referenceCases('tiny-llama')[0]!.input_ids;
const LEN = 40;   // far more tokens than the one iteration a stopped request runs

const tokensBody = (id: unknown, extra: Record<string, unknown> = {}) => ({ id, input_ids: IDS, request_output_len: LEN, end_id: -1, ...extra });
const textBody = (id: unknown, prompts: string[]) => ({ id, text_input: prompts.length === 1 ? prompts[0] : prompts, max_tokens: LEN, end_id: -1 });
const tokenTensors = (extra: Tensor[] = []): Tensor[] => [
  { name: 'input_ids', datatype: 'INT32', shape: [1, IDS.length], data: IDS },
  { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [LEN] },
  { name: 'end_id', datatype: 'INT32', shape: [1, 1], data: [-1] },
  ...extra,
];
const flag = (name: string, value: boolean): Tensor => ({ name, datatype: 'BOOL', shape: [1, 1], data: [value] });
const stopTensors = [flag('stop', true)];

/** Starts `requests` while the loop holds, waits until all `n` executor requests are queued, then lets the loop run
 * exactly one iteration and hold: every one of them is running, one token in. Their answers come back unawaited (in
 * an array: an async function would wait for a promise it returned). */
async function liveTogether<T>(executor: Executor, n: number, requests: () => T[]): Promise<T[]> {
  executor.holdIterations(0);
  const started = requests();
  if (!(await waitFor(() => executor.numActiveRequests() === n))) throw new Error(`expected ${n} queued requests, have ${executor.numActiveRequests()}`);
  executor.holdIterations(1);
  if (!(await executor.awaitHeld())) throw new Error('the loop did not hold');
  return started;
}

/** Every response of a ModelStreamInfer call: `requests` written, then more written by `more` on each response. */
function streamCall(client: KserveClient, requests: unknown[], more: (r: any, write: (m: unknown) => void) => void = () => {}): { ended: Promise<any[]>; write(m: unknown): void; end(): void } {
  const call = client.ModelStreamInfer();
  const got: any[] = [];
  const ended = new Promise<any[]>((resolve, reject) => {
    call.on('data', (r: any) => { got.push(r); more(r, (m) => call.write(m)); });
    call.on('end', () => resolve(got));
    call.on('error', reject);
  });
  for (const r of requests) call.write(r);
  return { ended, write: (m) => call.write(m), end: () => call.end() };
}

const tokenCount = (events: any[]) => events.reduce((n, e) => n + (e.output_ids?.length ?? 0), 0);

t.test('stop by id', async (t) => {
  const { base, server } = await startTestServer(t, { model: MODEL, grpcPort: 0 });
  const executor = localExecutor(server);
  const client = kserveClient(t, `127.0.0.1:${server.grpcPort}`);
  // Nothing running, no KV block held, and every id given back.
  const allFree = () => {
    const s = executor.kvCacheStats();
    return s.freeNumBlocks === s.maxNumBlocks && executor.numActiveRequests() === 0 && server.context.liveRequests.size === 0;
  };
  const generate = (model: string, body: unknown) => postJson(`${base}/v2/models/${model}/generate`, body);
  const stop = (model: string, id: unknown) => generate(model, { id, stop: true });

  t.test('a running request\'s id is taken: another request with it is refused on every interface until it ends', async (t) => {
    const [first] = await liveTogether(executor, 1, () => [postSse(`${base}/v2/models/tensorrt_llm/generate_stream`, tokensBody('dup'))]);
    const again = await generate('tensorrt_llm', tokensBody('dup'));
    t.equal(again.status, 409, 'generate: 409 Conflict');
    t.match(again.json.error, /^id "dup" \(string\) is already used by a running request of model 'tensorrt_llm'; a stop request names one request by its id/);
    const infer = await postJson(`${base}/v2/models/tensorrt_llm/infer`, { id: 'dup', inputs: tokenTensors() });
    t.equal(infer.status, 409, 'infer: 409');
    const grpc = await rejected(client, 'ModelInfer', inferRequest('tensorrt_llm', tokenTensors(), { id: 'dup' }));
    t.equal(grpc.code, status.ALREADY_EXISTS, `ModelInfer: ${status[grpc.code]}`);
    t.match(grpc.details, /id "dup" \(string\) is already used by a running request of model 'tensorrt_llm'/);
    const s = streamCall(client, [inferRequest('tensorrt_llm', tokenTensors(), { id: 'dup' })]);
    s.end();
    const inBand = await s.ended;
    t.match(inBand[0]?.error_message, /id "dup" \(string\) is already used/, 'ModelStreamInfer: in-band, the stream carries on');
    t.equal(executor.numActiveRequests(), 1, 'none of them was enqueued: the first is still the only one');
    executor.holdIterations(-1);
    const events = (await first!).events;
    t.equal(tokenCount(events), LEN, 'the first runs to its end, untouched');
    t.notOk(events.some((e) => 'finish_reason' in e), 'a request nobody stopped has no finish_reason (Triton\'s shape)');
    const reused = await generate('tensorrt_llm', { ...tokensBody('dup'), request_output_len: 2 });
    t.equal(reused.status, 200, 'once it ended, the id is free again');
    t.equal((await generate('tensorrt_llm', { ...tokensBody('bad'), request_output_len: -1 })).status, 400);
    t.equal((await generate('tensorrt_llm', { ...tokensBody('bad'), request_output_len: 2 })).status, 200, 'a request refused as invalid gives its id back');
    t.ok(await waitFor(allFree), 'KV all free, every id given back');
  });

  t.test('ids belong to a model and keep their JSON type: a stop cancels exactly the request it names', async (t) => {
    const [named, numeric, otherModel] = await liveTogether(executor, 3, () => [
      postSse(`${base}/v2/models/tensorrt_llm/generate_stream`, tokensBody('123')),
      postSse(`${base}/v2/models/tensorrt_llm/generate_stream`, tokensBody(123)),
      postSse(`${base}/v2/models/ensemble/generate_stream`, textBody('123', ['What is machine learning?'])),
    ]);
    const stopped = await stop('tensorrt_llm', '123');
    t.equal(stopped.status, 200, 'the stop is answered as Triton answers it');
    t.equal(stopped.json.cancelled_requests, 1, 'and says it cancelled one request');
    t.equal(stopped.json.id, '123');
    t.ok(await waitFor(() => executor.numActiveRequests() === 2), 'the two others still run (the loop still holds)');
    t.equal((await stop('tensorrt_llm', '123')).json.cancelled_requests, 0, 'a second stop of the same id cancels nothing, and says so');
    const nobody = await stop('tensorrt_llm', 'nobody');
    t.same([nobody.status, nobody.json.cancelled_requests], [200, 0], 'a stop of an id nothing runs under: 200, cancelled_requests 0');
    executor.holdIterations(-1);
    const n = (await named!).events;
    t.equal(tokenCount(n), 1, 'the named request ends after the one token of its first iteration');
    t.equal(n.at(-1).finish_reason, 'cancelled', 'its last event says it was cancelled');
    const num = (await numeric!).events;
    t.equal(tokenCount(num), LEN, 'the request with the number 123 runs to its end: 123 is not "123"');
    t.equal(num[0].id, 123, 'its id is echoed as sent, a number');
    t.notOk(num.some((e) => 'finish_reason' in e));
    const other = (await otherModel!).events;
    t.ok(other.length > 1 && !other.some((e) => 'finish_reason' in e), 'the ensemble request with id "123" runs to its end: another model\'s id');
    t.ok(await waitFor(allFree), 'KV all free, every id given back');
  });

  t.test('two stops of one id: one cancels it, the other cancels nothing, whichever comes first', async (t) => {
    const [target] = await liveTogether(executor, 1, () => [generate('tensorrt_llm', tokensBody('twice'))]);
    const answers = await Promise.all([stop('tensorrt_llm', 'twice'), stop('tensorrt_llm', 'twice')]);
    t.same(answers.map((a) => a.json.cancelled_requests).sort(), [0, 1]);
    executor.holdIterations(-1);
    t.equal((await target!).json.finish_reason, 'cancelled');
    t.ok(await waitFor(allFree), 'KV all free, every id given back');
  });

  t.test('a stopped request ends with finish_reason "cancelled" on every interface; a stop reports on every interface', async (t) => {
    const emptyFinal = { parameters: { triton_enable_empty_final_response: { bool_param: true } } };
    let streamed!: ReturnType<typeof streamCall>;
    const [whole, batch, infer, unaryCall] = await liveTogether(executor, 6, () => {
      // (stream: its stop goes on the same stream, as inflight_batcher_llm_client sends it, once it is running)
      streamed = streamCall(client, [inferRequest('tensorrt_llm', tokenTensors([flag('streaming', true)]), { id: 's' })]);
      return [
        generate('tensorrt_llm', tokensBody('g')),
        generate('ensemble', textBody('b', ['What is machine learning?', 'The cat is'])),
        postJson(`${base}/v2/models/tensorrt_llm/infer`, { id: 'i', inputs: tokenTensors() }),
        unary(client, 'ModelInfer', inferRequest('tensorrt_llm', tokenTensors(), { id: 'u' })),
      ];
    });
    // The stops, one per interface: generate, infer, ModelInfer, and on the stream (asking for bare responses).
    t.equal((await stop('tensorrt_llm', 'g')).json.cancelled_requests, 1, 'generate: cancelled_requests 1');
    t.equal((await stop('ensemble', 'b')).json.cancelled_requests, 1, 'a batch is one request under its id');
    const inferStop = await postJson(`${base}/v2/models/tensorrt_llm/infer`, { id: 'i', inputs: [{ name: 'stop', datatype: 'BOOL', shape: [1], data: [true] }] });
    t.same([inferStop.status, inferStop.json.parameters, inferStop.json.outputs], [200, { cancelled_requests: 1 }, []], 'infer: 200, parameters.cancelled_requests');
    const grpcStop = await unary(client, 'ModelInfer', inferRequest('tensorrt_llm', stopTensors, { id: 'u' }));
    t.same([grpcStop.id, grpcStop.outputs, grpcStop.parameters.cancelled_requests?.int64_param], ['u', [], 1], 'ModelInfer: OK, no outputs, cancelled_requests 1');
    const nothing = await unary(client, 'ModelInfer', inferRequest('tensorrt_llm', stopTensors, { id: 'u' }));
    t.equal(nothing.parameters.cancelled_requests?.int64_param, 0, 'ModelInfer: a stop that cancelled nothing says 0');
    streamed.write(inferRequest('tensorrt_llm', stopTensors, { id: 's', ...emptyFinal }));
    t.ok(await waitFor(() => executor.numActiveRequests() === 0), 'every request stopped while the loop holds');
    streamed.end();
    executor.holdIterations(-1);

    const w = await whole;
    t.same([w.status, w.json.finish_reason, w.json.sequence_length], [200, 'cancelled', IDS.length + 1], 'generate: what it had, finish_reason "cancelled"');
    const b = await batch;
    t.same(b.json.finish_reason, ['cancelled', 'cancelled'], 'generate with a batch: per element');
    const i = await infer;
    t.same(i.json.parameters, { finish_reason: 'cancelled' }, 'infer: parameters.finish_reason');
    t.same(i.json.outputs.find((o: any) => o.name === 'sequence_length').data, [IDS.length + 1]);
    const u = await unaryCall;
    t.equal(u.parameters.finish_reason?.string_param, 'cancelled', 'ModelInfer: OK, parameters.finish_reason');
    t.same(outputsByName(u).sequence_length?.data, [IDS.length + 1]);
    const s = await streamed.ended;
    const own = s.filter((r) => r.infer_response.outputs.length > 0);
    t.equal(own.reduce((n, r) => n + outputsByName(r.infer_response).output_ids!.data.length, 0), 1, 'ModelStreamInfer: the one token of its one iteration');
    t.same(own.map(isFinal), [...own.slice(1).map(() => false), true], 'its last response flagged final');
    t.same(own.map((r) => r.infer_response.parameters.finish_reason?.string_param), [...own.slice(1).map(() => undefined), 'cancelled'], 'and that one marked cancelled');
    const answer = s.find((r) => r.infer_response.outputs.length === 0);
    t.same([answer?.infer_response.id, isFinal(answer), answer?.infer_response.parameters.cancelled_requests?.int64_param], ['s', true, 1],
      'the stop on the stream: a bare final response with cancelled_requests (asked for with triton_enable_empty_final_response)');
    t.ok(s.every((r) => r.error_message === ''));
    t.ok(await waitFor(allFree), 'KV all free, every id given back');
  });

  t.test('one model\'s ids are shared by HTTP and gRPC: a gRPC stop ends an HTTP stream of the model', async (t) => {
    const [target] = await liveTogether(executor, 1, () => [postSse(`${base}/v2/models/tensorrt_llm/generate_stream`, tokensBody('wire'))]);
    const s = streamCall(client, [inferRequest('tensorrt_llm', stopTensors, { id: 'wire' })]);
    t.ok(await waitFor(() => executor.numActiveRequests() === 0), 'the HTTP request ended while the loop holds');
    s.end();
    t.same(await s.ended, [], 'a stop on a stream answers nothing unless bare responses were asked for (as Triton)');
    executor.holdIterations(-1);
    const events = (await target!).events;
    t.equal(tokenCount(events), 1);
    t.equal(events.at(-1).finish_reason, 'cancelled');
    t.ok(await waitFor(allFree), 'KV all free, every id given back');
  });
  t.test('a stop that arrives while its request is still being tokenized cancels it as it is enqueued', async (t) => {
    const pool = server.context.tokenizerPool;
    pool.holdTasks();
    t.teardown(() => pool.releaseTasks());
    const target = generate('ensemble', textBody('tok', ['What is machine learning?']));
    await pool.awaitHeldTask();
    t.equal(executor.numActiveRequests(), 0, 'nothing is enqueued yet: the prompt is held in a tokenizer thread');
    const stopped = stop('ensemble', 'tok');
    t.ok(await waitFor(() => server.context.liveRequests.stopsUnderWay === 1), 'the stop found the request and waits for it');
    // The loop holds, so the request cannot run its 40 tokens (a millisecond on this model) before the cancel lands.
    executor.holdIterations(0);
    t.teardown(() => executor.holdIterations(-1));
    pool.releaseTasks();
    t.equal((await stopped).json.cancelled_requests, 1, 'the stop reports the request it cancelled');
    const answer = (await target).json;
    t.equal(answer.finish_reason, 'cancelled', 'the request ends cancelled, not with its 40 tokens');
    t.equal(answer.text_output, 'What is machine learning?', 'cancelled as it was enqueued: not one token generated');
    executor.holdIterations(-1);
    t.ok(await waitFor(allFree), 'KV all free, every id given back');
  });
});
