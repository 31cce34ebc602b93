// What one client's odd request does to a gRPC connection, against a real server through a real grpc-js client:
// a 100,000-character model or input name gets its NOT_FOUND / INVALID_ARGUMENT with the name cut short (the whole
// name in the grpc-message trailer could never be sent, and the call — and every other call on its HTTP/2
// connection — would hang), and the next call on the same channel is answered; bytes protobuf cannot decode are
// the client's INVALID_ARGUMENT, not the server's INTERNAL, and a stream carries on after them.
import { type ServiceError, status } from '@grpc/grpc-js';
import t from 'tap';

import { clipText, QUOTE_LIMIT, quoteName } from '../../../worker/common/quote-value.js';
import { MAX_STATUS_MESSAGE_BYTES, trailerSafe } from '../../../worker/frontend/grpc/status.js';
import { fixtureDir } from '../../helpers/fixtures.js';
import { inferRequest, isFinal, kserveClient, outputsByName, rawUnary, rejected, type Tensor, unary } from '../../helpers/kserve-grpc.js';
import { postJson, startTestServer } from '../../helpers/serving.js';

const MODEL = fixtureDir('tiny-llama');
const LONG = 100_000;
const text = (prompt: string, maxTokens: number): Tensor[] => [
  { name: 'text_input', datatype: 'BYTES', shape: [1, 1], data: [prompt] },
  { name: 'max_tokens', datatype: 'INT32', shape: [1, 1], data: [maxTokens] },
];

t.test('quoting a client value: cut to QUOTE_LIMIT with the full length, never inside a surrogate pair', async (t) => {
  t.equal(quoteName('ensemble'), "'ensemble'");
  const long = quoteName('x'.repeat(LONG));
  t.equal(long, `'${'x'.repeat(QUOTE_LIMIT)}…' (${LONG} characters)`);
  const emoji = '😀'.repeat(LONG);   // two UTF-16 units each: a cut at an odd place would split one
  const { head, cut } = clipText(`a${emoji}`);
  t.ok(cut);
  t.equal(head.length, QUOTE_LIMIT - 1, 'the cut steps back from the middle of a pair');
  t.doesNotThrow(() => encodeURI(head), 'what is left is well-formed');
  t.equal(quoteName('x'.repeat(LONG), '`').slice(0, 2), '`x', 'OpenAI messages quote with backticks');
});

t.test('a status message always fits the grpc-message trailer', async (t) => {
  for (const long of ['x'.repeat(LONG), '中'.repeat(LONG), `${'😀'.repeat(LONG)}\uD800`]) {
    const safe = trailerSafe(long);
    t.ok(encodeURI(safe).length <= MAX_STATUS_MESSAGE_BYTES, `${long.slice(0, 2)}…: ${encodeURI(safe).length} bytes encoded`);
    t.match(safe, new RegExp(`\\(cut: the message has ${long.length} characters\\)$`));
  }
  t.equal(trailerSafe('a\uD800b'), 'a\uFFFDb', 'a lone surrogate (encodeURI throws on it) becomes U+FFFD');
  t.equal(trailerSafe('unknown model'), 'unknown model', 'a short message is left alone');
});

