// The multi-model planner (pure): names, world size, device ids (Triton's "0,1;2,3" too), participant ids and
// oversubscription are checked before anything starts, each error naming the model, the value and what to do.
import t from 'tap';

import { type ModelFile, type MultiModelInput, parseDeviceLists, planMultiModel } from '../../../launcher/multi-model/plan-groups.js';
import { serveOptions } from '../../../worker/options/serve-options-from-cli.js';
import type { ServeCliOptions } from '../../../launcher/serve-options.js';
import type { ServeOptions } from '../../../worker/options/serve-options.js';

const frontend = { host: '0.0.0.0', httpPort: 8000, metricsPort: 8002 } as ServeOptions;

function file(path: string, options: Partial<ServeCliOptions>, values: Record<string, unknown> = {}): ModelFile {
  return { path, options: { model: `/models/${path}`, host: '0.0.0.0', httpPort: 8000, metricsPort: 8002, ...options } as ServeCliOptions, values: new Map(Object.entries(values)) };
}

function input(models: ModelFile[], extra: Partial<MultiModelInput> = {}): MultiModelInput {
  return { models, spawn: true, failFast: false, oversubscribe: true, cpu: true, cores: 64, frontend, serveOptions, ...extra };
}

t.test('names come from the files (or their name key); each group gets its grid', async (t) => {
  const plan = planMultiModel(input([file('/repo/a.yaml', { tp: 2 }), file('/repo/b.yml', { servedModelName: 'bee', pp: 2 })]));
  t.same(plan.groups.map((g) => [g.name, g.tp, g.pp, g.ranks]), [['a', 2, 1, []], ['bee', 1, 2, []]]);
  t.equal(plan.groups[0]!.serve.model, '/models//repo/a.yaml');
  t.equal(plan.spawn, true);
});

t.test('bad repositories are refused with what to do', async (t) => {
  t.throws(() => planMultiModel(input([])), /at least one model file/);
  t.throws(() => planMultiModel(input([file('/r/a.yaml', { servedModelName: 'x' }), file('/r/b.yaml', { servedModelName: 'x' })])),
    /model name "x" is used by both \/r\/a.yaml and \/r\/b.yaml: set a distinct "name"/);
  t.throws(() => planMultiModel(input([file('/r/a.yaml', {})], { worldSize: 4 })),
    /--multi-model starts one orchestrator \(world size 1\).*--world-size 4 does not apply/);
  t.throws(() => planMultiModel(input([file('/r/a.yaml', { tp: 2 }), file('/r/b.yaml', {})], { oversubscribe: false, cores: 2 })),
    /needs 4 processes \(the orchestrator \+ 2 for a, 1 for b\) but this machine has 2 core\(s\): pass --oversubscribe/);
  t.doesNotThrow(() => planMultiModel(input([file('/r/a.yaml', {})], { oversubscribe: false, cores: 2 })), '2 processes on 2 cores need nothing');
});

t.test('KV cache events without prefix reuse are refused naming the file and both keys', async (t) => {
  t.throws(() => planMultiModel(input([file('/r/a.yaml', { enableKvCacheReuse: true, kvCacheEventBufferMaxSize: 8 }), file('/r/b.yaml', { kvCacheEventBufferMaxSize: 8 })])),
    /model "b" \(\/r\/b.yaml\): kv_cache.event_buffer_max_size 8 needs kv_cache.enable_reuse: true/);
  const plan = planMultiModel(input([file('/r/a.yaml', { enableKvCacheReuse: true, kvCacheEventBufferMaxSize: 8 }), file('/r/b.yaml', { kvCacheEventBufferMaxSize: 0 })]));
  t.same(plan.groups.map((g) => [g.serve.enableKvCacheReuse, g.serve.kvCacheEventBufferMaxSize]), [[true, 8], [undefined, 0]], 'reuse on, or events off (0), pass');
});

t.test('device ids: per file or Triton\'s "0,1;2,3"; no overlap; one per rank', async (t) => {
  t.same(parseDeviceLists('0,1;2,3', 2), [[0, 1], [2, 3]]);
  t.throws(() => parseDeviceLists('0,1', 2), /has 1 list\(s\) separated by ';' but the repository has 2 model\(s\)/);
  t.throws(() => parseDeviceLists('0,x;1', 2), /"x" is not a device id/);
  const two = [file('/r/a.yaml', { tp: 2 }), file('/r/b.yaml', {})];
  t.same(planMultiModel(input(two, { gpuDeviceIds: '0,1;2' })).groups.map((g) => g.deviceIds), [[0, 1], [2]]);
  t.throws(() => planMultiModel(input(two, { gpuDeviceIds: '0,1;1' })), /device 1 is given to both model "a" and model "b"/);
  t.throws(() => planMultiModel(input(two, { gpuDeviceIds: '0;1' })), /model "a" \(\/r\/a.yaml\) needs 2 rank\(s\) \(tp 2 x pp 1\) but has 1 device id\(s\) \[0\]/);
  const fromFiles = [file('/r/a.yaml', { tp: 2 }, { gpu_device_ids: [3, 4] }), file('/r/b.yaml', {}, { gpu_device_ids: [4] })];
  t.throws(() => planMultiModel(input(fromFiles)), /device 4 is given to both model "a" and model "b"/);
});

