// Speculative decoding by EAGLE heads (--eagle-heads) on the fixture model tiny-llama, with the fixture heads
// (scripts/fixtures/make_eagle_heads.py, which also computed in numpy the guesses a greedy request makes and keeps):
// greedy and seeded sampled outputs equal those without heads, token for token, streamed or not and batched, also
// with a tree of guesses (--eagle-choices; a bad tree or one without heads refused, naming eagle_choices); a
// reference request makes and keeps exactly the guesses the numpy run did. Through the server: the same text, also
// streamed, the guesses in the metrics, num_draft_tokens 0 turning them off; on a world-size-2 (tp 2) cluster under
// mpirun the heads run on the leading rank: the same text and the same guesses kept as on one rank, a tree's too; pp 2 is refused
// at load, saying why. Refused: heads together with another drafter (naming both options), a missing directory,
// heads made for another model. EAGLE-3 heads (the fixture's LlamaForCausalLMEagle3, fc over three of the model's
// layers, a draft vocabulary of 256 ids): the reference request's guesses, the same tokens as without heads, and
// through the server on one rank and on a tp 2 cluster the same text, with guesses. The engine's own checks (the
// layout, the guesses against the numpy reference, bad heads): native/test/executor-eagle.
import { readFileSync } from 'node:fs';

import t from 'tap';
import type { Test } from 'tap';

import { defaultModelDir, packageRoot } from '../../../worker/common/package-root.js';
import { Executor } from '../../../worker/executor/executor.js';
import { loadTokenizer } from '../../../worker/tokenizer.js';
import { fixtureDir } from '../../helpers/fixtures.js';
import { launchCluster, startServingCluster } from '../../helpers/launched-cluster.js';
import { metricValue, postJson, postSse, speculationCounts, startTestServer } from '../../helpers/serving.js';
import { expectSameText, runPrompts, type SpeculationRun } from '../../helpers/speculation-runs.js';

const dir = fixtureDir('tiny-llama');
const tokenizer = loadTokenizer(dir);
const heads = `${packageRoot()}/test/fixtures/eagle/tiny-llama-heads`;
const heads3 = `${packageRoot()}/test/fixtures/eagle/tiny-llama-eagle3-heads`;
const PROMPTS = ['What is machine learning?', 'The quick brown fox', 'Once upon a time there was', 'Hello hello hello'];
const MAX_TOKENS = 24;

interface ReferenceCase { input_ids: number[]; output_ids: number[]; draft_tokens: number; accepted_tokens: number }
interface Reference { num_draft_tokens: number; max_tokens: number; cases: ReferenceCase[] }
const referenceOf = (headsDir: string) => JSON.parse(readFileSync(`${headsDir}/reference.json`, 'utf8')) as Reference;

// eagleChoices: --eagle-choices' JSON text (absent: a chain of guesses).
async function outputs(eagleHeads: string | undefined, streaming: boolean, perStep = 4, eagleChoices?: string): Promise<SpeculationRun> {
  const executor = await Executor.load(dir, {
    numThreads: 2, ...(eagleHeads ? { eagleHeads, draftModelTokens: perStep } : {}), ...(eagleChoices ? { eagleChoices } : {}),
  });
  try {
    return await runPrompts(executor, tokenizer, PROMPTS, { maxTokens: MAX_TOKENS, streaming, sampled: { index: 3, seed: 11 } });
  } finally {
    await executor.shutdown();
  }
}

t.test('the same tokens with EAGLE heads as without', async (t) => {
  const plain = await outputs(undefined, false);
  t.equal(plain.drafted, 0);
  for (const [headsDir, streaming, perStep] of [[heads, false, 4], [heads, true, 2], [heads3, false, 4]] as const) {
    const spec = await outputs(headsDir, streaming, perStep);
    t.same(spec.tokens, plain.tokens, `${headsDir}, streaming ${streaming}, ${perStep} a step: every request's tokens`);
    t.ok(spec.drafted > 0, `${spec.accepted} of ${spec.drafted} guesses kept`);
  }
});

