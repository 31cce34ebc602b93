// Speculative decoding by Medusa heads (--medusa-heads) on the bundled model, with heads as Medusa's training
// starts them (test/helpers/medusa-heads.ts): greedy and seeded sampled outputs equal those without heads, token for
// token, streamed or not and batched — as the chain of first choices, where the guesses kept are exactly the
// outputs' repeats (what such heads can guess), and as trees of candidates (the default choices and a
// --medusa-choices list). Through the server: the same text, the guesses in the metrics, num_draft_tokens 0 turning
// them off; the same text on a world-size-2 (tp 2) cluster under mpirun, the heads on the leading rank, the trees
// sent to the follower; under pp 2 (and tp 2 x pp 2) the heads on the last stage, answering the leader: the same
// text and the same guesses kept as on one rank. Refused: heads together with another drafter, a missing directory, heads made for another
// model, choices deeper than the heads or before their parents; --medusa-choices' text and file forms. The engine's
// own checks (the layout, float64 guesses, tree attention): native/test/executor-medusa.
import t from 'tap';

import { defaultModelDir, packageRoot } from '../../../worker/common/package-root.js';
import { Executor } from '../../../worker/executor/executor.js';
import { loadTokenizer } from '../../../worker/tokenizer.js';
import { startServingCluster } from '../../helpers/launched-cluster.js';
import { echoKept, writeMedusaHeads } from '../../helpers/medusa-heads.js';
import { metricValue, postJson, speculationCounts, startTestServer } from '../../helpers/serving.js';
import { expectSameText, runPrompts, type SpeculationRun } from '../../helpers/speculation-runs.js';
import { tempDir } from '../../helpers/temp-dir.js';
import { medusaChoicesKind } from '../../../worker/options/medusa-choices.js';

const dir = defaultModelDir();
const tokenizer = loadTokenizer(dir);
const heads = writeMedusaHeads(dir, tempDir('medusa-heads-'), 3);
const PROMPTS = ['The jury said it did find that the', 'He said that the man who had been', 'In the first place, the',
  'It was the first time that the committee had'];
// Prompts whose continuations repeat tokens (the bundled model closes a run of '(' with a run of ')'): what echo
// heads can guess right.
const REPEATING = ['(((((((', 'Ha ha ha ha ha ha'];
const MAX_TOKENS = 32;

// choices: --medusa-choices' JSON text (absent: the engine's default tree).
async function outputs(medusaHeads: string | undefined, streaming: boolean, perStep = 4, prompts = PROMPTS, medusaChoices?: string): Promise<SpeculationRun> {
  const executor = await Executor.load(dir, {
    numThreads: 2, ...(medusaHeads ? { medusaHeads, draftModelTokens: perStep } : {}), ...(medusaChoices ? { medusaChoices } : {}),
  });
  try {
    return await runPrompts(executor, tokenizer, prompts, { maxTokens: MAX_TOKENS, streaming, sampled: { index: 3, seed: 11 } });
  } finally {
    await executor.shutdown();
  }
}

t.test('the same tokens with Medusa heads as without; as a chain, the guesses kept are the repeats', async (t) => {
  const prompts = [...PROMPTS, ...REPEATING];
  const plain = await outputs(undefined, false, 4, prompts);
  t.equal(plain.drafted, 0);
  // Each head's first choice only: what these heads guess there is the token drawn last.
  const chain = '[[0], [0, 0], [0, 0, 0]]';
  for (const [streaming, perStep] of [[false, 4], [true, 2]] as const) {
    const spec = await outputs(heads, streaming, perStep, prompts, chain);
    t.same(spec.tokens, plain.tokens, `streaming ${streaming}, ${perStep} a step: every request's tokens`);
    const want = plain.tokens.reduce((n, ids) => n + echoKept(ids, MAX_TOKENS, Math.min(perStep, 3)), 0);
    t.ok(spec.drafted > 0 && want > 0, `${spec.drafted} guesses checked; ${want} repeats to guess`);
    t.equal(spec.accepted, want, `streaming ${streaming}: ${spec.accepted} guesses kept, the outputs' repeats say ${want}`);
  }
});

t.test('trees of candidates: the same tokens', async (t) => {
  const prompts = [...PROMPTS, ...REPEATING];
  const plain = await outputs(undefined, false, 4, prompts);
  const chain = await outputs(heads, false, 3, prompts, '[[0], [0, 0], [0, 0, 0]]');
  for (const [perStep, choices] of [[8, undefined], [20, '[[0], [1], [2], [3], [0, 0], [1, 0], [0, 1], [0, 0, 0], [0, 0, 1], [0, 1, 0]]']] as const) {
    for (const streaming of [false, true]) {
      const tree = await outputs(heads, streaming, perStep, prompts, choices);
      t.same(tree.tokens, plain.tokens, `${choices ?? 'default choices'}, ${perStep} a step, streaming ${streaming}: every request's tokens`);
      t.ok(tree.drafted > 0 && tree.accepted > 0, `${tree.accepted} guesses kept from ${tree.drafted} in trees, ${chain.accepted} from ${chain.drafted} in the chain`);
    }
  }
});