t.test('no-spawn: participant ids partition the job after the orchestrator; the rest are assigned in order', async (t) => {
  const models = [file('/r/a.yaml', { tp: 2 }), file('/r/b.yaml', {}, { participant_ids: [1] })];
  const plan = planMultiModel(input(models, { spawn: false }));
  t.same(plan.groups.map((g) => g.ranks), [[2, 3], [1]]);
  t.same(planMultiModel(input(models, { spawn: false, worldSize: 4 })).groups.length, 2, '--world-size may state the total');
  t.throws(() => planMultiModel(input(models, { spawn: false, worldSize: 3 })), /--world-size 3 must equal 1 \(the orchestrator\) \+ the ranks of every model = 4/);
  t.throws(() => planMultiModel(input([file('/r/a.yaml', { tp: 2 }, { participant_ids: [1] })], { spawn: false })),
    /participant_ids \[1\] has 1 rank\(s\), tp 2 x pp 1 needs 2/);
  t.throws(() => planMultiModel(input([file('/r/a.yaml', {}, { participant_ids: [5] })], { spawn: false })),
    /participant id 5 is outside 1..1/);
  t.throws(() => planMultiModel(input([file('/r/a.yaml', {}, { participant_ids: [1] }), file('/r/b.yaml', {}, { participant_ids: [1] })], { spawn: false })),
    /participant id 1 is given to both model "a" and model "b"/);
});

t.test('parallel.dp in a file: that many groups of one name, replica r on the r-th run of devices and participant ids', async (t) => {
  const plan = planMultiModel(input([file('/r/a.yaml', { dp: 2, tp: 2 }, { gpu_device_ids: [0, 1, 2, 3] }), file('/r/b.yaml', {})], { cpu: false }));
  t.same(plan.groups.map((g) => [g.name, g.replica, g.router, g.deviceIds]), [['a', 0, 'least-load', [0, 1]], ['a', 1, 'least-load', [2, 3]], ['b', undefined, undefined, []]]);
  const pinned = planMultiModel(input([file('/r/a.yaml', { dp: 2 }, { participant_ids: [3, 1] }), file('/r/b.yaml', {})], { spawn: false }));
  t.same(pinned.groups.map((g) => g.ranks), [[1], [3], [2]], 'replica 0 takes the lower ids; b the rank left');
  const kv = planMultiModel(input([file('/r/a.yaml', { dp: 2, router: 'kv', enableKvCacheReuse: true })]));
  t.equal(kv.groups[1]!.router, 'kv');
  t.equal(kv.groups[0]!.serve.kvCacheEventBufferMaxSize, 16_384, 'router kv turns the replicas\' events on');
  t.throws(() => planMultiModel(input([file('/r/a.yaml', { dp: 2, router: 'kv' })])), /model "a" \(\/r\/a\.yaml\): router kv needs kv_cache\.enable_reuse: true/);
  t.throws(() => planMultiModel(input([file('/r/a.yaml', { dp: 2, tp: 2 }, { gpu_device_ids: [0, 1] })], { cpu: false })),
    /model "a" \(\/r\/a\.yaml\) needs 4 rank\(s\) \(2 replicas x tp 2 x pp 1\) but has 2 device id\(s\)/);
  t.throws(() => planMultiModel(input([file('/r/a.yaml', { dp: 2 }, { participant_ids: [1] })], { spawn: false })),
    /model "a": participant_ids \[1\] has 1 rank\(s\), 2 replicas x tp 1 x pp 1 needs 2/);
  t.throws(() => planMultiModel(input([file('/r/a.yaml', { dp: 3, tp: 2 })], { oversubscribe: false, cores: 4 })), /needs 7 processes .*2 for a replica 2/);
});

t.test('LoRA adapters (lora.modules): checked per model; their names and the models\' are one namespace', async (t) => {
  const plan = planMultiModel(input([file('/r/a.yaml', { loraModules: ['sql=/ad/sql'] }), file('/r/b.yaml', { loraModules: ['chat=/ad/chat'] })]));
  t.same(plan.groups.map((g) => g.serve.loraModules), [['sql=/ad/sql'], ['chat=/ad/chat']], 'each group serves its own');
  t.throws(() => planMultiModel(input([file('/r/a.yaml', { loraModules: ['b=/ad/x'] }), file('/r/b.yaml', {})])),
    { message: 'model "a" (/r/a.yaml): its LoRA adapter "b" (lora.modules) has the name of the model "b" (/r/b.yaml): an OpenAI request\'s "model" must name one of them; rename the adapter' });
  t.throws(() => planMultiModel(input([file('/r/a.yaml', { loraModules: ['x=/ad/1'] }), file('/r/b.yaml', { loraModules: ['x=/ad/2'] })])),
    /model "b" \(\/r\/b.yaml\): its LoRA adapter "x" \(lora.modules\) has the name of the LoRA adapter "x" of model "a" \(\/r\/a.yaml\)/);
  t.throws(() => planMultiModel(input([file('/r/a.yaml', { loraModules: ['a=/ad/1'] })])),
    /model "a" \(\/r\/a.yaml\): --lora-modules a=\/ad\/1: the name "a" is the base model's/);
  t.throws(() => planMultiModel(input([file('/r/a.yaml', { maxLoras: 2 })])),
    /model "a" \(\/r\/a.yaml\): --max-loras 2 sizes the LoRA adapter cache, but LoRA is off/);
});