t.test('a tree of guesses (--eagle-choices): the same tokens as without heads, EAGLE-1 and EAGLE-3', async (t) => {
  const plain = await outputs(undefined, false);
  const tree = '[[0], [1], [0, 0], [0, 1], [2], [0, 0, 0]]';
  for (const [headsDir, streaming] of [[heads, false], [heads, true], [heads3, false]] as const) {
    const spec = await outputs(headsDir, streaming, 6, tree);
    t.same(spec.tokens, plain.tokens, `${headsDir}, streaming ${streaming}: every request's tokens`);
    t.ok(spec.accepted > 0, `${spec.accepted} of ${spec.drafted} guesses kept`);
  }
});

t.test('a reference request makes and keeps the guesses the numpy run did (EAGLE-1 and EAGLE-3 heads)', async (t) => {
  for (const headsDir of [heads, heads3]) await checkReference(t, headsDir);
});

async function checkReference(t: Test, headsDir: string): Promise<void> {
  const reference = referenceOf(headsDir);
  for (const c of reference.cases) {
    const executor = await Executor.load(dir, { numThreads: 2, eagleHeads: headsDir, draftModelTokens: reference.num_draft_tokens });
    try {
      const ids: number[] = [];
      for await (const r of executor.enqueue({ inputTokenIds: c.input_ids, maxTokens: reference.max_tokens, output: { excludeInputFromOutput: true } })) {
        ids.push(...(r.outputTokenIds?.[0] ?? []));
      }
      t.same(ids, c.output_ids, 'the reference output');
      const stats = executor.iterationStats();
      t.equal(stats.reduce((n, s) => n + s.specDecodingStats.numDraftTokens, 0), c.draft_tokens, 'guesses made');
      t.equal(stats.reduce((n, s) => n + s.specDecodingStats.numAcceptedTokens, 0), c.accepted_tokens, 'guesses kept');
    } finally {
      await executor.shutdown();
    }
  }
}

t.test('--eagle-heads through the server: the same text, streamed too, the guesses in the metrics', async (t) => {
  const plain = await startTestServer(t, { model: dir });
  const spec = await startTestServer(t, { model: dir, eagleHeads: heads, numDraftTokens: 4 });
  const body = { text_input: PROMPTS[0], max_tokens: 30 };
  const a = await postJson(`${plain.base}/v2/models/ensemble/generate`, body);
  const b = await postJson(`${spec.base}/v2/models/ensemble/generate`, body);
  t.equal(a.status, 200);
  t.equal(b.json.text_output, a.json.text_output, 'the same text');
  const plainStream = await postSse(`${plain.base}/v2/models/ensemble/generate_stream`, body);
  const stream = await postSse(`${spec.base}/v2/models/ensemble/generate_stream`, body);
  t.equal(stream.status, 200);
  t.ok(stream.events.length > 1, `${stream.events.length} events`);
  t.equal(stream.events.map((e) => e.text_output).join(''), plainStream.events.map((e) => e.text_output).join(''), 'streamed: the same text');
  const drafted = await metricValue(spec.metricsBase, 'trtllm_spec_decode_draft_tokens_total');
  t.ok(drafted > 0, `guesses: ${drafted}`);
  const off = await postJson(`${spec.base}/v2/models/ensemble/generate`, { ...body, num_draft_tokens: 0 });
  t.equal(off.json.text_output, a.json.text_output, 'num_draft_tokens 0: the same text');
  t.equal(await metricValue(spec.metricsBase, 'trtllm_spec_decode_draft_tokens_total'), drafted, 'num_draft_tokens 0: no guesses');
});

t.test('world size 2 (tp 2) under mpirun: the heads run on the leader; the same text and guesses as one rank', async (t) => {
  const single = await startTestServer(t, { model: dir, eagleHeads: heads, numDraftTokens: 3 });
  const cluster = await startServingCluster(t, ['--model', dir, '--world-size', '2', '--oversubscribe', '--threads', '1',
    '--eagle-heads', heads, '--num-draft-tokens', '3']);
  await expectSameText(t, single.base, cluster.base, PROMPTS.slice(0, 2), 24);
  const one = await speculationCounts(single.metricsBase), parallel = await speculationCounts(cluster.metricsBase);
  t.ok(one.drafted > 0, `one rank made ${one.drafted} guesses`);
  t.same(parallel, one, 'the same guesses checked and kept as on one rank');
});

