// Orchestrator mode for real: `trtllm-launch --multi-model --model-repo <dir>` under mpirun, two models with
// different tp (spawned with MPI_Comm_spawn, or started up front with --no-spawn), each answering what a one-rank
// server answers; streaming and cancellation through the orchestrator; a killed worker that takes only its own
// model down (or everything, with --fail-fast); the orchestrator's death that takes every group with it; KV cache
// events asked of every group and tagged with their model; and no process left behind on any path.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import type { ResultPromise } from 'execa';
import t, { type Test } from 'tap';

import { fixtureDir, referenceCases } from '../helpers/fixtures.js';
import { startLauncher } from '../helpers/launched-cluster.js';
import { freePort, processesWith } from '../helpers/processes.js';
import { postJson, postSse, startTestServer, waitFor } from '../helpers/serving.js';
import { tempDir } from '../helpers/temp-dir.js';

const PROMPTS = ['What is machine learning?', 'The jury said', 'hello world'];

function repository(files?: Record<string, string>): string {
  const dir = tempDir('trtllm-repo-');
  // alpha sorts first: it also answers Triton's names (tensorrt_llm's token interface is checked on it).
  for (const [name, text] of Object.entries(files ?? {
    'alpha.yaml': `model: ${fixtureDir('tiny-llama')}\nparallel:\n  tp: 2\nkv_cache:\n  tokens_per_block: 16\n`,
    'beta.yaml': `model: ${fixtureDir('tiny-gpt2')}\nkv_cache:\n  tokens_per_block: 16\n`,
  })) writeFileSync(join(dir, name), text);
  return dir;
}

interface Cluster {
  child: ResultPromise;
  base: string;
  metrics: string;
  marker: string;
  output: () => string;
  ready: Promise<boolean>;
  pids: (model: string) => number[];
}

async function startCluster(extra: string[] = [], repo = repository()): Promise<Cluster> {
  const port = await freePort();
  const metricsPort = await freePort();
  const grpcPort = await freePort();
  const { child, output, ready } = startLauncher(['--multi-model', '--model-repo', repo, '--oversubscribe', '--threads', '1',
    '--http-port', String(port), '--metrics-port', String(metricsPort), '--grpc-port', String(grpcPort), '--drain-timeout', '5', ...extra]);
  const pids = (model: string) => {
    const m = new RegExp(`model ${model}: ready on \\d+ rank\\(s\\) \\(([^)]*)\\)`).exec(output());
    return m ? [...m[1]!.matchAll(/pid (\d+)/g)].map((p) => Number(p[1])) : [];
  };
  // Every process of the job carries the plan (with this unique port) in its environment, spawned ones included.
  return { child, base: `http://127.0.0.1:${port}`, metrics: `http://127.0.0.1:${metricsPort}`, marker: `"httpPort":${port},`, output, ready, pids };
}

async function generate(base: string, model: string, text: string, maxTokens = 12): Promise<{ status: number; json: any }> {
  return postJson(`${base}/v2/models/${model}/generate`, { text_input: text, max_tokens: maxTokens });
}

async function noneLeft(t: Test, marker: string): Promise<void> {
  await waitFor(() => processesWith(marker, true).length === 0);
  t.same(processesWith(marker, true), [], 'no process of the job is left');
}

/** The model's answer once its group's death has been noticed (a 503), or the last answer when it never is. */
async function unavailable(base: string, model: string): Promise<{ status: number; json: any }> {
  let last = await generate(base, model, 'x');
  await waitFor(async () => (last = await generate(base, model, 'x')).status !== 200);
  return last;
}

// One sample of a scrape's text (undefined: absent).
function sample(text: string, name: string, labels: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && labels.split(',').every((kv) => l.includes(kv)));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

const scrape = async (base: string): Promise<string> => (await fetch(`${base}/metrics`)).text();

async function metric(base: string, name: string, labels: string): Promise<number | undefined> {
  return sample(await scrape(base), name, labels);
}

