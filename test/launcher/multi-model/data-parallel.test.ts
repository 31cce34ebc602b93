// The --dp planner (pure): one group per replica with the same grid and options, each replica on its own devices
// (by local rank on each host when the ranks run across hosts), the gang rule unless --isolate-failures, --router
// kv's need for prefix reuse and its default event buffer, and what --dp cannot be combined with — each refusal
// naming the options and values.
import t from 'tap';

import { KV_ROUTER_EVENT_BUFFER, planDataParallel } from '../../../launcher/multi-model/data-parallel.js';
import type { ServeCliOptions } from '../../../launcher/serve-options.js';
import { gpuOnHost } from '../../../worker/orchestrator/group-rank.js';

function opts(extra: Partial<ServeCliOptions>): ServeCliOptions {
  return {
    model: '/models/llama', host: '0.0.0.0', httpPort: 8000, metricsPort: 8002, router: 'least-load', isolateFailures: false,
    oversubscribe: false, dp: 2, ...extra,
  } as ServeCliOptions;
}
const plan = (extra: Partial<ServeCliOptions>, more: { spawn?: boolean; cpu?: boolean; cores?: number; failFast?: boolean; acrossHosts?: boolean } = {}) =>
  planDataParallel({ options: opts(extra), spawn: more.spawn ?? true, failFast: more.failFast ?? false, cpu: more.cpu ?? true, cores: more.cores ?? 64,
    acrossHosts: more.acrossHosts ?? false });

t.test('one group per replica, same model name and grid; the gang rule by default', async (t) => {
  const { plan: p, notes } = plan({ tp: 2, dp: 3 });
  t.same(p.groups.map((g) => [g.name, g.replica, g.tp, g.pp, g.deviceIds]), [['llama', 0, 2, 1, []], ['llama', 1, 2, 1, []], ['llama', 2, 2, 1, []]]);
  t.equal(p.spawn, true);
  t.equal(p.failFast, true, 'a dead replica stops the cluster');
  t.same(p.dp, { router: 'least-load', isolateFailures: false });
  t.same(notes, []);
  const isolated = plan({ isolateFailures: true }).plan;
  t.equal(isolated.failFast, false);
  t.equal(isolated.dp!.isolateFailures, true);
  t.equal(plan({ servedModelName: 'm' }).plan.groups[1]!.name, 'm');
  t.equal(plan({ worldSize: 4 }).plan.groups[0]!.tp, 2, '--world-size counts the replicas\' ranks: 4 / dp 2 = tp 2');
});

t.test('devices: replica r takes the r-th run of tp x pp', async (t) => {
  t.same(plan({ tp: 2 }, { cpu: false }).plan.groups.map((g) => g.deviceIds), [[0, 1], [2, 3]]);
  t.same(plan({ gpuDeviceIds: '4,5,6,7', tp: 2 }, { cpu: false }).plan.groups.map((g) => g.deviceIds), [[4, 5], [6, 7]]);
  t.throws(() => plan({ gpuDeviceIds: '0,1', tp: 2 }, { cpu: false }), /--gpu-device-ids "0,1" has 2 id\(s\); --dp 2 x --tp 2 x --pp 1 needs 4/);
  t.throws(() => plan({ gpuDeviceIds: '0,0' }, { cpu: false }), /names a device twice/);
});

t.test('devices across hosts (ranks started up front): each rank the GPU of its local rank on its host', async (t) => {
  const across = plan({ tp: 2 }, { cpu: false, spawn: false, acrossHosts: true }).plan.groups;
  t.same(across.map((g) => [g.deviceIds, g.devicesByHost]), [[[], true], [[], true]]);
  t.same(plan({ tp: 2, gpuDeviceIds: '4,5,6,7' }, { cpu: false, spawn: false, acrossHosts: true }).plan.groups.map((g) => [g.deviceIds, g.devicesByHost]),
    [[[4, 5], undefined], [[6, 7], undefined]], '--gpu-device-ids still names them');
  t.same(plan({ tp: 2 }, { cpu: false, spawn: true, acrossHosts: true }).plan.groups.map((g) => g.devicesByHost), [undefined, undefined], 'spawned groups: one host');
  t.same(plan({ tp: 2 }, { cpu: true, spawn: false, acrossHosts: true }).plan.groups.map((g) => g.devicesByHost), [undefined, undefined], 'the CPU backend: none');
  // The orchestrator is job rank 0, so local rank 0 on its host and holding no GPU: one fewer there.
  t.equal(gpuOnHost(1, true), 0);
  t.equal(gpuOnHost(2, true), 1);
  t.equal(gpuOnHost(0, false), 0, 'another host: its first rank takes GPU 0');
  t.equal(gpuOnHost(3, false), 3);
});

t.test('--router kv needs prefix reuse; it turns events on when they are off', async (t) => {
  t.throws(() => plan({ router: 'kv' }), /--router kv needs --enable-kv-cache-reuse/);
  const { plan: p, notes } = plan({ router: 'kv', enableKvCacheReuse: true });
  t.equal(p.groups[0]!.serve.kvCacheEventBufferMaxSize, KV_ROUTER_EVENT_BUFFER);
  t.match(notes[0], /--kv-cache-event-buffer-max-size 16384, set for it/);
  t.equal(plan({ router: 'kv', enableKvCacheReuse: true, kvCacheEventBufferMaxSize: 10 }).plan.groups[1]!.serve.kvCacheEventBufferMaxSize, 10);
});

t.test('--no-spawn: replica r is job ranks 1 + r x tp x pp .., leader first; the orchestrator is rank 0', async (t) => {
  const p = plan({ tp: 2, dp: 3 }, { spawn: false }).plan;
  t.equal(p.spawn, false);
  t.same(p.groups.map((g) => [g.replica, g.ranks]), [[0, [1, 2]], [1, [3, 4]], [2, [5, 6]]]);
  t.same(plan({}).plan.groups.map((g) => g.ranks), [[], []], 'spawned groups have no job ranks');
  t.throws(() => plan({ tp: 2 }, { spawn: false, cores: 4 }), /--dp 2 needs 5 processes/);
});

t.test('refusals name the options', async (t) => {
  t.throws(() => plan({ worldSize: 3 }), /--world-size 3 is not a multiple of --dp 2/);
  t.throws(() => plan({ tp: 2 }, { cores: 4 }), /--dp 2 needs 5 processes .* 4 core\(s\): pass --oversubscribe/);
});
