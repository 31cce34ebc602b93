// Leader mode under the real mpirun: tp=2, pp=2, tp=2 x pp=2 and tp=4 produce what one rank produces (and what
// HF transformers produced) — greedy tokens, context logits, streaming, stop words, beam search, cancellation, KV
// pressure — and a rank killed with SIGKILL takes the whole job down, leaving no process behind.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { execa } from 'execa';
import t from 'tap';

import { packageRoot } from '../../worker/common/package-root.js';
import { fixtureDir } from '../helpers/fixtures.js';
import { tempDir } from '../helpers/temp-dir.js';
import { LAUNCH_MS, waitFor } from '../helpers/wait.js';

const program = join(packageRoot(), 'dist', 'test', 'programs', 'parallel-check.js');
const MPI_ENV = { OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1', OMP_NUM_THREADS: '1' };

interface CheckResult {
  worldSize: number;
  greedy: number[][];
  greedyMatchesReference: boolean[];
  contextLogitsError: number[];
  streamed: number[];
  streamedResponses: number;
  stopWords: { tokens: number[]; reason: string };
  beam2: number[][];
  beam2MatchesReference: boolean;
  cancelled: string;
  pressure: number[][];
  paused: number;
  kvAllFree: boolean;
  microBatchIds: number[];
}

async function run(model: string, np: number, tp: number, pp: number, ppMicroBatches?: number): Promise<{ result?: CheckResult; exitCode?: number; output: string }> {
  const args = [fixtureDir(model), String(tp), String(pp), model];
  const resultFile = join(tempDir('trtl-leader-'), 'result.txt');
  const env = { RESULT_FILE: resultFile, PP_MICRO_BATCHES: ppMicroBatches === undefined ? '' : String(ppMicroBatches) };
  const child = np === 1
    ? await execa('node', [program, ...args], { reject: false, all: true, timeout: LAUNCH_MS, env })
    : await execa('mpirun', ['-np', String(np), '--oversubscribe', '-x', 'RESULT_FILE', '-x', 'PP_MICRO_BATCHES', 'node', program, ...args],
      { reject: false, all: true, timeout: LAUNCH_MS, env: { ...MPI_ENV, ...env } });
  const line = existsSync(resultFile) ? readFileSync(resultFile, 'utf8').trim() : undefined;
  return { result: line ? JSON.parse(line.slice(7)) as CheckResult : undefined, exitCode: child.exitCode, output: child.all };
}

// microBatches: the micro-batch ids the 4-request batch ran under — pipelined pp splits it over one per stage.
const LAYOUTS = [
  { name: 'tp=2', np: 2, tp: 2, pp: 1, microBatches: [0] },
  { name: 'pp=2', np: 2, tp: 1, pp: 2, microBatches: [0, 1] },
  { name: 'pp=2, --pp-micro-batches 1 (not pipelined)', np: 2, tp: 1, pp: 2, ppMicroBatches: 1, microBatches: [0] },
  { name: 'tp=2 x pp=2', np: 4, tp: 2, pp: 2, microBatches: [0, 1] },
  { name: 'tp=4 (kv heads replicated)', np: 4, tp: 4, pp: 1, microBatches: [0] },
];

for (const model of ['tiny-llama', 'tiny-gpt2']) {
  t.test(`${model}: every layout serves what one rank serves`, async (t) => {
    const single = await run(model, 1, 1, 1);
    t.equal(single.exitCode, 0, 'single rank exits 0');
    const base = single.result!;
    t.ok(base.greedyMatchesReference.every(Boolean), 'one rank matches HF');
    t.ok(base.paused > 0, `the small KV pool made max_utilization pause (${base.paused})`);
    t.equal(base.cancelled, 'cancelled after 1 token(s)', 'one rank: cancellation');
    for (const layout of LAYOUTS) {
      const { result, exitCode, output } = await run(model, layout.np, layout.tp, layout.pp, layout.ppMicroBatches);
      if (!result) {
        t.fail(`${layout.name}: no result (exit ${exitCode}): ${output.slice(-2000)}`);
        continue;
      }
      t.equal(exitCode, 0, `${layout.name}: every rank exits 0`);
      t.equal(result.worldSize, layout.np, `${layout.name}: ${layout.np} ranks`);
      t.same(result.greedyMatchesReference, [true, true, true, true], `${layout.name}: greedy = HF transformers`);
      t.same(result.microBatchIds, layout.microBatches, `${layout.name}: micro-batches ${JSON.stringify(layout.microBatches)}`);
      t.ok(result.contextLogitsError.every((e) => e < 1e-4), `${layout.name}: context logits within 1e-4 (${Math.max(...result.contextLogitsError).toExponential(2)})`);
      t.same(result.streamed, base.streamed, `${layout.name}: streaming`);
      t.equal(result.streamedResponses, base.streamedResponses, `${layout.name}: one response per token`);
      t.same(result.stopWords, base.stopWords, `${layout.name}: stop words`);
      t.equal(result.stopWords.reason, 'stop_words');
      t.same(result.beam2, base.beam2, `${layout.name}: beam search`);
      t.ok(result.beam2MatchesReference, `${layout.name}: beams = HF transformers`);
      t.equal(result.cancelled, 'cancelled after 1 token(s)', `${layout.name}: cancellation`);
      t.same(result.pressure, base.pressure, `${layout.name}: KV pressure outputs unchanged`);
      t.ok(result.kvAllFree, `${layout.name}: KV all free`);
    }
  });
}

t.test('tp x pp that does not match the ranks started is a clear error on every rank', async (t) => {
  const child = await execa('mpirun', ['-np', '2', '--oversubscribe', 'node', program, fixtureDir('tiny-llama'), '4', '1', 'tiny-llama'],
    { reject: false, all: true, timeout: LAUNCH_MS, env: MPI_ENV });
  t.not(child.exitCode, 0);
  t.match(child.all, /tp 4 x pp 1 = 4 does not match the 2 rank\(s\) started by mpirun\/srun/);
});

/** Running (not gone, not a zombie waiting for a parent that is not ours to reap it). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

for (const victim of [1, 0]) {
  t.test(`kill -9 of ${victim === 0 ? 'the leader' : 'a follower'} mid-generation brings every rank down`, async (t) => {
    const child = execa('mpirun', ['-np', '2', '--oversubscribe', 'node', program, fixtureDir('tiny-llama'), '2', '1', 'tiny-llama', 'busy'],
      { reject: false, all: true, env: MPI_ENV, timeout: LAUNCH_MS });
    const pids = new Map<number, number>();
    let busy = false;
    await new Promise<void>((resolve) => {
      child.all!.on('data', (chunk: Buffer) => {
        for (const line of chunk.toString().split('\n')) {
          const m = /^PID (\d+) (\d+)/.exec(line);
          if (m) pids.set(Number(m[1]), Number(m[2]));
          if (line.startsWith('BUSY')) busy = true;
        }
        if (busy && pids.size === 2) resolve();
      });
    });
    // How fast is measured in bench/launcher-overhead; here: that mpirun fails and no rank is left.
    process.kill(pids.get(victim)!, 'SIGKILL');
    const result = await child;
    t.not(result.exitCode, 0, `mpirun exits non-zero (${result.exitCode})`);
    await waitFor(() => ![...pids.values()].some(alive));
    t.ok([...pids.values()].every((pid) => !alive(pid)), `no rank survives (${[...pids.values()].filter(alive).join(', ') || 'none alive'})`);
  });
}