// What one rank in this process serves for each model: the orchestrator must answer the same.
async function oneRankOutputs(t: Test): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const [name, model] of [['alpha', 'tiny-llama'], ['beta', 'tiny-gpt2']] as const) {
    const { base, server } = await startTestServer(t, { model: fixtureDir(model), tokensPerBlock: 16 });
    out[name] = [];
    for (const p of PROMPTS) out[name].push((await generate(base, 'ensemble', p)).json.text_output as string);
    await server.close();
  }
  return out;
}

t.test('spawn mode: two models with different tp serve what one rank serves; one dies alone; clean stop', async (t) => {
  const expected = await oneRankOutputs(t);
  const cluster = await startCluster();
  t.teardown(() => { cluster.child.kill('SIGKILL'); });
  t.ok(await cluster.ready, `ready (output: ${cluster.output().slice(-2000)})`);
  // The ranks' own lines come through mpirun's output forwarding, which may deliver them after the launcher has
  // seen the server answer: wait for each line rather than expecting it at the moment of readiness.
  t.ok(await waitFor(() => /spawning 2 worker group\(s\): alpha \(2 rank\(s\)\), beta \(1 rank\(s\)\)/.test(cluster.output())), 'the orchestrator spawns both groups');
  t.ok(await waitFor(() => /\[group 0 rank 0\] .*model alpha ready/.test(cluster.output())), 'spawned ranks print under their group');
  t.ok(await waitFor(() => /Started GRPCInferenceService at /.test(cluster.output())), 'the orchestrator opens the gRPC port too');

  // Both models at once, several requests each: every answer equals the one-rank answer.
  const answers = await Promise.all(PROMPTS.flatMap((p) => ['alpha', 'beta'].map(async (m) => ({ m, p, r: await generate(cluster.base, m, p) }))));
  for (const { m, p, r } of answers) {
    t.equal(r.status, 200, `${m}: 200`);
    t.equal(r.json.model_name, m);
    t.equal(r.json.text_output, expected[m]![PROMPTS.indexOf(p)], `${m} "${p}" equals one rank`);
  }
  // (rank 0 prints it after its ports open, through mpirun's forwarding, which may come after the answers above)
  t.ok(await waitFor(() => /curl -X POST localhost:\d+\/v2\/models\/beta\/generate/.test(cluster.output())), 'prints how to query each model');
  // Triton's names reach the first model: token-level greedy equals HF transformers.
  const c = referenceCases('tiny-llama')[0]!;
  const tokens = await postJson(`${cluster.base}/v2/models/tensorrt_llm/generate`, { input_ids: c.input_ids, request_output_len: 16 });
  t.same((tokens.json.output_ids as number[]).slice(c.input_ids.length), c.greedy_output_ids, 'tensorrt_llm on alpha (tp=2) = HF greedy');
  // OpenAI: the model field picks the executor; /v1/models lists both.
  const models = await (await fetch(`${cluster.base}/v1/models`)).json() as { data: { id: string }[] };
  t.same(models.data.map((d) => d.id), ['alpha', 'beta']);
  const chat = await postJson(`${cluster.base}/v1/completions`, { model: 'beta', prompt: PROMPTS[2], max_tokens: 12, temperature: 0 });
  t.equal(chat.status, 200);
  t.equal(PROMPTS[2] + chat.json.choices[0].text, expected.beta![2], 'OpenAI completions on beta = one rank');
  const wrong = await postJson(`${cluster.base}/v1/completions`, { model: 'gamma', prompt: 'x', max_tokens: 2 });
  t.equal(wrong.status, 404);
  t.match(wrong.json.error.message, /`gamma` does not exist; this server serves `alpha`, `beta`/);

  // Bad input is refused by the orchestrator naming the field, and does not disturb the group.
  const bad = await postJson(`${cluster.base}/v2/models/beta/generate`, { text_input: 'x', max_tokens: -3 });
  t.equal(bad.status, 400);
  t.match(bad.json.error, /max_tokens .*-3/);
  const unknown = await generate(cluster.base, 'gamma', 'x');
  t.equal(unknown.status, 404);
  t.match(unknown.json.error, /unknown model 'gamma'; this server serves alpha, beta, ensemble/);

  // Streaming through the orchestrator: one event per token, the same text in the end.
  const stream = await postSse(`${cluster.base}/v2/models/beta/generate_stream`, { text_input: PROMPTS[0], max_tokens: 12 });
  t.equal(stream.status, 200);
  t.ok(stream.events.length >= 2, `${stream.events.length} events`);
  t.equal(PROMPTS[0] + stream.events.map((e) => e.text_output).join(''), expected.beta![0], 'streamed text = one rank');

  // Cancellation: a long stream dropped after two events frees its KV blocks in the group.
  const aborter = new AbortController();
  const long = await fetch(`${cluster.base}/v2/models/alpha/generate_stream`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text_input: PROMPTS[1], max_tokens: 200 }), signal: aborter.signal });
  t.equal(long.status, 200);
  const reader = long.body!.getReader();
  let seen = '';
  while ((seen.match(/data: /g) ?? []).length < 2) {
    const chunk = await reader.read();
    if (chunk.done) break;
    seen += new TextDecoder().decode(chunk.value);
  }
  t.ok((seen.match(/data: /g) ?? []).length >= 2, 'the long stream is flowing');
  aborter.abort();
  // Two states that arrive separately: the group's KV stats (every 500 ms) and the cancelled request's final
  // response, which ends it at the orchestrator (active). Both are read from one scrape: once that shows the final
  // response in, the stats beside it were sent after every earlier message on the group's link — after the blocks
  // were freed (the group frees them before it answers), or before the request ever showed in them — and later
  // stats cannot show blocks again. (Read from two scrapes, a stale "0 used" could pair with the new "0 active".)
  const state = async () => {
    const text = await scrape(cluster.metrics);
    return {
      used: sample(text, 'nv_trt_llm_kv_cache_block_metrics', 'model="alpha",kv_cache_block_type="used"'),
      active: sample(text, 'nv_trt_llm_request_metrics', 'model="alpha",request_type="active"'),
    };
  };
  await waitFor(async () => { const s = await state(); return s.used === 0 && s.active === 0; });
  const after = await state();
  t.equal(after.used, 0, 'the cancelled request left no KV block in use');
  t.equal(after.active, 0, 'and no active request');
  t.ok((await metric(cluster.metrics, 'nv_inference_request_success', 'model="beta"'))! >= 3, 'metrics are labelled per model');
  for (const model of ['alpha', 'beta']) {
    t.equal(await metric(cluster.metrics, 'trtllm_model_precision_info', `model="${model}",weights="as stored (16-bit)",kv_cache="float32"`), 1,
      `${model}: which precision it runs`);
  }

  // Kill one of alpha's ranks: alpha turns unavailable (503 naming it), beta keeps answering.
  t.ok(await waitFor(() => cluster.pids('alpha').length === 2), 'alpha runs on 2 ranks');
  const alpha = cluster.pids('alpha');
  process.kill(alpha[1]!, 'SIGKILL');
  const down = await unavailable(cluster.base, 'alpha');
  t.equal(down.status, 503);
  t.match(down.json.error, /model 'alpha' is not available: its rank 1 \(pid \d+ on \S+\) exited/);
  const still = await generate(cluster.base, 'beta', PROMPTS[2]!);
  t.equal(still.status, 200, 'beta keeps serving');
  t.equal(still.json.text_output, expected.beta![2]);
  const index = (await postJson(`${cluster.base}/v2/repository/index`, {})).json as { name: string; state: string; reason: string }[];
  t.match(index.find((m) => m.name === 'alpha'), { state: 'UNAVAILABLE', reason: /rank 1/ });
  t.match(index.find((m) => m.name === 'beta'), { state: 'READY' });
  t.equal((await fetch(`${cluster.base}/v2/health/ready`)).status, 503, 'the server is not ready while a model is down (strict readiness)');
  t.equal((await fetch(`${cluster.base}/v2/models/beta/ready`)).status, 200, 'beta is ready');
  // Killed ranks linger as zombies until mpirun reaps them: wait until both are gone from /proc.
  const gone = (pid: number) => !processesWith('', false).some((p) => p.pid === pid);
  t.ok(await waitFor(() => alpha.every(gone)), 'alpha\'s other rank was taken down too');

  cluster.child.kill('SIGTERM');
  const result = await cluster.child;
  t.equal(result.exitCode, 0, 'SIGTERM drains and exits 0');
  t.match(cluster.output(), /all ranks stopped cleanly/);
  await noneLeft(t, cluster.marker);
});

