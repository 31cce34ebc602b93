// FP8 weights through the addon (issue 24): each FP8 checkpoint format, and a 16-bit checkpoint loaded with
// quantization 'fp8', serve the greedy tokens of their float64 transformers references (recorded on the
// dequantized weights by scripts/fixtures/make_fp8_fixtures.py); a quantization we do not have is refused naming it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { execa } from 'execa';
import t, { type Test } from 'tap';

import { Executor } from '../../../worker/executor/executor.js';
import { fixtureDir, type ReferenceCase } from '../../helpers/fixtures.js';

function cases(dir: string, file: string): ReferenceCase[] {
  return (JSON.parse(readFileSync(join(dir, file), 'utf8')) as { cases: ReferenceCase[] }).cases;
}

async function greedyMatches(t: Test, dir: string, reference: string, options: Parameters<typeof Executor.load>[1],
  precision: RegExp) {
  const executor = await Executor.load(dir, { numThreads: 2, ...options });
  t.teardown(() => executor.shutdown());
  t.match(executor.modelConfig.quantization, precision, 'the model config says how the checkpoint is quantized');
  const refs = cases(dir, reference);
  // All cases in one batch: in-flight batching must not change any of them.
  const results = await Promise.all(refs.map((c) => executor.generate({
    inputTokenIds: c.input_ids, maxTokens: c.max_new_tokens, output: { excludeInputFromOutput: true },
  })));
  refs.forEach((c, i) => t.same(results[i]!.outputTokenIds, [c.greedy_output_ids], `${c.name}: greedy tokens`));
  t.equal(executor.kvCacheStats().freeNumBlocks, executor.kvCacheStats().maxNumBlocks, 'all KV blocks free');
}

const FORMATS: [string, RegExp][] = [
  ['block', /^fp8 \(HF fp8, block 32x32 weight scales, dynamic per-token-group activations\)$/],
  ['block128', /^fp8 \(HF fp8, block 128x128 weight scales, dynamic per-token-group activations\)$/],
  ['ct-channel', /^fp8 \(compressed-tensors, per-channel weight scales, dynamic per-token activations\)$/],
  ['ct-tensor-static', /^fp8 \(compressed-tensors, per-tensor weight scales, static per-tensor activations\)$/],
  ['modelopt', /^fp8 \(ModelOpt, per-tensor weight scales, static per-tensor activations\)$/],
];
for (const [format, precision] of FORMATS) {
  t.test(`tiny-llama-fp8-${format}: greedy tokens of the W8A16 reference`, async (t) => {
    await greedyMatches(t, fixtureDir(`tiny-llama-fp8-${format}`), 'reference.json', {}, precision);
  });
}

t.test('quantization fp8 of a bf16 checkpoint: greedy tokens of the per-channel FP8 reference', async (t) => {
  await greedyMatches(t, fixtureDir('tiny-llama'), 'reference-quantized-fp8.json', { quantization: 'fp8' }, /^$/);
});

t.test('an unknown quantization is refused naming the field and the value', async (t) => {
  await t.rejects(Executor.load(fixtureDir('tiny-llama'), { quantization: 'int4' as 'fp8' }),
    { message: /field 'quantization' must be 'none' or 'fp8', got 'int4'/ });
});

t.test('a load refused for a bad option leaves nothing behind: its process exits', async (t) => {
  // Before, the addon made its thread-safe functions before reading the options, and the throw left them alive:
  // the process never exited. A hang here ends at tap's timeout, not at a clock of ours.
  const executorModule = new URL('../../../worker/executor/executor.js', import.meta.url).href;
  const script = `const { Executor } = await import(${JSON.stringify(executorModule)});
    await Executor.load(${JSON.stringify(fixtureDir('tiny-llama'))}, { quantization: 'int4' }).catch((e) => console.log(e.message));`;
  const r = await execa(process.execPath, ['--input-type=module', '-e', script], { reject: false });
  t.equal(r.exitCode, 0, r.stderr);
  t.match(r.stdout, /field 'quantization' must be 'none' or 'fp8', got 'int4'/);
});
