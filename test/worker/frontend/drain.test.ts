// A server's drain as its clients see it, against a real server (HTTP + gRPC) on the tiny Llama: while it drains
// the ports stay open, every new request is refused with a 503 / UNAVAILABLE naming the drain, liveness stays 200
// and readiness turns 503, and the requests in flight still complete; a request cut at the drain deadline ends
// with an explicit error on every interface, never as a complete-looking answer. The executor's test hold
// (held through the drain's start) keeps the requests in flight for as long as the test looks, on any machine.
import { credentials, type Client, type ServiceError } from '@grpc/grpc-js';
import t from 'tap';

import { GrpcClient, type GrpcRequest } from '../../../launcher/client/grpc.js';
import { inferenceService } from '../../../worker/frontend/grpc/proto.js';
import { fixtureDir, referenceCases } from '../../helpers/fixtures.js';
import { localExecutor, parseSse, postJson, startTestServer, waitFor } from '../../helpers/serving.js';

const MODEL = fixtureDir('tiny-llama');
const IDS = referenceCases('tiny-llama')[0]!.input_ids;
const REFUSAL = 'the server is draining (SIGTERM): not accepting new requests';
const CUT = /^the request was cancelled before it finished: the server is draining \(SIGTERM\) and its drain timeout \(--drain-timeout 0\.05 s\) ran out$/;
const CUT_IN_BAND = new RegExp(`^ModelStreamInfer request "" failed: ${CUT.source.slice(1)}`);

const tokensBody = (n: number, streaming: boolean) => ({ input_ids: IDS, request_output_len: n, end_id: -1, streaming });
const grpcTokens = (n: number, streaming: boolean): GrpcRequest => ({
  model: 'tensorrt_llm',
  inputs: [
    { name: 'input_ids', datatype: 'INT32', shape: [1, IDS.length], data: IDS },
    { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [n] },
    { name: 'end_id', datatype: 'INT32', shape: [1, 1], data: [-1] },
    { name: 'streaming', datatype: 'BOOL', shape: [1, 1], data: [streaming] },
  ],
});

/** ServerLive / ServerReady straight through grpc-js (the client tool has no call for them). */
function health(address: string, method: 'ServerLive' | 'ServerReady'): Promise<Record<string, boolean>> {
  const Service = inferenceService();
  const client = new Service(address, credentials.createInsecure()) as Client & Record<string, any>;
  return new Promise((resolve, reject) => client[method]({}, (e: ServiceError | null, r: Record<string, boolean>) => {
    client.close();
    if (e) reject(e); else resolve(r);
  }));
}

/** Every response of one request on a ModelStreamInfer call the client half-closes; an in-band error throws. */
async function streamed(client: GrpcClient, request: GrpcRequest): Promise<number[]> {
  const call = client.stream();
  call.send(request);
  call.end();
  const ids: number[] = [];
  for await (const r of call.responses) ids.push(...(r.outputs.find((o) => o.name === 'output_ids')?.data as number[] ?? []));
  return ids;
}

const settle = <T>(p: Promise<T>) => p.then((value) => ({ value }), (error: Error) => ({ error }));

t.test('draining: new requests get 503 / UNAVAILABLE naming the drain, live stays 200, the requests in flight complete', async (t) => {
  const { server, base } = await startTestServer(t, { model: MODEL, grpcPort: 0, drainTimeoutMs: 600_000 });
  const executor = localExecutor(server);
  const grpcAddress = `127.0.0.1:${server.grpcPort}`;
  const client = new GrpcClient(grpcAddress);
  t.teardown(() => client.close());

  // Two requests in flight, one per interface; the loop holds before their first iteration, through the drain.
  executor.holdIterations(0, { throughDrain: true });
  const httpInFlight = fetch(`${base}/v2/models/tensorrt_llm/generate_stream`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(tokensBody(12, true)) })
    .then(async (res) => ({ status: res.status, events: parseSse(await res.text()) }));
  const grpcInFlight = settle(streamed(client, grpcTokens(12, true)));
  t.ok(await waitFor(() => executor.numActiveRequests() === 2), 'both requests are in flight');

  const closing = server.close('SIGTERM');
  t.equal(executor.numActiveRequests(), 2, 'the drain has begun with both still in flight');

  const generate = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'What is', max_tokens: 4 });
  t.same(generate, { status: 503, json: { error: REFUSAL } }, 'KServe generate: 503 with the reason');
  const completion = await postJson(`${base}/v1/completions`, { model: 'tiny-llama', prompt: 'What is', max_tokens: 4 });
  t.equal(completion.status, 503, 'OpenAI completions: 503');
  t.match(completion.json, { error: { message: REFUSAL, type: 'ServiceUnavailableError', code: 503 } }, 'in OpenAI\'s error shape');
  t.equal((await fetch(`${base}/v2/health/live`)).status, 200, '/v2/health/live: 200 (the process is alive and answering)');
  t.equal((await fetch(`${base}/v2/health/ready`)).status, 503, '/v2/health/ready: 503 (send no more)');

  const unary = await settle(client.infer(grpcTokens(4, false)));
  t.match(unary, { error: { message: `${grpcAddress} ModelInfer answered UNAVAILABLE: ${REFUSAL}` } }, 'gRPC ModelInfer: UNAVAILABLE with the reason');
  const newStream = await settle(streamed(client, grpcTokens(4, true)));
  t.match(newStream, { error: { message: `${grpcAddress} ModelStreamInfer answered UNAVAILABLE: ${REFUSAL}` } }, 'a new ModelStreamInfer call: UNAVAILABLE');
  t.same(await health(grpcAddress, 'ServerLive'), { live: true }, 'gRPC ServerLive: live');
  t.same(await health(grpcAddress, 'ServerReady'), { ready: false }, 'gRPC ServerReady: not ready');
  t.equal(executor.numActiveRequests(), 2, 'and all the while, both requests are still in flight');

  executor.holdIterations(-1);
  const http = await httpInFlight;
  t.equal(http.status, 200);
  t.equal(http.events.flatMap((e) => e.output_ids ?? []).length, 12, 'the HTTP stream in flight got all its 12 tokens');
  t.notOk(http.events.some((e) => e.error !== undefined), 'and no error');
  t.match(await grpcInFlight, { value: { length: 12 } }, 'the gRPC stream in flight got all its 12 tokens');
  await closing;
  t.match(await settle(fetch(`${base}/v2/health/live`)), { error: { cause: { code: 'ECONNREFUSED' } } }, 'the port closes once the drain is over');
});