t.test('a 100,000-character name gets its status, and the channel keeps serving', async (t) => {
  const { server, base } = await startTestServer(t, { model: MODEL, grpcPort: 0 });
  const client = kserveClient(t, `127.0.0.1:${server.grpcPort}`);
  const serves = async (what: string) => {
    t.same(await unary(client, 'ServerLive', {}), { live: true }, `${what}: the next call on the channel is answered`);
    const r = await unary(client, 'ModelInfer', inferRequest('ensemble', text('Hello', 2)));
    t.equal(typeof outputsByName(r).text_output?.data[0], 'string', `${what}: and so is an inference`);
  };

  const model = await rejected(client, 'ModelInfer', inferRequest('m'.repeat(LONG), text('Hello', 2)));
  t.equal(model.code, status.NOT_FOUND, `a long model name: ${status[model.code]}`);
  t.match(model.details, new RegExp(`^unknown model 'm{${QUOTE_LIMIT}}…' \\(${LONG} characters\\); this server serves ensemble`));
  await serves('after the long model name');

  const input = await rejected(client, 'ModelInfer', inferRequest('ensemble', [...text('Hello', 2), { name: 'i'.repeat(LONG), datatype: 'BOOL', shape: [1, 1], data: [true] }]));
  t.equal(input.code, status.INVALID_ARGUMENT, `a long input name: ${status[input.code]}`);
  t.match(input.details, new RegExp(`^unexpected input 'i{${QUOTE_LIMIT}}…' \\(${LONG} characters\\) for model 'ensemble'`));
  await serves('after the long input name');

  const version = await rejected(client, 'ModelInfer', inferRequest('ensemble', text('Hello', 2), { model_version: 'v'.repeat(LONG) }));
  t.equal(version.code, status.NOT_FOUND, 'a long version');
  t.ok(version.details.length < 2 * QUOTE_LIMIT + 200, `the version cut short (${version.details.length} characters)`);

  const value = await rejected(client, 'ModelInfer', inferRequest('ensemble', [...text('Hello', 2), { name: 'stream', datatype: 'BYTES', shape: [1, 1], data: ['s'.repeat(LONG)] }]));
  t.equal(value.code, status.INVALID_ARGUMENT, 'a long value of the wrong type');
  t.match(value.details, new RegExp(`"s{${QUOTE_LIMIT}}…" \\(a string of ${LONG} characters\\)`), 'the value cut short');
  await serves('after the long value');

  // A stream reports in-band (Triton's decoupled errors) and carries on with the next request.
  const call = client.ModelStreamInfer();
  const got: any[] = [];
  const ended = new Promise<void>((resolve, reject) => {
    call.on('data', (r: any) => got.push(r));
    call.on('end', resolve);
    call.on('error', reject);
  });
  call.write(inferRequest('m'.repeat(LONG), text('Hello', 2), { id: 'long' }));
  call.write(inferRequest('ensemble', text('Hello', 2), { id: 'ok' }));
  call.end();
  await ended;
  const error = got.find((r) => r.error_message !== '');
  t.match(error?.error_message, new RegExp(`^unknown model 'm{${QUOTE_LIMIT}}…' \\(${LONG} characters\\)`), 'in-band error, cut short');
  t.ok(got.some((r) => r.infer_response.id === 'ok' && isFinal(r)), 'the next request on the stream is served to the end');

  // HTTP echoes the same words, cut the same way.
  const http = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'Hello', max_tokens: 2, ['k'.repeat(LONG)]: 1 });
  t.equal(http.status, 400);
  t.match(http.json.error, new RegExp(`^unexpected input 'k{${QUOTE_LIMIT}}…' \\(${LONG} characters\\) for model 'ensemble'`));
  const openai = await postJson(`${base}/v1/completions`, { model: 'o'.repeat(LONG), prompt: 'Hello', max_tokens: 2 });
  t.equal(openai.status, 404);
  t.match(openai.json.error.message, new RegExp(`^The model \`o{${QUOTE_LIMIT}}…\` \\(${LONG} characters\\) does not exist`));
});

t.test('bytes protobuf cannot decode: INVALID_ARGUMENT naming the method, on unary calls and in-band on a stream', async (t) => {
  const { server } = await startTestServer(t, { model: MODEL, grpcPort: 0 });
  const client = kserveClient(t, `127.0.0.1:${server.grpcPort}`);
  // 0xff 0xff 0xff 0xff: a field tag whose varint never ends inside the message.
  const garbage = Buffer.from([0xff, 0xff, 0xff, 0xff]);
  for (const method of ['ModelInfer', 'ServerLive', 'ModelReady']) {
    const e = await rawUnary(client, method, garbage);
    t.equal(e?.code, status.INVALID_ARGUMENT, `${method}: ${e ? status[e.code] : 'OK'}`);
    t.match(e?.details, new RegExp(`^the ${method} request is not a valid protobuf message \\(4 bytes; .+\\)$`));
  }
  t.same(await unary(client, 'ServerLive', {}), { live: true }, 'the channel still serves');

  // On ModelStreamInfer the undecodable message fails in-band and the next one on the stream is served.
  const encode = (r: Record<string, unknown>) => (client as any).ModelStreamInfer.requestSerialize(r) as Buffer;
  const call = client.makeBidiStreamRequest('/inference.GRPCInferenceService/ModelStreamInfer', (b: Buffer) => b,
    (client as any).ModelStreamInfer.responseDeserialize);
  const got: any[] = [];
  const ended = new Promise<void>((resolve, reject) => {
    call.on('data', (r: any) => got.push(r));
    call.on('end', resolve);
    call.on('error', (e: ServiceError) => reject(e));
  });
  call.write(garbage);
  call.write(encode(inferRequest('ensemble', text('Hello', 2), { id: 'after' })));
  call.end();
  await ended;
  t.match(got.find((r) => r.error_message !== '')?.error_message, /^the ModelStreamInfer request is not a valid protobuf message \(4 bytes; /);
  t.ok(got.some((r) => r.infer_response.id === 'after' && isFinal(r)), 'the request after it is served to the end');
});