t.test('no-spawn variant: every rank started by mpirun serves the same; a dead group is isolated', async (t) => {
  const expected = await oneRankOutputs(t);
  const cluster = await startCluster(['--no-spawn']);
  t.teardown(() => { cluster.child.kill('SIGKILL'); });
  t.ok(await cluster.ready, `ready (output: ${cluster.output().slice(-2000)})`);
  t.match(cluster.output(), /ready after [\d.]+ s: 4 rank\(s\)/, 'mpirun started the orchestrator and all 3 group ranks');
  for (const m of ['alpha', 'beta']) {
    const r = await generate(cluster.base, m, PROMPTS[0]!);
    // (The status and body in the message: once in CI this answer had no text_output, and never again in 20 reruns.)
    t.equal(r.json.text_output, expected[m]![0], `${m} = one rank (HTTP ${r.status} ${JSON.stringify(r.json).slice(0, 300)})`);
  }
  t.ok(await waitFor(() => cluster.pids('beta').length === 1), 'beta\'s rank is known');
  process.kill(cluster.pids('beta')[0]!, 'SIGKILL');
  const down = await unavailable(cluster.base, 'beta');
  t.equal(down.status, 503);
  t.match(down.json.error, /model 'beta' is not available/);
  t.equal((await generate(cluster.base, 'alpha', PROMPTS[1]!)).json.text_output, expected.alpha![1], 'alpha keeps serving');
  cluster.child.kill('SIGTERM');
  await cluster.child;
  await noneLeft(t, cluster.marker);
});