t.test('a request cut at the drain deadline ends with an explicit error on every interface', async (t) => {
  const { server, base } = await startTestServer(t, { model: MODEL, grpcPort: 0, drainTimeoutMs: 50 });
  const executor = localExecutor(server);
  const grpcAddress = `127.0.0.1:${server.grpcPort}`;
  const client = new GrpcClient(grpcAddress);
  t.teardown(() => client.close());

  // Every request runs exactly one iteration (one token) and then holds: none can finish before the deadline.
  executor.holdIterations(0, { throughDrain: true });
  const post = (path: string, body: unknown) => fetch(`${base}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } })
    .then(async (res) => ({ status: res.status, text: await res.text() }));
  const sse = post('/v2/models/tensorrt_llm/generate_stream', tokensBody(40, true));
  const textSse = post('/v2/models/ensemble/generate_stream', { text_input: 'What is', max_tokens: 40, end_id: -1 });
  const whole = post('/v2/models/tensorrt_llm/generate', tokensBody(40, false));
  const openAiStream = post('/v1/completions', { model: 'tiny-llama', prompt: 'What is', max_tokens: 40, ignore_eos: true, stream: true });
  const openAiWhole = post('/v1/chat/completions', { model: 'tiny-llama', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 40, ignore_eos: true });
  const grpcStream = settle(streamed(client, grpcTokens(40, true)));
  const grpcUnary = settle(client.infer(grpcTokens(40, false)));
  t.ok(await waitFor(() => executor.numActiveRequests() === 7), 'seven requests in flight');
  executor.holdIterations(1, { throughDrain: true });
  t.ok(await executor.awaitHeld(), 'one iteration ran: each has its first token');

  await server.close('SIGTERM');
  const last = (text: string) => parseSse(text).at(-1);

  const tokens = await sse;
  t.equal(tokens.status, 200, 'generate_stream had started (200 sent with the first event)');
  t.equal(parseSse(tokens.text)[0].output_ids.length, 1, 'its first event carried the first token');
  t.match(last(tokens.text), { error: CUT }, 'and its last event is {"error": ...} naming the drain (Triton\'s mid-stream error)');
  t.match(last((await textSse).text), { error: CUT }, 'the same on the text model\'s stream');
  const w = await whole;
  t.equal(w.status, 503, 'generate (whole answer): 503, not a 200 with a partial output');
  t.match(JSON.parse(w.text), { error: CUT });
  const stream = await openAiStream;
  t.match(last(stream.text), { error: { message: CUT, type: 'ServiceUnavailableError', code: 503 } },
    'OpenAI stream: ends with an error event (openai-python raises APIError on it), no [DONE]');
  t.notOk(parseSse(stream.text).some((e) => e.choices?.some((c: { finish_reason: unknown }) => c.finish_reason !== null)), 'no chunk claims a finish');
  const chat = await openAiWhole;
  t.equal(chat.status, 503, 'OpenAI chat (whole answer): 503');
  t.match(JSON.parse(chat.text), { error: { message: CUT, type: 'ServiceUnavailableError' } });
  t.match(await grpcStream, { error: { message: CUT_IN_BAND } }, 'ModelStreamInfer: the request fails in-band (error_message)');
  t.match(await grpcUnary, { error: { message: new RegExp(`ModelInfer answered UNAVAILABLE: ${CUT.source.slice(1, -1)}`) } }, 'ModelInfer: UNAVAILABLE naming the drain');
  t.equal(executor.numActiveRequests(), 0, 'nothing left running');
});

t.test('an open ModelStreamInfer call the client never half-closes ends with UNAVAILABLE naming the drain', async (t) => {
  const { server } = await startTestServer(t, { model: MODEL, grpcPort: 0, drainTimeoutMs: 600_000 });
  const client = new GrpcClient(`127.0.0.1:${server.grpcPort}`);
  t.teardown(() => client.close());
  const call = client.stream();
  call.send(grpcTokens(3, true));
  const got: number[] = [];
  let first: () => void = () => {};
  const firstDone = new Promise<void>((resolve) => { first = resolve; });
  const ended = (async () => {
    for await (const r of call.responses) {
      got.push(...(r.outputs.find((o) => o.name === 'output_ids')?.data as number[] ?? []));
      if (r.final) first();
    }
  })().then(() => 'ended OK', (error: Error) => error.message);
  await firstDone;
  t.equal(got.length, 3, 'the request on it was answered in full');
  await server.close('SIGTERM');
  t.match(await ended, /ModelStreamInfer answered UNAVAILABLE: the server is draining \(SIGTERM\): not accepting new requests/);
});
