// The bundled default model (examples/models/brown-llama-17m) loads, and our engine's mean next-token loss on its
// committed held-out sample equals what transformers measured when the model was trained (the card's number).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';

import { defaultModelDir } from '../../../worker/common/package-root.js';
import { Executor } from '../../../worker/executor/executor.js';
import { loadTokenizer } from '../../../worker/tokenizer.js';

const dir = defaultModelDir();

/** Mean cross-entropy of each next token under the logits of the position before it. */
function meanNextTokenLoss(logits: Float32Array, ids: number[], vocab: number): number {
  let total = 0;
  for (let p = 0; p + 1 < ids.length; p += 1) {
    const row = logits.subarray(p * vocab, (p + 1) * vocab);
    let max = -Infinity;
    for (const v of row) max = Math.max(max, v);
    let sum = 0;
    for (const v of row) sum += Math.exp(v - max);
    total += max + Math.log(sum) - row[ids[p + 1]!]!;
  }
  return total / (ids.length - 1);
}

t.test('held-out loss matches the model card', async (t) => {
  const sample = JSON.parse(readFileSync(join(dir, 'heldout_sample.json'), 'utf8')) as { input_ids: number[]; text: string; mean_next_token_loss: number };
  const executor = await Executor.load(dir, { numThreads: 2 });
  t.teardown(() => executor.shutdown());
  t.equal(executor.modelConfig.architectureName, 'LlamaForCausalLM');
  const r = await executor.generate({ inputTokenIds: sample.input_ids, maxTokens: 1, output: { returnContextLogits: true } });
  const loss = meanNextTokenLoss(r.contextLogits!, sample.input_ids, executor.modelConfig.vocabSize);
  t.ok(Math.abs(loss - sample.mean_next_token_loss) < 2e-3, `loss ${loss.toFixed(4)} vs transformers ${sample.mean_next_token_loss.toFixed(4)}`);
  const card = readFileSync(join(dir, 'README.md'), 'utf8');
  t.match(card, new RegExp(`\\(${sample.mean_next_token_loss.toFixed(4)}\\)`), 'the card states the same number');
  t.same(loadTokenizer(dir).encode(sample.text), sample.input_ids, 'our tokenizer gives the ids transformers scored');
});

t.test('greedy text from the bundled model is English words', async (t) => {
  const executor = await Executor.load(dir, { numThreads: 2 });
  t.teardown(() => executor.shutdown());
  const tokenizer = loadTokenizer(dir);
  const r = await executor.generate({ inputTokenIds: tokenizer.encode('The jury said'), maxTokens: 24, output: { excludeInputFromOutput: true } });
  const text = tokenizer.decode(r.outputTokenIds![0]!);
  const words = text.split(/\s+/).filter((w) => /^[A-Za-z]+[.,;:"']*$/.test(w));
  t.ok(words.length >= 8, `mostly words: ${JSON.stringify(text)}`);
});