t.test('--fail-fast: one dead worker stops the whole cluster with a non-zero exit', async (t) => {
  const cluster = await startCluster(['--fail-fast']);
  t.teardown(() => { cluster.child.kill('SIGKILL'); });
  t.ok(await cluster.ready, `ready (output: ${cluster.output().slice(-2000)})`);
  t.ok(await waitFor(() => cluster.pids('beta').length === 1), 'beta\'s rank is known');
  process.kill(cluster.pids('beta')[0]!, 'SIGKILL');
  const result = await cluster.child;
  t.not(result.exitCode, 0, `exit code ${result.exitCode}`);
  t.match(cluster.output(), /--fail-fast: model beta failed, stopping the whole cluster/);
  // The first cause leads the root cause, whatever happens while the cluster stops (issue 22, case 6).
  t.match(cluster.output(), /Root cause:\n\s+rank 0: --fail-fast: model beta failed: its rank 0 \(pid \d+ on \S+\) exited\n/, 'the root cause names the model');
  await noneLeft(t, cluster.marker);
});

t.test('the orchestrator killed: every worker group goes with it', async (t) => {
  const cluster = await startCluster();
  t.teardown(() => { cluster.child.kill('SIGKILL'); });
  t.ok(await cluster.ready, `ready (output: ${cluster.output().slice(-2000)})`);
  t.ok(await waitFor(() => /leader pid (\d+)/.test(cluster.output())), 'the orchestrator said its pid');
  const orchestrator = Number(/leader pid (\d+)/.exec(cluster.output())![1]);
  process.kill(orchestrator, 'SIGKILL');
  const result = await cluster.child;
  t.not(result.exitCode, 0);
  await noneLeft(t, cluster.marker);
});

async function drainKvEvents(base: string, method: 'GET' | 'POST' = 'POST'): Promise<any[]> {
  const res = await fetch(`${base}/kv_cache_events`, { method });
  if (res.status !== 200) throw new Error(`/kv_cache_events: ${res.status} ${await res.text()}`);
  return await res.json() as any[];
}

