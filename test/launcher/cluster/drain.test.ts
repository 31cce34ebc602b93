// SIGTERM to a real world-size-2 cluster (mpirun, two ranks) as an operations team sends it: while the leader drains,
// its ports stay open — new requests get a 503 / UNAVAILABLE naming the drain, /v2/health/live stays 200 — and the
// request in flight completes before everything stops with exit 0. The leader's loop is held through the drain's
// start (TRTLLM_TEST_HOOKS, POST /test/hold) so the request is still in flight however long the test takes to look.
import t from 'tap';

import { GrpcClient } from '../../../launcher/client/grpc.js';
import { referenceCases } from '../../helpers/fixtures.js';
import { launchCluster } from '../../helpers/launched-cluster.js';
import { processesWith } from '../../helpers/processes.js';
import { waitFor } from '../../helpers/wait.js';

const IDS = referenceCases('tiny-llama')[0]!.input_ids;
const REFUSAL = 'the server is draining (SIGTERM): not accepting new requests';

t.test('SIGTERM: 503 naming the drain on HTTP and gRPC, live 200, the request in flight completes, exit 0', async (t) => {
  const cluster = await launchCluster(['--drain-timeout', '600'], { env: { TRTLLM_TEST_HOOKS: '1' } });
  const { child } = cluster;
  const { http: port, metrics, grpc: grpcPort } = cluster.ports;
  t.teardown(() => { child.kill('SIGKILL'); });
  const up = await cluster.ready;
  t.ok(up, up ? 'ready' : `not ready: ${cluster.output().slice(-1500)}`);
  const base = `http://127.0.0.1:${port}`;
  const post = (path: string, body: unknown) => fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
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
  t.equal(result.exitCode, 0, result.exitCode === 0 ? 'exit 0' : `exit ${result.exitCode}: ${cluster.output().slice(-800)}`);
  t.match(cluster.output(), /all ranks stopped cleanly/);
  t.ok(await waitFor(() => processesWith(`--http-port ${port}`).length === 0), 'nothing left');
});