t.test('--medusa-heads through the server: the same text, the guesses in the metrics', async (t) => {
  const plain = await startTestServer(t, { model: dir });
  const spec = await startTestServer(t, { model: dir, medusaHeads: heads, numDraftTokens: 3 });
  const body = { text_input: PROMPTS[2], max_tokens: 40 };
  const a = await postJson(`${plain.base}/v2/models/ensemble/generate`, body);
  const b = await postJson(`${spec.base}/v2/models/ensemble/generate`, body);
  t.equal(a.status, 200);
  t.equal(b.json.text_output, a.json.text_output, 'the same text');
  const drafted = await metricValue(spec.metricsBase, 'trtllm_spec_decode_draft_tokens_total');
  t.ok(drafted > 0, `guesses: ${drafted}`);
  const off = await postJson(`${spec.base}/v2/models/ensemble/generate`, { ...body, num_draft_tokens: 0 });
  t.equal(off.json.text_output, a.json.text_output, 'num_draft_tokens 0: the same text');
  t.equal(await metricValue(spec.metricsBase, 'trtllm_spec_decode_draft_tokens_total'), drafted, 'num_draft_tokens 0: no guesses');
});

t.test('world size 2 (tp 2) under mpirun: the heads run on the leader, the text is the single rank\'s', async (t) => {
  const single = await startTestServer(t, { model: dir });
  const cluster = await startServingCluster(t, ['--model', dir, '--world-size', '2', '--oversubscribe', '--threads', '1',
    '--medusa-heads', heads, '--num-draft-tokens', '3']);
  await expectSameText(t, single.base, cluster.base, PROMPTS.slice(0, 2), 24);
  t.ok(await metricValue(cluster.metricsBase, 'trtllm_spec_decode_draft_tokens_total') > 0, 'guesses were made');
});

// The chain of first choices: what these heads guess is the token drawn last, so a repeat is kept — through the
// leader's plan, the last stage's heads and the guesses sent back as well as on one rank.
for (const grid of [['--world-size', '2', '--pp', '2'], ['--world-size', '4', '--tp', '2', '--pp', '2']]) {
  t.test(`${grid.slice(2).join(' ')} under mpirun: the last stage runs the heads for the leader; the same text and the same guesses kept`, async (t) => {
    const chain = '[[0], [0, 0], [0, 0, 0]]';
    const single = await startTestServer(t, { model: dir, medusaHeads: heads, numDraftTokens: 3, medusaChoices: chain });
    const cluster = await startServingCluster(t, ['--model', dir, ...grid, '--pp-micro-batches', '1', '--oversubscribe',
      '--threads', '1', '--medusa-heads', heads, '--num-draft-tokens', '3', '--medusa-choices', chain]);
    await expectSameText(t, single.base, cluster.base, [PROMPTS[0]!, ...REPEATING], 24);
    const one = await speculationCounts(single.metricsBase), parallel = await speculationCounts(cluster.metricsBase);
    t.ok(one.accepted > 0, `one rank kept ${one.accepted} of ${one.drafted} guesses`);
    t.same(parallel, one, 'the same guesses checked and kept as on one rank');
  });
}

t.test('refused, with the reason', async (t) => {
  await t.rejects(Executor.load(dir, { numThreads: 1, medusaHeads: heads, ngramDraftTokens: 2 }),
    { code: 'invalid_argument', message: `--medusa-heads ${heads} and --speculative-ngram 2 each choose how guesses are made; give one of them` });
  await t.rejects(Executor.load(dir, { numThreads: 1, medusaHeads: heads, draftModel: dir }),
    { code: 'invalid_argument', message: `--draft-model ${dir} and --medusa-heads ${heads} each choose how guesses are made; give one of them` });
  await t.rejects(Executor.load(dir, { numThreads: 1, medusaHeads: '/nonexistent/heads' }),
    { code: 'not_found', message: /Medusa heads: \/nonexistent\/heads is not a directory/ });
  await t.rejects(Executor.load(dir, { numThreads: 1, medusaHeads: heads, medusaChoices: '[[0], [0, 0], [0, 0, 0], [0, 0, 0, 0]]' }),
    { code: 'invalid_argument', message: /medusa_choices: path \[0, 0, 0, 0\] is 4 deep but there are 3 heads/ });
  await t.rejects(Executor.load(dir, { numThreads: 1, medusaHeads: heads, medusaChoices: '[[0, 1]]' }),
    { code: 'invalid_argument', message: /medusa_choices: path \[0, 1\] comes before its parent \[0\]/ });
  // The repository's fixture heads are tiny-llama's (hidden 64, 512 ids): not the bundled model's.
  const tiny = `${packageRoot()}/test/fixtures/medusa/tiny-llama-heads`;
  await t.rejects(Executor.load(dir, { numThreads: 1, medusaHeads: tiny }),
    { code: 'bad_checkpoint', message: /tensor '0\.0\.linear\.weight' is \[64, 64\] but a residual block's weight of a model with hidden_size 384 and vocab_size 8192 is \[384, 384\]/ });
});

t.test('--medusa-choices: JSON text on the command line, a list of lists in a file', async (t) => {
  t.same(medusaChoicesKind.fromText('[[0], [0, 0], [1]]'), { ok: true, value: '[[0],[0,0],[1]]' });
  t.same(medusaChoicesKind.fromFile([[0], [1, 2]]), { ok: true, value: '[[0],[1,2]]' });
  for (const bad of ['nope', '[]', '[[]]', '[[10]]', '[[0.5]]', '[0, 1]', '{"a": 1}']) {
    t.match(medusaChoicesKind.fromText(bad), { ok: false, rule: /must be a list of paths of ranks, each a non-empty list of integers in \[0, 10\)/ }, bad);
  }
  t.match(medusaChoicesKind.fromFile('[[0]]'), { ok: false }, 'a file gives a list, not its text');
  t.match(medusaChoicesKind.fromText(JSON.stringify(Array.from({ length: 64 }, (_, i) => [i % 10]))), { ok: false, rule: /at most 63 paths/ });
});