t.test('KV cache events: every group asked over its link, each event tagged with its model; none from a model without them or a dead group', async (t) => {
  const on = 'kv_cache:\n  tokens_per_block: 16\n  enable_reuse: true\n  event_buffer_max_size: 100\n';
  const cluster = await startCluster([], repository({
    'alpha.yaml': `model: ${fixtureDir('tiny-llama')}\n${on}`,
    'beta.yaml': `model: ${fixtureDir('tiny-gpt2')}\n${on}`,
    'gamma.yaml': `model: ${fixtureDir('tiny-llama')}\nkv_cache:\n  tokens_per_block: 16\n  enable_reuse: true\n`,
  }));
  t.teardown(() => { cluster.child.kill('SIGKILL'); });
  t.ok(await cluster.ready, `ready (output: ${cluster.output().slice(-2000)})`);

  // A request to each model, sharing nothing: alpha's by token ids (Triton's tensorrt_llm reaches it), so its stored
  // blocks can be checked token by token.
  const alphaIds = Array.from({ length: 40 }, (_, i) => 3 + ((i * 7) % 200));
  const alpha = await postJson(`${cluster.base}/v2/models/tensorrt_llm/generate`, { input_ids: alphaIds, request_output_len: 2 });
  t.equal(alpha.status, 200);
  const long = 'The quick brown fox jumps over the lazy dog while the jury said that machine learning is a field of study in artificial intelligence';
  for (const [model, text] of [['beta', long], ['gamma', `${long} again`]] as const) {
    t.equal((await generate(cluster.base, model, text, 2)).status, 200, `${model} answered`);
  }
  // A group's answer later than the drain's wait comes with the next drain, so drain until both models' are in
  // (however busy the machine).
  const first: any[] = [];
  const hasStored = (events: any[], model: string) => events.some((e) => e.model === model && e.data.type === 'stored');
  t.ok(await waitFor(async () => {
    first.push(...await drainKvEvents(cluster.base));
    return hasStored(first, 'alpha') && hasStored(first, 'beta');
  }), 'both recording models\' events arrive');
  t.same([...new Set(first.map((e) => e.model))].sort(), ['alpha', 'beta'], 'events from the two models that record them');
  const last: Record<string, number> = {};
  for (const model of ['alpha', 'beta']) {
    const events = first.filter((e) => e.model === model);
    t.same(Object.keys(events[0]), ['event_id', 'model', 'data', 'window_size'], `${model}: "model" next to event_id`);
    t.match(events[0], { event_id: 0, model, data: { type: 'created', num_blocks_per_cache_level: [Number] } }, `${model}: created first`);
    events.forEach((e, i) => t.equal(e.event_id, i, `${model}: the group's own event ids count up from 0`));
    const stored = events.filter((e) => e.data.type === 'stored');
    t.ok(stored.length > 0, `${model}: stored events`);
    t.equal(stored[0].data.parent_hash, null, `${model}: a prompt sharing nothing starts a chain`);
    t.match(stored[0].data.blocks[0], { type: 'stored_block', block_hash: /^\d+$/, lora_id: null, cache_level: 0, priority: 35 });
    t.equal(stored[0].data.blocks[0].tokens.length, 16, `${model}: full blocks`);
    last[model] = events.at(-1).event_id;
  }
  const alphaBlocks = first.filter((e) => e.model === 'alpha' && e.data.type === 'stored').flatMap((e) => e.data.blocks);
  t.same(alphaBlocks.map((b: any) => b.tokens.map((tok: any) => tok.token_id)), [alphaIds.slice(0, 16), alphaIds.slice(16, 32)], 'alpha: its prompt\'s two full blocks');
  t.same(await drainKvEvents(cluster.base), [], 'drained: the second read is empty');
  t.same(await drainKvEvents(cluster.base, 'GET'), [], 'GET too');

  // beta's group dies: the endpoint answers at once with what the live groups have.
  t.ok(await waitFor(() => cluster.pids('beta').length === 1), 'beta\'s rank is known');
  process.kill(cluster.pids('beta')[0]!, 'SIGKILL');
  t.equal((await unavailable(cluster.base, 'beta')).status, 503);
  t.equal((await postJson(`${cluster.base}/v2/models/tensorrt_llm/generate`, { input_ids: alphaIds.map((id) => id + 1), request_output_len: 2 })).status, 200);
  // The dead group is not asked (its executor knows it is gone): the drains bring alpha's new events only.
  const after: any[] = [];
  t.ok(await waitFor(async () => {
    after.push(...await drainKvEvents(cluster.base));
    return hasStored(after, 'alpha');
  }), 'alpha\'s new events arrive');
  t.ok(after.every((e) => e.model === 'alpha'), 'only alpha\'s events');
  t.equal(after[0].event_id, last.alpha! + 1, 'alpha\'s ids continue');

  cluster.child.kill('SIGTERM');
  t.equal((await cluster.child).exitCode, 0, 'SIGTERM drains and exits 0');
  await noneLeft(t, cluster.marker);
});

