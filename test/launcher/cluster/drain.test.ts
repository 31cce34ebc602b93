// SIGTERM to a real world-size-2 cluster (mpirun, two ranks) as an operations team sends it: while the leader drains,
// its ports stay open — new requests get a 503 / UNAVAILABLE naming the drain, /v2/health/live stays 200 — and the
// request in flight completes before everything stops with exit 0. The leader's loop is held through the drain's
// start (TRTLLM_TEST_HOOKS, POST /test/hold) so the request is still in flight however long the test takes to look.
import { join } from 'node:path';

import { execa } from 'execa';
import t from 'tap';

import { GrpcClient } from '../../../launcher/client/grpc.js';
import { packageRoot } from '../../../worker/common/package-root.js';
import { fixtureDir, referenceCases } from '../../helpers/fixtures.js';
import { freePort, processesWith } from '../../helpers/processes.js';
import { waitFor } from '../../helpers/wait.js';

const bin = join(packageRoot(), 'bin', 'trtllm-launch.js');
const IDS = referenceCases('tiny-llama')[0]!.input_ids;
const REFUSAL = 'the server is draining (SIGTERM): not accepting new requests';

t.test('SIGTERM: 503 naming the drain on HTTP and gRPC, live 200, the request in flight completes, exit 0', async (t) => {
  const [port, metrics, grpcPort] = [await freePort(), await freePort(), await freePort()];
  let all = '';
  const child = execa(process.execPath, [bin, '--model', fixtureDir('tiny-llama'), '--world-size', '2', '--oversubscribe',
    '--http-port', String(port), '--metrics-port', String(metrics), '--grpc-port', String(grpcPort), '--threads', '1',
    '--drain-timeout', '600'], { reject: false, all: true, env: { TRTLLM_TEST_HOOKS: '1' } });
  t.teardown(() => { child.kill('SIGKILL'); });
  const ready = new Promise<boolean>((resolve) => {
    child.all!.on('data', (chunk: Buffer) => {
      all += chunk.toString();
      if (all.includes('[launcher] ready after')) resolve(true);
    });
    void child.then(() => resolve(false));
  });
  const up = await ready;
  t.ok(up, up ? 'ready' : `not ready: ${all.slice(-1500)}`);
  const base = `http://127.0.0.1:${port}`;
  const post = (path: string, body: unknown) => fetch(`${base}${path}`, { method: 'POST', body: JSON.stringify(body) });
  const active = async () => Number(/^nv_trt_llm_request_metrics\{[^}]*request_type="active"[^}]*\} (\S+)$/m.exec(await (await fetch(`http://127.0.0.1:${metrics}/metrics`)).text())?.[1]);

  t.equal((await post('/test/hold', { iterations: 0, through_drain: true })).status, 200, 'the leader holds, through the drain');
  const inFlight = post('/v2/models/tensorrt_llm/generate', { input_ids: IDS, request_output_len: 8, end_id: -1 })
    .then(async (res) => ({ status: res.status, json: await res.json() as { output_ids?: number[] } }));
  t.ok(await waitFor(async () => (await active()) === 1), 'one request in flight at the leader');

  child.kill('SIGTERM');
  t.ok(await waitFor(async () => (await fetch(`${base}/v2/health/ready`)).status === 503), 'the leader is draining: ready is 503');
  const refused = await post('/v2/models/ensemble/generate', { text_input: 'What is', max_tokens: 4 });
  t.equal(refused.status, 503, 'a new request: 503, not a refused connection');
  t.same(await refused.json(), { error: REFUSAL }, 'with the reason');
  t.equal((await fetch(`${base}/v2/health/live`)).status, 200, '/v2/health/live: 200 while draining');
  const grpc = new GrpcClient(`127.0.0.1:${grpcPort}`);
  const unary = await grpc.infer({ model: 'tensorrt_llm', inputs: [
    { name: 'input_ids', datatype: 'INT32', shape: [1, IDS.length], data: IDS },
    { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [2] },
  ] }).then(() => 'answered', (error: Error) => error.message);
  grpc.close();
  t.equal(unary, `127.0.0.1:${grpcPort} ModelInfer answered UNAVAILABLE: ${REFUSAL}`, 'gRPC: UNAVAILABLE with the reason');
  t.equal(await active(), 1, 'the request is still in flight');

  t.equal((await post('/test/hold', { iterations: -1 })).status, 200, 'released');
  const done = await inFlight;
  t.equal(done.status, 200, 'the request in flight completed');
  t.equal(done.json.output_ids?.length, IDS.length + 8, 'with all 8 tokens');
  const result = await child;
  t.equal(result.exitCode, 0, result.exitCode === 0 ? 'exit 0' : `exit ${result.exitCode}: ${all.slice(-800)}`);
  t.match(all, /all ranks stopped cleanly/);
  t.ok(await waitFor(() => processesWith(`--http-port ${port}`).length === 0), 'nothing left');
});
