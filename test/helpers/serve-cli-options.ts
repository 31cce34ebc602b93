// A ServeCliOptions with every option set to something other than its default, for tests of the option table's
// derivations (what reaches ranks, the executor, a follower).
import type { ServeCliOptions } from '../../worker/options/serve-option-table.js';

/** Every option set to something other than its default. */
export const FULL: ServeCliOptions = {
  model: '/m/llama', servedModelName: 'llama', worldSize: 4, tp: 2, pp: 2, ep: 2, ppMicroBatches: 1, ppLayers: '3,1', moeTp: 1, dp: 2, router: 'kv', isolateFailures: true, launcher: 'mpirun', oversubscribe: true,
  hostfile: '/etc/hosts.mpi', hosts: 'a:2,b:2', srunArgs: '--exclusive', startupTimeout: 60, logDir: '/tmp/logs', dryRun: true,
  device: 'cuda', gpuDeviceIds: '3,5', loadFormat: 'dummy', quantization: 'fp8', kvCacheDtype: 'fp8', host: '127.0.0.1', httpPort: 9000, grpcPort: 9001, metricsPort: 9002,
  apiKey: 'sekret', authHealth: true, authMetrics: true, logLevel: 'debug', threads: 3, maxBatchSize: 7, maxQueueSize: 5,
  maxNumTokens: 333, maxSeqLen: 444, tokensPerBlock: 16, maxTokensInPagedKvCache: 4096, kvCacheFreeGpuMemFraction: 0.5,
  schedulerPolicy: 'max_utilization', enableChunkedContext: true, enableKvCacheReuse: false, kvCacheEventBufferMaxSize: 8, maxAttentionWindowSize: 512, maxBeamWidth: 2, speculativeNgram: 4, draftModel: '/m/draft', medusaHeads: '/m/medusa', medusaChoices: '[[0],[0,0],[1]]', eagleHeads: '/m/eagle', eagleChoices: '[[0],[1],[0,0]]', numDraftTokens: 3, speculativeMaxBatch: 8,
  loraModules: ['sql=/m/sql', 'chat=/m/chat'], enableLora: true, maxLoras: 4, loraCacheOptimalAdapterSize: 16, loraCacheMaxAdapterSize: 32, loraCacheGpuMemoryFraction: 0.1, loraCacheHostMemoryBytes: 1000000,
  maxBodyBytes: 1000,
  allowAnyContentType: true, maxLogitsBytesPerRequest: 4096, maxLogitsBytesInFlight: 8192, drainTimeout: 7, hangTimeout: 11,
};
