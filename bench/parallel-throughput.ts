// Leader mode on one machine: decode step time, throughput, communication per iteration and memory per rank at
// tp=1 vs tp=2 vs pp=2, on a Llama shape big enough for the split to matter (dummy weights), plus the size of the
// iteration plan at 256 active requests. Baseline in the same run: tp=1 in one process with all cores.
// A batch of more requests than --max-batch is an offline run: pipelined pp keeps two micro-batches of up to
// --max-batch requests in flight, unpipelined pp one batch (TensorRT-LLM's max_batch_size is per micro-batch).
// --vary-output gives requests gen/2 .. 3gen/2 output tokens; --repeats n runs every layout n times, round-robin,
// and keeps each batch's median (the VM's noise between single runs is ~10%).
//   node dist/bench/parallel-throughput.js [--model 100m|22m] [--prompt 128] [--gen 64] [--batches 1,8] [--max-batch 64]
//                                          [--vary-output] [--repeats 1] [--chunked <max num tokens>] [--pp-layers a,b]
// --chunked n: every layout with chunked context and an iteration budget of n tokens (prompts then share iterations
// with the decodes, so a wave of new prompts no longer fills one micro-batch alone).
// --pp-layers spec: one more pipelined layout with that split of the layers (e.g. 4,2).
import { cpus } from 'node:os';
import { join } from 'node:path';

import { execa } from 'execa';

import { packageRoot } from '../worker/common/package-root.js';
import { BENCH_SHAPE, type LlamaShape, parameterCount, writeDummyLlama } from './dummy-checkpoint.js';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}

const SHAPES: Record<string, LlamaShape> = {
  '22m': BENCH_SHAPE,
  '100m': { vocabSize: 32000, hiddenSize: 768, numLayers: 12, numHeads: 12, numKvHeads: 4, intermediateSize: 2048, maxPositionEmbeddings: 2048 },
};

interface Row { batch: number; outputTokensPerSecond: number; microBatches: number; prefillTokensPerSecond: number; decodeStepMs: number; decodeTokensPerSecond: number; commMsPerDecodeStep: number; planBytesPerDecodeStep: number }

/** Bytes of one decode iteration's plan (iteration-plan.cpp's format): 4 header words, 4 per chunk, its token and block ids. */
function planBytes(requests: number, contextTokens: number, tokensPerBlock: number): number {
  const blocks = Math.ceil((contextTokens + 1) / tokensPerBlock);
  return 4 * (4 + requests * (4 + 1 + blocks));
}

