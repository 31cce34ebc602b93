// The model families beyond Llama / GPT-2 (issue 25) served as a user serves them: each fixture's float64
// transformers reference (scripts/fixtures/make_family_fixtures.py, make_moe_fixtures.py, make_window_fixtures.py; every greedy step's
// top-2 margin is at least 0.1 there, and the CPU model is within 1e-5 of it) gives the same greedy tokens through
// the executor with all cases in one batch, and through the KServe HTTP API of `trtllm-launch --world-size 2` at
// tp 2 and at pp 2 under mpirun (also with uneven stages, --pp-layers) — and, for the mixture-of-experts models, with the
// experts split over 2 ranks (ep 2).
import t from 'tap';

import { Executor } from '../../../worker/executor/executor.js';
import { fixtureDir, referenceCases } from '../../helpers/fixtures.js';
import { startLauncher } from '../../helpers/launched-cluster.js';
import { freePort, processesWith } from '../../helpers/processes.js';
import { waitFor } from '../../helpers/wait.js';

// Sliding windows of 8 positions (all layers, from layer 1 on, Gemma 2's alternate layers) and Phi-3's longrope
// (make_window_fixtures.py); the cases run 16 tokens past prompts of up to 70.
const WINDOWED = ['tiny-mistral-window', 'tiny-qwen2-window', 'tiny-gemma2', 'tiny-phi3-longrope'];
const FAMILIES = ['tiny-qwen3', 'tiny-qwen3-bias', 'tiny-phi3', 'tiny-gemma', 'tiny-qwen3-moe', 'tiny-qwen2-moe', 'tiny-mixtral',
  ...WINDOWED];

for (const model of FAMILIES) {
  t.test(`${model}: the reference's greedy tokens, all cases in one batch`, async (t) => {
    // Blocks of 4 tokens: a windowed sequence gives back the blocks that leave its window every few steps.
    const executor = await Executor.load(fixtureDir(model), { numThreads: 2, ...(WINDOWED.includes(model) ? { tokensPerBlock: 4 } : {}) });
    t.teardown(() => executor.shutdown());
    const cases = referenceCases(model);
    const results = await Promise.all(cases.map((c) => executor.generate({
      inputTokenIds: c.input_ids, maxTokens: c.max_new_tokens, endId: -1, output: { excludeInputFromOutput: true },
    })));
    cases.forEach((c, i) => t.same(results[i]!.outputTokenIds, [c.greedy_output_ids], `${c.name}: greedy tokens`));
    t.equal(executor.kvCacheStats().freeNumBlocks, executor.kvCacheStats().maxNumBlocks, 'all KV blocks free');
  });
}

const MOE = ['tiny-qwen3-moe', 'tiny-qwen2-moe', 'tiny-mixtral'];
const LAYOUTS = [['tp 2', ['--tp', '2']], ['pp 2', ['--pp', '2']]] as const;
const EP = [['tp 2 with ep 2', ['--tp', '2', '--ep', '2']]] as const;
// Uneven pipeline stages (--pp-layers) where a model has more layers than stages.
const SPLITS: Record<string, readonly (readonly [string, readonly string[]])[]> = {
  'tiny-gemma2': [['pp 2 with --pp-layers 3,1', ['--pp', '2', '--pp-layers', '3,1']], ['pp 2 with --pp-layers balanced', ['--pp', '2', '--pp-layers', 'balanced']]],
  'tiny-qwen3-moe': [['pp 2 with --pp-layers 1,2', ['--pp', '2', '--pp-layers', '1,2']]],
};

for (const model of ['tiny-qwen3', 'tiny-phi3', 'tiny-gemma', ...MOE, ...WINDOWED]) {
  for (const [layout, args] of [...LAYOUTS, ...(MOE.includes(model) ? EP : []), ...(SPLITS[model] ?? [])]) {
    t.test(`${model} at ${layout} through the API under mpirun: the reference's greedy tokens`, async (t) => {
      const port = await freePort();
      const launcher = startLauncher(['--model', fixtureDir(model), '--world-size', '2', ...args, '--oversubscribe', '--threads', '1',
        '--http-port', String(port), '--metrics-port', String(await freePort()), '--grpc-port', String(await freePort())]);
      const { child } = launcher;
      t.teardown(() => { child.kill('SIGKILL'); });
      const up = await launcher.ready;
      t.ok(up, up ? 'ready' : `not ready: ${launcher.output().slice(-1500)}`);
      // All at once: at pp 2 they run in two micro-batches kept in flight together (pipelined pp).
      const cases = referenceCases(model);
      const answers = await Promise.all(cases.map(async (c) => {
        const res = await fetch(`http://127.0.0.1:${port}/v2/models/tensorrt_llm/generate`, {
          method: 'POST', headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ input_ids: c.input_ids, request_output_len: c.max_new_tokens, end_id: -1 }),
        });
        return { status: res.status, json: await res.json() as { output_ids?: number[] } };
      }));
      cases.forEach((c, i) => {
        t.equal(answers[i]!.status, 200);
        t.same(answers[i]!.json.output_ids?.slice(c.input_ids.length), c.greedy_output_ids, `${c.name}: greedy tokens`);
      });
      child.kill('SIGTERM');
      const result = await child;
      t.equal(result.exitCode, 0, result.exitCode === 0 ? 'exit 0' : `exit ${result.exitCode}: ${launcher.output().slice(-800)}`);
      t.ok(await waitFor(() => processesWith(`--http-port ${port}`).length === 0), 'nothing left');
    });
  }
}
