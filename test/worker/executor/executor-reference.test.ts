// The executor against Hugging Face transformers: context logits (relative error < 1e-4), greedy continuations
// (identical tokens) and their log probs, for every fixture architecture and storage format.
import t from 'tap';

import { Executor } from '../../../worker/executor/executor.js';
import {
  contextLogitsReference, FIXTURE_MODELS, fixtureDir, maxRelativeError, referenceCases,
} from '../../helpers/fixtures.js';
import { generateTogether } from '../../helpers/held-loop.js';

for (const model of FIXTURE_MODELS) {
  t.test(`${model} matches HF transformers`, async (t) => {
    const executor = await Executor.load(fixtureDir(model), { tokensPerBlock: 16, numThreads: 2 });
    t.teardown(() => executor.shutdown());
    const cases = referenceCases(model);
    // All cases in one batch (the same batch on every run): batching must not change any result.
    const results = await generateTogether(executor, cases.map((c) => ({
      inputTokenIds: c.input_ids,
      maxTokens: c.max_new_tokens,
      output: { returnContextLogits: true, returnLogProbs: true, excludeInputFromOutput: true },
    })));
    cases.forEach((c, i) => {
      const r = results[i]!;
      t.same(r.outputTokenIds?.[0], c.greedy_output_ids, `${c.name}: greedy tokens`);
      t.equal(r.finishReasons?.[0], 'length', `${c.name}: finish reason`);
      const ref = contextLogitsReference(model, i);
      t.equal(r.contextLogits?.length, ref.length, `${c.name}: context logits shape [${c.input_ids.length}, vocab]`);
      const err = maxRelativeError(r.contextLogits ?? [], ref);
      t.ok(err < 1e-4, `${c.name}: context logits relative error ${err.toExponential(2)} < 1e-4`);
      const lp = r.logProbs?.[0] ?? [];
      t.equal(lp.length, c.greedy_log_probs.length, `${c.name}: one log prob per token`);
      const lpErr = Math.max(...lp.map((v, j) => Math.abs(v - c.greedy_log_probs[j]!)));
      t.ok(lpErr < 1e-3, `${c.name}: log probs within 1e-3 (max diff ${lpErr.toExponential(2)})`);
      const cum = c.greedy_log_probs.reduce((a, b) => a + b, 0);
      t.ok(Math.abs((r.cumLogProbs?.[0] ?? NaN) - cum) < 1e-2, `${c.name}: cum log prob`);
    });
    t.equal(executor.kvCacheStats().freeNumBlocks, executor.kvCacheStats().maxNumBlocks, 'all KV blocks free');
  });
}
