// Multi-LoRA against PEFT: test/fixtures/lora/tiny-llama (scripts/fixtures/make_lora_fixtures.py — three PEFT
// adapters of tiny-llama and PEFT's merged-model greedy tokens in float64, every top-1 margin >= 0.1) served
// through the API. The base and every adapter's reference cases, plus beta again from TensorRT-LLM's request
// tensors under a task id of its own, go out together: at world size 1 the loop is held until all are queued, so
// they run as one batch; at tp 2 (a real mpirun cluster) the adapters reach the follower through the plan. Every
// output is PEFT's tokens. Adapters by --lora-modules (task ids 1, 2, 3) through KServe's token model, by name
// through OpenAI's completions.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import t, { type Test } from 'tap';

import { packageRoot } from '../../../worker/common/package-root.js';
import { loadTokenizer } from '../../../worker/tokenizer.js';
import { fixtureDir, readSafetensors } from '../../helpers/fixtures.js';
import { startServingCluster } from '../../helpers/launched-cluster.js';
import { localExecutor, postJson, recordRequests, startTestServer } from '../../helpers/serving.js';

const MODEL = fixtureDir('tiny-llama');
const ROOT = join(packageRoot(), 'test', 'fixtures', 'lora', 'tiny-llama');
const NAMES = ['alpha', 'beta', 'gamma'] as const;
const MODULES = NAMES.map((n) => `${n}=${join(ROOT, n)}`);

interface Case { name: string; input_ids: number[]; max_new_tokens: number; greedy_output_ids: number[] }
const ref = JSON.parse(readFileSync(join(ROOT, 'reference.json'), 'utf8')) as {
  base_cases: Case[]; adapters: Record<(typeof NAMES)[number], { cases: Case[] }>;
};

// beta's TensorRT-LLM tensors (lora_weights f32 [1, rows, cols], lora_config int32 [1, rows, 3]) from the fixture.
function betaTensors(): { name: string; datatype: string; shape: number[]; data: number[] }[] {
  const tensors = readSafetensors(join(ROOT, 'beta', 'trtllm-tensors.safetensors'));
  return [['lora_weights', 'FP32'], ['lora_config', 'INT32']].map(([name, datatype]) => {
    const t = tensors.get(name!);
    if (!t) throw new Error(`${name} is not in beta/trtllm-tensors.safetensors`);
    return { name: name!, datatype: datatype!, shape: t.shape, data: Array.from(t.data) };
  });
}

interface Job { label: string; want: number[] | string; run: () => Promise<number[] | string> }

// Every case of the base and of each adapter, by KServe (task id) and by OpenAI (model name), and beta's cases
// again by its tensors (the first of them carries the tensors, the rest name its task id).
async function jobs(base: string): Promise<Job[]> {
  const tok = await loadTokenizer(MODEL);
  const infer = async (c: Case, extra: unknown[]) => {
    const r = await postJson(`${base}/v2/models/tensorrt_llm/infer`, { inputs: [
      { name: 'input_ids', datatype: 'INT32', shape: [1, c.input_ids.length], data: c.input_ids },
      { name: 'request_output_len', datatype: 'INT32', shape: [1, 1], data: [c.max_new_tokens] }, ...extra,
    ] });
    if (r.status !== 200) throw new Error(`infer: ${r.status} ${JSON.stringify(r.json)}`);
    return (r.json.outputs.find((o: { name: string }) => o.name === 'output_ids').data as number[]).slice(c.input_ids.length);
  };
  const completion = async (c: Case, model: string) => {
    const r = await postJson(`${base}/v1/completions`, { model, prompt: c.input_ids, max_tokens: c.max_new_tokens, temperature: 0, ignore_eos: true });
    if (r.status !== 200) throw new Error(`completions: ${r.status} ${JSON.stringify(r.json)}`);
    return r.json.choices[0].text as string;
  };
  const task = (id: number) => ({ name: 'lora_task_id', datatype: 'UINT64', shape: [1, 1], data: [id] });
  const out: Job[] = [];
  for (const c of ref.base_cases) {
    out.push({ label: `base ${c.name} (KServe)`, want: c.greedy_output_ids, run: () => infer(c, []) });
  }
  NAMES.forEach((name, i) => {
    for (const c of ref.adapters[name].cases) {
      out.push({ label: `${name} ${c.name} (KServe lora_task_id ${i + 1})`, want: c.greedy_output_ids, run: () => infer(c, [task(i + 1)]) });
      out.push({ label: `${name} ${c.name} (OpenAI model ${name})`, want: tok.decode(c.greedy_output_ids), run: () => completion(c, name) });
    }
  });
  const tensors = betaTensors();
  ref.adapters.beta.cases.forEach((c, i) => {
    out.push({ label: `beta ${c.name} (lora_weights, task 500)`, want: c.greedy_output_ids,
      run: () => infer(c, i === 0 ? [task(500), ...tensors] : [task(500)]) });
  });
  return out;
}

function check(t: Test, results: { job: Job; got: number[] | string }[]) {
  for (const { job, got } of results) t.same(got, job.want, job.label);
}

t.test('world size 1: the base and three adapters (and one sent as tensors) in one held batch equal PEFT', async (t) => {
  const { base, server } = await startTestServer(t, { model: MODEL, loraModules: MODULES });
  const executor = localExecutor(server);
  const all = await jobs(base);
  // Held at 0 iterations: every request is queued before any runs; the wrapper tells when the last one is.
  executor.holdIterations(0);
  let allQueued!: () => void;
  const everyoneIn = new Promise<void>((resolve) => { allQueued = resolve; });
  const seen = recordRequests(executor, () => { if (seen.length === all.length) allQueued(); });
  const running = all.map(async (job) => ({ job, got: await job.run() }));
  await everyoneIn;
  executor.holdIterations(-1);
  check(t, await Promise.all(running));
});

t.test('tp 2 under mpirun: the adapters are split over the ranks like their base weights', async (t) => {
  const cluster = await startServingCluster(t, ['--model', MODEL, '--world-size', '2', '--oversubscribe', '--threads', '1',
    '--lora-modules', ...MODULES]);
  const all = await jobs(cluster.base);
  check(t, await Promise.all(all.map(async (job) => ({ job, got: await job.run() }))));
});
