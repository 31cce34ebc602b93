// Speculative decoding by Medusa heads (--medusa-heads) on the bundled model, with heads as Medusa's training
// starts them (test/helpers/medusa-heads.ts): greedy and seeded sampled outputs equal those without heads, token for
// token, streamed or not and batched, and the guesses kept are exactly the outputs' repeats (what such heads can
// guess). Through the server: the same text, the guesses in the metrics, num_draft_tokens 0 turning them off; the
// same text on a world-size-2 (tp 2) cluster under mpirun, the heads on the leading rank. Refused: heads together
// with another drafter, a missing directory, heads made for another model. The engine's own checks (the layout,
// float64 guesses): native/test/executor-medusa.
import t from 'tap';

import { defaultModelDir, packageRoot } from '../../../worker/common/package-root.js';
import { Executor } from '../../../worker/executor/executor.js';
import { loadTokenizer } from '../../../worker/tokenizer.js';
import { startServingCluster } from '../../helpers/launched-cluster.js';
import { echoKept, writeEchoMedusaHeads } from '../../helpers/medusa-heads.js';
import { metricValue, postJson, startTestServer } from '../../helpers/serving.js';
import { tempDir } from '../../helpers/temp-dir.js';

const dir = defaultModelDir();
const tokenizer = loadTokenizer(dir);
const heads = writeEchoMedusaHeads(dir, tempDir('medusa-heads-'), 3);
const PROMPTS = ['The jury said it did find that the', 'He said that the man who had been', 'In the first place, the',
  'It was the first time that the committee had'];
// Prompts whose continuations repeat tokens (the bundled model closes a run of '(' with a run of ')'): what echo
// heads can guess right.
const REPEATING = ['(((((((', 'Ha ha ha ha ha ha'];
const MAX_TOKENS = 32;

interface Outcome { tokens: number[][]; drafted: number; accepted: number }

async function outputs(medusaHeads: string | undefined, streaming: boolean, perStep = 4, prompts = PROMPTS): Promise<Outcome> {
  const executor = await Executor.load(dir, { numThreads: 2, ...(medusaHeads ? { medusaHeads, draftModelTokens: perStep } : {}) });
  try {
    const requests = prompts.map(async (text, k) => {
      const handle = executor.enqueue({ inputTokenIds: tokenizer.encode(text), maxTokens: MAX_TOKENS, streaming, output: { excludeInputFromOutput: true },
        ...(k === 3 ? { sampling: { temperature: 0.8, topP: 0.9, seed: 11 } } : {}) });
      const ids: number[] = [];
      for await (const r of handle) ids.push(...(r.outputTokenIds?.[0] ?? []));
      return ids;
    });
    const tokens = await Promise.all(requests);
    const stats = executor.iterationStats();
    return {
      tokens,
      drafted: stats.reduce((n, s) => n + s.specDecodingStats.numDraftTokens, 0),
      accepted: stats.reduce((n, s) => n + s.specDecodingStats.numAcceptedTokens, 0),
    };
  } finally {
    await executor.shutdown();
  }
}

t.test('the same tokens with Medusa heads as without; the guesses kept are the repeats', async (t) => {
  const prompts = [...PROMPTS, ...REPEATING];
  const plain = await outputs(undefined, false, 4, prompts);
  t.equal(plain.drafted, 0);
  for (const [streaming, perStep] of [[false, 4], [true, 2]] as const) {
    const spec = await outputs(heads, streaming, perStep, prompts);
    t.same(spec.tokens, plain.tokens, `streaming ${streaming}, ${perStep} a step: every request's tokens`);
    const want = plain.tokens.reduce((n, ids) => n + echoKept(ids, MAX_TOKENS, Math.min(perStep, 3)), 0);
    t.ok(spec.drafted > 0 && want > 0, `${spec.drafted} guesses checked; ${want} repeats to guess`);
    t.equal(spec.accepted, want, `streaming ${streaming}: ${spec.accepted} guesses kept, the outputs' repeats say ${want}`);
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
  for (const prompt of PROMPTS.slice(0, 2)) {
    const body = { text_input: prompt, max_tokens: 24 };
    const a = await postJson(`${single.base}/v2/models/ensemble/generate`, body);
    const b = await postJson(`${cluster.base}/v2/models/ensemble/generate`, body);
    t.equal(b.status, 200);
    t.equal(b.json.text_output, a.json.text_output, `"${prompt}": the same text`);
  }
  t.ok(await metricValue(cluster.metricsBase, 'trtllm_spec_decode_draft_tokens_total') > 0, 'guesses were made');
});

t.test('refused, with the reason', async (t) => {
  await t.rejects(Executor.load(dir, { numThreads: 1, medusaHeads: heads, ngramDraftTokens: 2 }),
    { code: 'invalid_argument', message: `--medusa-heads ${heads} and --speculative-ngram 2 each choose how guesses are made; give one of them` });
  await t.rejects(Executor.load(dir, { numThreads: 1, medusaHeads: heads, draftModel: dir }),
    { code: 'invalid_argument', message: `--draft-model ${dir} and --medusa-heads ${heads} each choose how guesses are made; give one of them` });
  await t.rejects(Executor.load(dir, { numThreads: 1, medusaHeads: '/nonexistent/heads' }),
    { code: 'not_found', message: /Medusa heads: \/nonexistent\/heads is not a directory/ });
  // The repository's fixture heads are tiny-llama's (hidden 64, 512 ids): not the bundled model's.
  const tiny = `${packageRoot()}/test/fixtures/medusa/tiny-llama-heads`;
  await t.rejects(Executor.load(dir, { numThreads: 1, medusaHeads: tiny }),
    { code: 'bad_checkpoint', message: /tensor '0\.0\.linear\.weight' is \[64, 64\] but a residual block's weight of a model with hidden_size 384 and vocab_size 8192 is \[384, 384\]/ });
});
