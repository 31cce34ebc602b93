// Speculative decoding by draft model (--draft-model) on the bundled model: with its own first two layers as the
// draft (test/helpers/layer-draft.ts) and with itself as the draft, greedy and seeded sampled outputs equal those
// without a draft, token for token, streamed or not and batched; the model as its own draft has every guess kept,
// in far fewer passes. Through the server: the same text, the guesses counted in the metrics; the same again on a
// world-size-2 (tp 2) cluster under mpirun, the draft on the leading rank. Refused before
// loading: a draft over another tokenizer (the first differing id named), a directory without config.json, a draft
// model together with --speculative-ngram. The exactness on the fake models: native/test/executor-draft-model.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';

import { defaultModelDir } from '../../../worker/common/package-root.js';
import { Executor } from '../../../worker/executor/executor.js';
import { loadTokenizer } from '../../../worker/tokenizer.js';
import { writeLayerDraft } from '../../helpers/layer-draft.js';
import { startServingCluster } from '../../helpers/launched-cluster.js';
import { metricValue, postJson, startTestServer } from '../../helpers/serving.js';
import { expectSameText, runPrompts, type SpeculationRun } from '../../helpers/speculation-runs.js';
import { tempDir } from '../../helpers/temp-dir.js';

const dir = defaultModelDir();
const tokenizer = loadTokenizer(dir);
const draftDir = writeLayerDraft(dir, tempDir('layer-draft-'), 2);
const PROMPTS = ['The jury said it did find that the', 'He said that the man who had been', 'In the first place, the',
  'It was the first time that the committee had'];

async function outputs(draftModel: string | undefined, streaming: boolean, sampled = true): Promise<SpeculationRun> {
  const executor = await Executor.load(dir, { numThreads: 2, ...(draftModel ? { draftModel, draftModelTokens: 3 } : {}) });
  try {
    return await runPrompts(executor, tokenizer, PROMPTS, { maxTokens: 32, streaming, ...(sampled ? { sampled: { index: 3, seed: 11 } } : {}) });
  } finally {
    await executor.shutdown();
  }
}

t.test('the same tokens with a draft model as without', async (t) => {
  const plain = await outputs(undefined, false);
  for (const streaming of [false, true]) {
    const layer = await outputs(draftDir, streaming);
    t.same(layer.tokens, plain.tokens, `two-layer draft, streaming ${streaming}: every request's tokens`);
    t.ok(layer.drafted > 0 && layer.accepted > 0 && layer.accepted < layer.drafted, `two-layer draft: ${layer.accepted} of ${layer.drafted} guesses kept`);
  }
  const self = await outputs(dir, false);
  t.same(self.tokens, plain.tokens, 'the model as its own draft: every request\'s tokens');
  // All greedy: its guesses are the model's own argmaxes (up to the order of float sums in a 1-token and a
  // 4-token pass, which may flip a near tie).
  const greedy = await outputs(undefined, false, false), selfGreedy = await outputs(dir, false, false);
  t.same(selfGreedy.tokens, greedy.tokens, 'the model as its own draft, all greedy: every request\'s tokens');
  t.ok(selfGreedy.steps < greedy.steps * 0.5, `the model as its own draft: ${selfGreedy.steps} request-iterations, ${greedy.steps} without`);
  t.ok(selfGreedy.accepted >= selfGreedy.drafted * 0.95, `the model as its own draft: ${selfGreedy.accepted} of ${selfGreedy.drafted} guesses kept`);
  t.equal(plain.drafted, 0);
  for (const ids of plain.tokens) t.equal(ids.length, 32);
});

t.test('--draft-model through the server: the same text, the guesses in the metrics', async (t) => {
  const plain = await startTestServer(t, { model: dir });
  const spec = await startTestServer(t, { model: dir, draftModel: draftDir, numDraftTokens: 4 });
  const body = { text_input: PROMPTS[2], max_tokens: 40 };
  const a = await postJson(`${plain.base}/v2/models/ensemble/generate`, body);
  const b = await postJson(`${spec.base}/v2/models/ensemble/generate`, body);
  t.equal(a.status, 200);
  t.equal(b.json.text_output, a.json.text_output, 'the same text');
  const off = await postJson(`${spec.base}/v2/models/ensemble/generate`, { ...body, num_draft_tokens: 0 });
  t.equal(off.json.text_output, a.json.text_output, 'num_draft_tokens 0: the same text');
  const drafted = await metricValue(spec.metricsBase, 'trtllm_spec_decode_draft_tokens_total');
  const accepted = await metricValue(spec.metricsBase, 'trtllm_spec_decode_accepted_tokens_total');
  t.ok(drafted > 0 && accepted > 0 && accepted <= drafted, `guesses: ${drafted}, kept ${accepted}`);
});

t.test('world size 2 (tp 2) under mpirun: the draft runs on the leader, the text is the single rank\'s', async (t) => {
  const single = await startTestServer(t, { model: dir });
  const cluster = await startServingCluster(t, ['--model', dir, '--world-size', '2', '--oversubscribe', '--threads', '1',
    '--draft-model', draftDir, '--num-draft-tokens', '3']);
  await expectSameText(t, single.base, cluster.base, PROMPTS.slice(0, 2), 24);
  t.ok(await metricValue(cluster.metricsBase, 'trtllm_spec_decode_draft_tokens_total') > 0, 'guesses were made');
});

t.test('refused before loading, with the reason', async (t) => {
  const other = tempDir('other-tokenizer-');
  writeLayerDraft(dir, other, 1);
  const json = JSON.parse(readFileSync(join(other, 'tokenizer.json'), 'utf8')) as { model: { vocab: Record<string, number> } };
  const [first, second] = Object.entries(json.model.vocab).sort((x, y) => x[1] - y[1]).slice(300, 302);
  json.model.vocab[first![0]] = second![1];
  json.model.vocab[second![0]] = first![1];
  writeFileSync(join(other, 'tokenizer.json'), JSON.stringify(json));
  await t.rejects(Executor.load(dir, { numThreads: 1, draftModel: other }), {
    code: 'invalid_argument',
    message: new RegExp(`^--draft-model ${other}: its tokenizer differs from the model's at id 300 .*must share the model's tokenizer$`),
  });
  const empty = tempDir('no-checkpoint-');
  await t.rejects(Executor.load(dir, { numThreads: 1, draftModel: empty }), { code: 'invalid_argument', message: /no config\.json there/ });
  await t.rejects(Executor.load(dir, { numThreads: 1, draftModel: draftDir, ngramDraftTokens: 2 }),
    { code: 'invalid_argument', message: `--draft-model ${draftDir} and --speculative-ngram 2 each choose how guesses are made; give one of them` });
});