t.test('a model file with parallel.dp 2: two replicas of it behind its name next to another model; a dead replica is dropped alone', async (t) => {
  const expected = await oneRankOutputs(t);
  const repo = repository({
    'alpha.yaml': `model: ${fixtureDir('tiny-llama')}\nparallel:\n  dp: 2\nkv_cache:\n  tokens_per_block: 16\n`,
    'beta.yaml': `model: ${fixtureDir('tiny-gpt2')}\nkv_cache:\n  tokens_per_block: 16\n`,
  });
  const cluster = await startCluster([], repo);
  t.teardown(() => { cluster.child.kill('SIGKILL'); });
  t.ok(await cluster.ready, `ready (output: ${cluster.output().slice(-2000)})`);
  const replicaPid = (r: number) => {
    const m = new RegExp(`model alpha replica ${r}: ready on 1 rank\\(s\\) \\(pid (\\d+)@`).exec(cluster.output());
    return m ? Number(m[1]) : undefined;
  };
  t.ok(await waitFor(() => replicaPid(0) !== undefined && replicaPid(1) !== undefined), 'both replicas of alpha came up');
  t.ok(await waitFor(() => /orchestrator ready: 2 of 2 model\(s\) serving/.test(cluster.output())), 'the orchestrator says both models serve');
  for (const r of ['0', '1']) t.equal(await metric(cluster.metrics, 'trtllm_replica_ready', `model="alpha",replica="${r}"`), 1, `alpha replica ${r} ready`);
  // Replica 0 frozen holds the first request; least-load then sends the second to replica 1.
  process.kill(replicaPid(0)!, 'SIGSTOP');
  let first: Promise<{ status: number; json: any }>;
  let second: { status: number; json: any };
  try {
    first = generate(cluster.base, 'alpha', PROMPTS[0]!);
    t.ok(await waitFor(async () => (await metric(cluster.metrics, 'trtllm_replica_outstanding_requests', 'model="alpha",replica="0"')) === 1), 'replica 0 holds the first');
    second = await generate(cluster.base, 'alpha', PROMPTS[1]!);
  } finally {
    process.kill(replicaPid(0)!, 'SIGCONT');
  }
  t.equal((await first).json.text_output, expected.alpha![0], 'through replica 0 = one rank');
  t.equal(second.json.text_output, expected.alpha![1], 'through replica 1 = one rank');
  t.equal(await metric(cluster.metrics, 'trtllm_replica_requests_routed_total', 'model="alpha",replica="1"'), 1, 'replica 1 served one');
  t.equal((await generate(cluster.base, 'beta', PROMPTS[0]!)).json.text_output, expected.beta![0], 'beta = one rank');

  process.kill(replicaPid(1)!, 'SIGKILL');
  t.ok(await waitFor(async () => (await metric(cluster.metrics, 'trtllm_replica_ready', 'model="alpha",replica="1"')) === 0), 'replica 1 is dropped');
  t.equal((await generate(cluster.base, 'alpha', PROMPTS[2]!)).json.text_output, expected.alpha![2], 'alpha keeps serving on replica 0');
  t.equal((await generate(cluster.base, 'beta', PROMPTS[1]!)).json.text_output, expected.beta![1], 'beta is untouched');
  t.equal((await fetch(`${cluster.base}/v2/models/alpha/ready`)).status, 200, 'alpha stays ready while a replica serves');
  cluster.child.kill('SIGTERM');
  t.equal((await cluster.child).exitCode, 0, 'SIGTERM drains and exits 0');
  await noneLeft(t, cluster.marker);
});