async function main(): Promise<void> {
  const name = arg('--model', '100m');
  const shape = SHAPES[name]!;
  const dir = writeDummyLlama(join(packageRoot(), 'build', 'bench-models', `llama-${name}`), shape);
  const program = join(packageRoot(), 'dist', 'bench', 'programs', 'parallel-rank.js');
  const cores = cpus().length;
  const common = [arg('--prompt', '128'), arg('--gen', '64'), arg('--batches', '1,8')];
  console.log(`max batch size ${arg('--max-batch', '64')} (per micro-batch)`);
  console.log(`model: ${name} Llama shape, ${(parameterCount(shape) / 1e6).toFixed(0)}M parameters (fp32 dummy weights); ${cpus()[0]?.model}, ${cores} cores`);
  const layouts = [
    { name: 'tp=1 (1 rank x 2 threads, baseline)', np: 1, tp: 1, pp: 1, threads: cores },
    { name: 'tp=2 (2 ranks x 1 thread)', np: 2, tp: 2, pp: 1, threads: Math.max(1, cores / 2) },
    { name: 'pp=2, not pipelined (--pp-micro-batches 1)', np: 2, tp: 1, pp: 2, threads: Math.max(1, cores / 2), microBatches: 1 },
    { name: 'pp=2, pipelined (the default)', np: 2, tp: 1, pp: 2, threads: Math.max(1, cores / 2) },
    { name: 'pp=2, pipelined, --pp-layers balanced', np: 2, tp: 1, pp: 2, threads: Math.max(1, cores / 2), ppLayers: 'balanced' },
  ];
  const split = arg('--pp-layers', '');
  if (split) layouts.push({ name: `pp=2, pipelined, --pp-layers ${split}`, np: 2, tp: 1, pp: 2, threads: Math.max(1, cores / 2), ppLayers: split });
  const repeats = Number(arg('--repeats', '1'));
  const vary = process.argv.includes('--vary-output') ? 'vary' : '';
  if (arg('--chunked', '')) console.log(`chunked context, max num tokens ${arg('--chunked', '')}`);
  if (vary) console.log(`outputs of ${Math.round(Number(arg('--gen', '64')) / 2)}..${Math.round(Number(arg('--gen', '64')) * 1.5)} tokens`);
  const runs = new Map<string, { rows: Row[]; mem: number[] }[]>();
  for (let round = 0; round < repeats; ++round) {
    for (const l of layouts) {
      process.stderr.write(`running ${l.name} (round ${round + 1} of ${repeats}) ...\n`);
      const args = [program, dir, String(l.tp), String(l.pp), String(l.threads), ...common, String(l.microBatches ?? 0), arg('--max-batch', '64'), l.ppLayers ?? '', vary, arg('--chunked', '')];
      const child = l.np === 1
        ? await execa('node', args, { all: true, reject: false })
        : await execa('mpirun', ['-np', String(l.np), '--oversubscribe', '--bind-to', 'none', 'node', ...args],
          { all: true, reject: false, env: { OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1' } });
      const line = child.all.split('\n').find((s) => s.startsWith('RESULT '));
      if (!line) throw new Error(`${l.name} failed (exit ${child.exitCode}):\n${child.all.slice(-3000)}`);
      const rows = (JSON.parse(line.slice(7)) as { rows: Row[] }).rows;
      const mem = child.all.split('\n').filter((s) => s.startsWith('MEM ')).map((s) => Number(s.split(' ')[2]) / 2 ** 20);
      runs.set(l.name, [...(runs.get(l.name) ?? []), { rows, mem }]);
    }
  }
  const median = (rs: Row[]): Row => [...rs].sort((a, b) => a.outputTokensPerSecond - b.outputTokensPerSecond)[Math.floor(rs.length / 2)]!;
  const byLayout = new Map<string, Row[]>();
  const table: string[] = [];
  let base: Row[] | undefined;
  for (const l of layouts) {
    const done = runs.get(l.name)!;
    const rows = done[0]!.rows.map((_, i) => median(done.map((d) => d.rows[i]!)));
    const mem = done[0]!.mem;
    base ??= rows;
    byLayout.set(l.name, rows);
    for (const [i, r] of rows.entries()) {
      // Per-iteration figures mean little once iterations overlap: pipelined rows show only the wall-clock ones.
      const perIter = (text: string) => (r.microBatches > 1 ? '—' : text);
      table.push(`| ${l.name} | ${r.batch} | ${r.microBatches} | ${r.outputTokensPerSecond.toFixed(1)} | ${(r.outputTokensPerSecond / base[i]!.outputTokensPerSecond).toFixed(2)} | ${perIter(r.prefillTokensPerSecond.toFixed(0))} | ${perIter(r.decodeStepMs.toFixed(2))} | ${perIter(r.commMsPerDecodeStep.toFixed(3))} | ${r.planBytesPerDecodeStep.toFixed(0)} | ${mem.map((m) => m.toFixed(0)).join(' / ')} |`);
    }
  }
  console.log('\n| layout | batch | micro-batches | output tok/s (wall, offline) | vs tp=1 | prefill tok/s | decode step (ms) | comm ms / decode step (leader) | plan bytes / step | peak RSS per rank (MiB) |');
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const row of table) console.log(row);
  const off = byLayout.get(layouts[2]!.name)!;
  for (const l of layouts.slice(3)) {
    for (const [i, r] of byLayout.get(l.name)!.entries())
      console.log(`${l.name} / not pipelined, batch ${r.batch}: ${(r.outputTokensPerSecond / off[i]!.outputTokensPerSecond).toFixed(2)}x (goal >= 1.8x offline)`);
  }
  console.log(`\niteration plan at 256 active decode requests with 1024-token contexts (64-token blocks): ${planBytes(256, 1024, 64)} bytes`);
}

await main();
