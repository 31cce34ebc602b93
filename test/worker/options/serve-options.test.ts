// The option table's worker-side derivations, pure: a rank's ServeOptions from its flags (grid, drain in ms, its GPU
// by local rank), the executor's settings and a follower's, and which backend --device picks for a build.
import t from 'tap';

import { TrtllmError } from '../../../worker/common/errors.js';
import { gpuOfLocalRank, parseGpuDeviceIds, servingBackend } from '../../../worker/options/device-ids.js';
import { executorOptions, followerOptions } from '../../../worker/options/executor-options.js';
import { SERVE_OPTIONS } from '../../../worker/options/serve-option-table.js';
import { serveOptions } from '../../../worker/options/serve-options-from-cli.js';
import { FULL } from '../../helpers/serve-cli-options.js';

t.test('a rank\'s ServeOptions: what ranks get, the grid from the plan, its GPU by local rank', async (t) => {
  const leader = serveOptions(FULL, { tp: 2, pp: 2 });
  t.match(leader, {
    model: '/m/llama', servedModelName: 'llama', host: '127.0.0.1', httpPort: 9000, grpcPort: 9001, metricsPort: 9002,
    apiKey: 'sekret', authHealth: true, authMetrics: true, maxBodyBytes: 1000, drainTimeoutMs: 7000, hangTimeoutMs: 11_000,
    logLevel: 'debug', tp: 2, pp: 2, ep: 2, ppMicroBatches: 1, ppLayers: '3,1', device: 'cuda', loadFormat: 'dummy', quantization: 'fp8', gpuDeviceId: 3, kvCacheFreeGpuMemFraction: 0.5, enableKvCacheReuse: false,
    maxAttentionWindowSize: 512,
  });
  for (const launcherOnly of ['worldSize', 'moeTp', 'launcher', 'oversubscribe', 'hostfile', 'hosts', 'srunArgs', 'startupTimeout', 'logDir', 'dryRun', 'gpuDeviceIds', 'drainTimeout', 'hangTimeout']) {
    t.notOk(launcherOnly in leader, `${launcherOnly}: the launcher's own (or converted)`);
  }
  t.equal(serveOptions(FULL, { tp: 2, pp: 2 }, 1).gpuDeviceId, 5, 'local rank 1 takes the second id');
  t.notOk('gpuDeviceId' in serveOptions({ ...FULL, gpuDeviceIds: undefined }, { tp: 1, pp: 1 }), 'no list: the engine\'s default');
  const short = (() => { try { serveOptions(FULL, { tp: 2, pp: 2 }, 2); } catch (e) { return e; } })();
  t.ok(short instanceof TrtllmError && short.code === 'invalid_argument');
  t.equal((short as Error).message, '--gpu-device-ids 3,5 names 2 GPU(s) but this host runs local rank 2');
});

t.test('device ids and the backend --device picks', async (t) => {
  t.same(parseGpuDeviceIds('0, 2'), { ok: true, value: [0, 2] });
  t.same(parseGpuDeviceIds('0,x'), { ok: false, message: '--gpu-device-ids must be a comma-separated list of integers >= 0, got "0,x"' });
  t.same(gpuOfLocalRank('-1', 0), { ok: false, message: '--gpu-device-ids must be a comma-separated list of integers >= 0, got "-1"' });
  const gpuBuild = { backends: ['cpu', 'cuda'], cudaDevices: 2 };
  t.equal(servingBackend('auto', gpuBuild), 'cuda');
  t.equal(servingBackend(undefined, gpuBuild), 'cuda', 'auto is the default');
  t.equal(servingBackend('auto', { backends: ['cpu', 'cuda'], cudaDevices: 0 }), 'cpu', 'no GPU visible');
  t.equal(servingBackend('auto', { backends: ['cpu'], cudaDevices: 0 }), 'cpu');
  t.equal(servingBackend('auto', undefined), 'cpu', 'no addon here: only the CPU backend is certain');
  t.equal(servingBackend('cpu', gpuBuild), 'cpu');
  t.equal(servingBackend('cuda', undefined), 'cuda');
});

t.test('the executor\'s settings and a follower\'s come from the table\'s bindings', async (t) => {
  const serve = serveOptions(FULL, { tp: 2, pp: 2 });
  const executor = executorOptions(serve);
  t.same(executor, {
    tp: 2, pp: 2, ep: 2, ppMicroBatches: 1, ppLayers: '3,1', device: 'cuda', gpuDeviceId: 3, loadFormat: 'dummy', quantization: 'fp8', kvCacheDtype: 'fp8', numThreads: 3, maxBatchSize: 7, maxQueueSize: 5,
    maxNumTokens: 333, maxSeqLen: 444, tokensPerBlock: 16, maxTokensInPagedKvCache: 4096, kvCacheFreeGpuMemFraction: 0.5,
    schedulerPolicy: 'max_utilization', enableChunkedContext: true, enableKvCacheReuse: false, kvCacheEventBufferMaxSize: 8, maxAttentionWindow: 512, maxBeamWidth: 2, ngramDraftTokens: 4,
    draftModel: '/m/draft', medusaHeads: '/m/medusa', medusaChoices: '[[0],[0,0],[1]]', eagleHeads: '/m/eagle', eagleChoices: '[[0],[1],[0,0]]', draftModelTokens: 3, speculationMaxBatch: 8,
    loraModules: ['sql=/m/sql', 'chat=/m/chat'], enableLora: true, maxLoras: 4, loraCacheOptimalAdapterSize: 16, loraCacheMaxAdapterSize: 32,
    loraCacheGpuMemoryFraction: 0.1, loraCacheHostMemoryBytes: 1000000,
    hangTimeoutMs: 11_000, iterStatsMaxIterations: 10_000,
  });
  const bound = SERVE_OPTIONS.filter((d) => d.executor).map((d) => d.executor!.field).sort();
  t.same(Object.keys(executor).filter((k) => k !== 'iterStatsMaxIterations').sort(), bound, 'every binding reaches the executor');
  t.same(followerOptions(serve), { tp: 2, pp: 2, ep: 2, ppLayers: '3,1', device: 'cuda', gpuDeviceId: 3, loadFormat: 'dummy', quantization: 'fp8', kvCacheDtype: 'fp8', numThreads: 3, maxBatchSize: 7, maxNumTokens: 333, hangTimeoutMs: 11_000, medusaHeads: '/m/medusa' },
    'followers: grid (with its stages\' layers), device, threads, what sizes their buffers, the hang timeout of their waits, and the Medusa heads (the last stage runs them under pp)');
  t.same(executorOptions({ model: '/m', host: 'h', httpPort: 0, metricsPort: 0, authHealth: false, authMetrics: false, maxBodyBytes: 1, drainTimeoutMs: 0, logLevel: 'info' }),
    { iterStatsMaxIterations: 10_000 }, 'nothing set: the engine\'s defaults');
});
