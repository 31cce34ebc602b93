// Decoding features against Hugging Face transformers generate() (recorded in reference.json, case 0, 12 new
// tokens, eos disabled): greedy, repetition_penalty 1.5, beam search (2 beams / length_penalty 1 and 4 beams /
// length_penalty 0.5, every beam and its score), min_new_tokens.
import t from 'tap';

import type { NativeRequest } from '../../../worker/binding/addon-types.js';
import { Executor } from '../../../worker/executor/executor.js';
import { FIXTURE_MODELS, fixtureDir, generateReferences, referenceCases } from '../../helpers/fixtures.js';

const NEW_TOKENS = 12;

for (const model of FIXTURE_MODELS) {
  t.test(`${model}: decoding matches HF generate()`, async (t) => {
    const executor = await Executor.load(fixtureDir(model), { tokensPerBlock: 5, numThreads: 2, maxBeamWidth: 4 });
    t.teardown(() => executor.shutdown());
    const refs = generateReferences(model);
    const prompt = referenceCases(model)[0]!.input_ids;
    const request = (extra: Partial<NativeRequest>): NativeRequest => ({
      inputTokenIds: prompt, maxTokens: NEW_TOKENS, output: { excludeInputFromOutput: true, returnLogProbs: true },
      ...extra,
    });

    // Everything at once: beams, penalties and plain requests batched in flight must not change any result.
    // tokensPerBlock 5 leaves the 16-token prompt a partial last block, which the beams copy on write.
    const [greedy, repetition, minTokens, beam2, beam4] = await Promise.all([
      executor.generate(request({})),
      executor.generate(request({ sampling: { repetitionPenalty: 1.5 } })),
      executor.generate(request({ sampling: { minTokens: 4 } })),
      executor.generate(request({ sampling: { beamWidth: 2, lengthPenalty: 1.0 }, numReturnSequences: 2 })),
      executor.generate(request({ sampling: { beamWidth: 4, lengthPenalty: 0.5 }, numReturnSequences: 4 })),
    ]);
    t.same(greedy.outputTokenIds, refs.greedy!.output_ids, 'greedy');
    t.same(repetition.outputTokenIds, refs['repetition_penalty_1.5']!.output_ids, 'repetition_penalty 1.5');
    t.same(minTokens.outputTokenIds, refs.no_repeat_min_new_tokens!.output_ids, 'min_tokens 4 (no end id: greedy)');

    const beams: [string, typeof beam2, number][] = [['beam2', beam2, 1.0], ['beam4_lp0.5', beam4, 0.5]];
    for (const [name, result, lengthPenalty] of beams) {
      const ref = refs[name]!;
      t.same(result.outputTokenIds, ref.output_ids, `${name}: every beam's tokens, best first`);
      t.same(result.finishReasons, ref.output_ids.map(() => 'length'), `${name}: finish reasons`);
      // HF's sequences_scores = cum log prob / generated_len ** length_penalty, generated_len = 12 here.
      const scores = (result.cumLogProbs ?? []).map((c) => c / NEW_TOKENS ** lengthPenalty);
      const err = Math.max(...ref.sequences_scores!.map((s, i) => Math.abs(s - (scores[i] ?? NaN))));
      t.ok(err < 1e-3, `${name}: sequence scores within 1e-3 of HF (max diff ${err.toExponential(2)})`);
      result.logProbs?.forEach((lp, i) => {
        const sum = lp.reduce((a, b) => a + b, 0);
        t.ok(Math.abs(sum - (result.cumLogProbs?.[i] ?? NaN)) < 1e-3, `${name}[${i}]: log probs sum to cum log prob`);
      });
    }
    t.equal(executor.kvCacheStats().freeNumBlocks, executor.kvCacheStats().maxNumBlocks, 'all KV blocks free');
  });
}
