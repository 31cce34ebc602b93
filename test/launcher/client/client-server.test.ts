// `trtllm-launch client` against a real server on the tiny GPT-2: the seeds' lines, streaming = whole, batches by
// batch_index, logits shapes, --stop-after-ms cancelling mid-generation, the same lines over -i grpc as over HTTP,
// and clear errors for bad flags and URLs.
import { type AddressInfo, createServer } from 'node:net';
import { join } from 'node:path';

import { execa } from 'execa';
import t from 'tap';

import type { ClientOptions } from '../../../launcher/client/client-options.js';
import { runClient } from '../../../launcher/client/client-run.js';
import { packageRoot } from '../../../worker/common/package-root.js';
import { localExecutor, startTestServer, waitFor } from '../../helpers/serving.js';

const bin = join(packageRoot(), 'bin', 'trtllm-launch.js');

function options(url: string, o: Partial<ClientOptions> = {}): ClientOptions {
  return {
    url, protocol: 'http', modelName: 'tensorrt_llm', text: 'Born in north-east France, Soyer trained as a', requestOutputLen: 8,
    streaming: false, returnLogProbs: false, returnContextLogits: false, returnGenerationLogits: false, excludeInputInOutput: false, ...o,
  };
}

/** A port nothing listens on: one the OS just handed out and took back. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

async function run(o: ClientOptions) {
  const lines: string[] = [];
  const result = await runClient(o, (l) => lines.push(l));
  return { result, lines };
}

t.test('client over HTTP', async (t) => {
  const { base, metricsBase, server } = await startTestServer(t, { maxBatchSize: 4, grpcPort: 0 });
  const grpcUrl = `127.0.0.1:${server.grpcPort}`;
  const executor = localExecutor(server);

  t.test("tensorrt_llm: the seeds' lines, logits shapes; streaming gives the same tokens", async (t) => {
    const whole = await run(options(base, { returnLogProbs: true, returnContextLogits: true, returnGenerationLogits: true }));
    const inputLine = whole.lines.find((l) => l.startsWith('Input sequence: '))!;
    const promptLen = JSON.parse(inputLine.slice('Input sequence: '.length)).length;
    t.match(whole.lines.join('\n'), /Input sequence: \[.*\]\nGot completed request\nInput: Born in north-east France, Soyer trained as a\nOutput beam 0: .*\nOutput sequence: \[/);
    t.ok(whole.lines.includes(`context_logits.shape: (1, ${promptLen}, 512)`), 'context logits (1, prompt, vocab)');
    t.ok(whole.lines.includes('generation_logits.shape: (1, 1, 8, 512)'), 'generation logits (1, beams, tokens, vocab)');
    t.ok(whole.lines.includes('Finish: length (generated 8 of 8 tokens)'));
    const e = whole.result.elements[0]!;
    t.equal(e.outputIds!.length, promptLen + 8, 'output_ids hold the prompt, then 8 tokens');
    t.equal(e.outputLogProbs!.length, 8);
    const streamed = await run(options(base, { streaming: true }));
    t.same(streamed.result.elements[0]!.outputIds, e.outputIds!.slice(promptLen), 'streamed = whole, new tokens only');
    t.ok(streamed.result.responses >= 2, `${streamed.result.responses} streamed responses`);
    const excluded = await run(options(base, { excludeInputInOutput: true, inputTokens: [5, 6, 7] }));
    t.equal(excluded.result.elements[0]!.outputIds!.length, 8, '--exclude-input-in-output with --input-tokens');
  });

  t.test('ensemble: text, streaming, a batch grouped by batch_index', async (t) => {
    const text = await run(options(base, { modelName: 'ensemble', text: 'What is machine learning?' }));
    t.match(text.lines.join('\n'), /Got completed request\nInput: What is machine learning\?\nOutput: What is machine learning\?/);
    const streamed = await run(options(base, { modelName: 'ensemble', text: 'What is machine learning?', streaming: true, excludeInputInOutput: true }));
    t.equal('What is machine learning?' + streamed.result.elements[0]!.outputText, text.result.elements[0]!.outputText);
    const batch = await run(options(base, { modelName: 'ensemble', batchInputs: '["This is a test","I want you to","The cat is"]', streaming: true }));
    t.same(batch.result.elements.map((e) => e.batchIndex), [0, 1, 2]);
    t.same(batch.lines.filter((l) => l.startsWith('batch_index')), ['batch_index 0:', 'batch_index 1:', 'batch_index 2:']);
    const tokens = await run(options(base, { batchInputs: '["This is a test","The cat is"]', topK: 1, temperature: 1 }));
    t.same(tokens.result.elements.map((e) => e.generated), [8, 8], 'token model batch: input_ids [2, L] + input_lengths');
  });

  t.test('--stop-after-ms stops the request: fewer tokens than asked, a cancelled finish', async (t) => {
    // (matched by hand: the default process metrics can read "Nan", which the strict helper parser refuses)
    const failures = async () => Number(/nv_inference_request_failure\{model="tensorrt_llm",version="1"\} (\d+)/.exec(await (await fetch(`${metricsBase}/metrics`)).text())![1]);
    const before = await failures();
    // The loop holds before the request's first iteration: only the client's stop can end it.
    executor.holdIterations(0);
    const stopped = await run(options(base, { inputTokens: [1, 2, 3], requestOutputLen: 100, streaming: true, stopAfterMs: 10 }));
    executor.holdIterations(-1);
    const e = stopped.result.elements[0];
    t.ok(stopped.result.stopSent, 'the stop request was sent');
    t.equal(e?.generated ?? 0, 0, 'no token of the 100 asked for');
    t.equal(e?.finish ?? 'cancelled', 'cancelled');
    t.match(stopped.lines.join('\n'), /Finish: cancelled \(generated 0 of 100 tokens\)/);
    t.ok(await waitFor(async () => (await failures()) === before + 1), 'the server counts the cancelled request as not successful');
    t.ok(await waitFor(() => executor.numActiveRequests() === 0), 'nothing left running');
  });

  t.test('-i grpc prints what -i http prints, for every kind of request', async (t) => {
    const cases: Partial<ClientOptions>[] = [
      {}, { streaming: true }, { returnLogProbs: true, returnContextLogits: true, returnGenerationLogits: true },
      { streaming: true, returnLogProbs: true, returnContextLogits: true, returnGenerationLogits: true, excludeInputInOutput: true },
      { modelName: 'ensemble', text: 'What is machine learning?', returnLogProbs: true },
      { modelName: 'tensorrt_llm_bls', text: 'What is machine learning?', streaming: true },
      { modelName: 'ensemble', batchInputs: '["This is a test","I want you to","The cat is"]', streaming: true },
      { batchInputs: '["This is a test","The cat is"]', topK: 1, temperature: 1 },
    ];
    for (const c of cases) {
      const http = await run(options(base, c));
      const grpc = await run(options(grpcUrl, { ...c, protocol: 'grpc' }));
      t.same(grpc.lines, http.lines, `the same lines: ${JSON.stringify(c)}`);
      t.equal(grpc.result.responses, http.result.responses, 'as many responses');
    }
  });

  t.test('-i grpc --stop-after-ms: the stop goes on the same stream and ends the request early', async (t) => {
    // The loop holds before the request's first iteration: only the stop on the stream can end it.
    executor.holdIterations(0);
    const stopped = await run(options(grpcUrl, { protocol: 'grpc', inputTokens: [1, 2, 3], requestOutputLen: 100, streaming: true, stopAfterMs: 10 }));
    executor.holdIterations(-1);
    const e = stopped.result.elements[0];
    t.equal(`sent ${stopped.result.stopSent}, ${e?.generated ?? 0} of 100 tokens, ${e?.finish ?? 'cancelled'}`, 'sent true, 0 of 100 tokens, cancelled');
    t.ok(await waitFor(() => executor.numActiveRequests() === 0), 'nothing left running');
  });

  t.test('errors name the flag and the value', async (t) => {
    const port = new URL(base).port;
    await t.rejects(run(options(base, { protocol: 'udp' })), /-i\/--protocol must be http or grpc, got "udp"/);
    await t.rejects(run(options(`127.0.0.1:${await closedPort()}`, { protocol: 'grpc' })), /cannot reach 127\.0\.0\.1:\d+ \(.*ECONNREFUSED.*\); is the server running with its gRPC port there/);
    await t.rejects(run(options(grpcUrl, { protocol: 'grpc', inputTokens: [1, 99999] })), /ModelInfer answered INVALID_ARGUMENT: .*99999/, 'a server rejection, its status and message');
    await t.rejects(run(options(grpcUrl, { protocol: 'grpc', inputTokens: [1, 99999], streaming: true })), /ModelStreamInfer request .* failed: .*99999/);
    await t.rejects(run(options(base, { modelName: 'ensemble', batchInputs: 'not json' })), /--batch-inputs must be a JSON list of non-empty prompts/);
    const closed = await closedPort();
    await t.rejects(run(options(`http://127.0.0.1:${closed}`)),
      new RegExp(`cannot reach http://127\\.0\\.0\\.1:${closed}/v2/health/ready \\(ECONNREFUSED\\); is the server running`));
    await t.rejects(run(options(base, { inputTokens: [1, 99999] })), /answered 400: .*99999/, 'a server rejection is passed on with its message');
    // The command line itself: a parse error, then a run, as users type them.
    const len = await execa('node', [bin, 'client', '--request-output-len', 'abc'], { reject: false });
    t.not(len.exitCode, 0);
    t.match(len.stderr, /--request-output-len must be an integer >= 1, got "abc"/);
    const grpc = await execa('node', [bin, 'client', '-u', `http://localhost:${port}`, '-i', 'grpc'], { reject: false });
    t.equal(grpc.exitCode, 2);
    t.match(grpc.stderr, /^trtllm-launch client: --url for -i grpc must be host:port/, 'one line, no stack');
    const viaGrpc = await execa('node', [bin, 'client', '-u', grpcUrl, '-i', 'grpc', '-o', '3', '--streaming'], { reject: false });
    t.equal(viaGrpc.exitCode, 0, viaGrpc.stderr);
    t.match(viaGrpc.stdout, /Got completed request\nInput: Born in north-east France, Soyer trained as a\nOutput beam 0: /);
    const ok = await execa('node', [bin, 'client', '-u', `localhost:${port}`, '-o', '3'], { reject: false });
    t.equal(ok.exitCode, 0, ok.stderr);
    t.match(ok.stdout, /Got completed request\nInput: Born in north-east France, Soyer trained as a\nOutput beam 0: /);
  });
});