t.test('a tree of guesses on a tp 2 cluster: the same text and guesses as one rank', async (t) => {
  const tree = '[[0],[1],[0,0],[0,1],[2]]';
  const single = await startTestServer(t, { model: dir, eagleHeads: heads, numDraftTokens: 5, eagleChoices: tree });
  const cluster = await startServingCluster(t, ['--model', dir, '--world-size', '2', '--oversubscribe', '--threads', '1',
    '--eagle-heads', heads, '--num-draft-tokens', '5', '--eagle-choices', tree]);
  await expectSameText(t, single.base, cluster.base, PROMPTS.slice(0, 2), 24);
  const one = await speculationCounts(single.metricsBase), parallel = await speculationCounts(cluster.metricsBase);
  t.ok(one.accepted > 0, `one rank kept ${one.accepted} of ${one.drafted} guesses`);
  t.same(parallel, one, 'the same guesses checked and kept as on one rank');
});

t.test('EAGLE-3 heads through the server, on one rank and on a tp 2 cluster: the same text as without, with guesses', async (t) => {
  const plain = await startTestServer(t, { model: dir });
  const spec = await startTestServer(t, { model: dir, eagleHeads: heads3, numDraftTokens: 4 });
  await expectSameText(t, plain.base, spec.base, PROMPTS.slice(0, 2), 30);
  const drafted = await metricValue(spec.metricsBase, 'trtllm_spec_decode_draft_tokens_total');
  t.ok(drafted > 0, `guesses: ${drafted}`);
  const cluster = await startServingCluster(t, ['--model', dir, '--world-size', '2', '--oversubscribe', '--threads', '1',
    '--eagle-heads', heads3, '--num-draft-tokens', '4']);
  await expectSameText(t, plain.base, cluster.base, PROMPTS.slice(0, 2), 30);
  t.equal(await metricValue(cluster.metricsBase, 'trtllm_spec_decode_draft_tokens_total'), drafted,
    'tp 2: the same guesses as one rank (the layers\' streams are whole on the leading rank)');
});

t.test('pp 2 under mpirun: refused at load, saying why (the final hidden states are on the last stage)', async (t) => {
  const cluster = await launchCluster(['--pp', '2', '--eagle-heads', heads]);
  t.notOk(await cluster.ready, 'never ready');
  await cluster.child;
  t.match(cluster.output(), /EAGLE heads \(--eagle-heads\) read the model's final hidden states on the leading rank, and with pp 2 they are on the last stage; use --medusa-heads or --draft-model/);
});

t.test('refused, with the reason', async (t) => {
  await t.rejects(Executor.load(dir, { numThreads: 1, eagleHeads: heads, ngramDraftTokens: 2 }),
    { code: 'invalid_argument', message: `--speculative-ngram 2 and --eagle-heads ${heads} each choose how guesses are made; give one of them` });
  await t.rejects(Executor.load(dir, { numThreads: 1, eagleHeads: heads, medusaHeads: heads }),
    { code: 'invalid_argument', message: `--medusa-heads ${heads} and --eagle-heads ${heads} each choose how guesses are made; give one of them` });
  await t.rejects(Executor.load(dir, { numThreads: 1, eagleHeads: heads, draftModel: dir }),
    { code: 'invalid_argument', message: `--draft-model ${dir} and --eagle-heads ${heads} each choose how guesses are made; give one of them` });
  await t.rejects(Executor.load(dir, { numThreads: 1, eagleHeads: heads, eagleChoices: '[[0, 1]]' }),
    { code: 'invalid_argument', message: /eagle_choices: path \[0, 1\] comes before its parent \[0\]/ });
  await t.rejects(Executor.load(dir, { numThreads: 1, eagleChoices: '[[0]]' }),
    { code: 'invalid_argument', message: /eagle_choices is set but there are no EAGLE heads/ });
  await t.rejects(Executor.load(dir, { numThreads: 1, eagleHeads: '/nonexistent/heads' }),
    { code: 'not_found', message: /EAGLE heads: \/nonexistent\/heads is not a directory/ });
  // The fixture heads are tiny-llama's (hidden 64): not the bundled model's.
  await t.rejects(Executor.load(defaultModelDir(), { numThreads: 1, eagleHeads: heads }),
    { code: 'bad_checkpoint', message: /hidden_size 64 but the model's is 384/ });
  await t.rejects(Executor.load(defaultModelDir(), { numThreads: 1, eagleHeads: heads3 }),
    { code: 'bad_checkpoint', message: /EAGLE heads: .*tiny-llama-eagle3-heads\/config.json: hidden_size 64 but the model's is 384/ });
});
