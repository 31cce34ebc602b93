// Speculative decoding by prompt lookup (--speculative-ngram) on the bundled model: greedy outputs equal those
// without it, token for token, streamed or not and batched, in fewer iterations (the model's own text repeats, so
// guesses hold); a seeded sampled request draws the same tokens too; the server's metrics count guesses made and
// kept; the same text on a pp = 2 cluster under mpirun. The exactness on the fake models:
// native/test/executor-speculative.
import t from 'tap';

import { defaultModelDir } from '../../../worker/common/package-root.js';
import { startServingCluster } from '../../helpers/launched-cluster.js';
import { metricValue, postJson, startTestServer } from '../../helpers/serving.js';
import { expectSameText, runPrompts, type SpeculationRun } from '../../helpers/speculation-runs.js';
import { Executor } from '../../../worker/executor/executor.js';
import { loadTokenizer } from '../../../worker/tokenizer.js';

const dir = defaultModelDir();
const tokenizer = loadTokenizer(dir);
const PROMPTS = ['The jury said it did find that the', 'He said that the man who had been', 'In the first place, the',
  'It was the first time that the committee had', 'The state of the art of the'];

/** Every request's output, with the iterations each took part in and the best gain of an iteration. */
async function outputs(draftTokens: number, streaming: boolean): Promise<SpeculationRun> {
  const executor = await Executor.load(dir, { numThreads: 2, ngramDraftTokens: draftTokens });
  try {
    return await runPrompts(executor, tokenizer, PROMPTS, { maxTokens: 48, streaming, sampled: { index: 4, seed: 7 } });
  } finally {
    await executor.shutdown();
  }
}

t.test('the same tokens with guesses as without, in fewer passes', async (t) => {
  const plain = await outputs(0, false);
  for (const streaming of [false, true]) {
    const spec = await outputs(4, streaming);
    t.same(spec.tokens, plain.tokens, `streaming ${streaming}: every request's tokens`);
    t.ok(spec.steps < plain.steps * 0.8, `${spec.steps} request-iterations with guesses, ${plain.steps} without`);
    t.ok(spec.best > 1.5, `some iteration gained ${spec.best.toFixed(2)} tokens per request`);
  }
  t.equal(plain.best, 1, 'without guesses one token per request and iteration');
  for (const ids of plain.tokens) t.equal(ids.length, 48);
});

t.test('--speculative-ngram through the server: the same text, and the metrics count guesses made and kept', async (t) => {
  const plain = await startTestServer(t, { model: dir, speculativeNgram: 0 });
  const spec = await startTestServer(t, { model: dir, speculativeNgram: 4 });
  const body = { text_input: PROMPTS[2], max_tokens: 40 };
  const a = await postJson(`${plain.base}/v2/models/ensemble/generate`, body);
  const b = await postJson(`${spec.base}/v2/models/ensemble/generate`, body);
  t.equal(a.status, 200);
  t.equal(b.json.text_output, a.json.text_output, 'the same text');
  const drafted = await metricValue(spec.metricsBase, 'trtllm_spec_decode_draft_tokens_total');
  const accepted = await metricValue(spec.metricsBase, 'trtllm_spec_decode_accepted_tokens_total');
  const drafts = await metricValue(spec.metricsBase, 'trtllm_spec_decode_drafts_total');
  t.ok(drafts > 0 && drafted >= drafts && accepted > 0 && accepted <= drafted, `guesses: ${drafted} in ${drafts} steps, ${accepted} kept`);
  t.equal(await metricValue(plain.metricsBase, 'trtllm_spec_decode_draft_tokens_total'), 0, 'none without --speculative-ngram');
});

t.test('pp = 2 under mpirun (--pp-micro-batches 1): guesses checked across both stages, the single rank\'s text', async (t) => {
  const single = await startTestServer(t, { model: dir });
  const cluster = await startServingCluster(t, ['--model', dir, '--world-size', '2', '--pp', '2', '--pp-micro-batches', '1',
    '--oversubscribe', '--threads', '1', '--speculative-ngram', '4']);
  await expectSameText(t, single.base, cluster.base, PROMPTS.slice(0, 3), 32);
  const kept = await metricValue(cluster.metricsBase, 'trtllm_spec_decode_accepted_tokens_total');
  t.ok(kept > 0, `guesses kept across the stages: ${kept}`);
});
