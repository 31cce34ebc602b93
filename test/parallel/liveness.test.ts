// A hung rank under the real launcher: `trtllm-launch --world-size 2 --hang-timeout 3`, rank 1 stopped with SIGSTOP
// (what a debugger, an operator or a wedged node does). The leader's wait in the next forward pass stalls: it says so
// and answers /v2/health/ready with 503, then the gang ends with a root cause that names rank 1, its host and the
// step, the launcher exits non-zero, the request in flight is not left hanging, and nothing is left behind.
// The order is fixed by the stop itself (rank 1 never moves again), so the test waits for states, never for times;
// how fast the gang goes down is measured in bench/cluster-liveness.ts.

import { execa } from 'execa';
import t from 'tap';

import { fixtureDir } from '../helpers/fixtures.js';
import { BIN, launchCluster } from '../helpers/launched-cluster.js';
import { processesWith } from '../helpers/processes.js';
import { GENEROUS_MS, waitFor } from '../helpers/wait.js';

const MODEL = fixtureDir('tiny-llama');

/** The readiness answer, or 'refused' once nobody listens any more. */
async function readiness(port: number): Promise<number | 'refused'> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/v2/health/ready`)).status;
  } catch {
    return 'refused';
  }
}

t.test('SIGSTOP of a follower: not ready, then the gang ends naming rank 1 and what the leader waited for', async (t) => {
  const cluster = await launchCluster(['--hang-timeout', '3']);
  const port = cluster.ports.http;
  t.ok(await cluster.ready, `ready (output: ${cluster.output().slice(-1500)})`);
  const marker = cluster.marker;
  t.teardown(() => {
    // Whatever happened, no stopped rank outlives the test.
    for (const p of processesWith(marker)) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  });
  t.equal(await readiness(port), 200, 'ready before the stop');
  const follower = processesWith(marker)
    .find((p) => p.cmd.startsWith(process.execPath) && p.cmd.includes(' rank ') && !cluster.output().includes(`leader pid ${p.pid} on `));
  t.ok(follower, `found rank 1 (${follower?.cmd.slice(0, 80)})`);
  process.kill(follower!.pid, 'SIGSTOP');

  // The next forward pass needs rank 1: the leader's all-reduce waits for it.
  const inFlight = fetch(`http://127.0.0.1:${port}/v2/models/tensorrt_llm/generate`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: [1, 2, 3], request_output_len: 4 }),
  }).then((r) => r.status, () => 'failed' as const);

  t.ok(await waitFor(() => /\[rank 0\] stalled: no progress for /.test(cluster.output())), 'the leader says it stalled');
  // From the stall line on, the leader is not ready until the wait ends — which it never does here; once the gang is
  // down nobody answers at all. Either way: never 200.
  t.not(await readiness(port), 200, 'readiness is not 200 once the leader stalled');

  const ended = await Promise.race([cluster.child, new Promise<undefined>((r) => setTimeout(() => r(undefined), 2 * GENEROUS_MS).unref())]);
  t.ok(ended, 'the launcher exits by itself (no drain, no signal)');
  t.not(ended?.exitCode, 0, `non-zero exit (${ended?.exitCode})`);
  t.match(cluster.output(), /\[rank 0\] hang: rank 1 on \S+ made no progress for [\d.]+ s in iteration \d+ \(forward: all-reduce\)/,
    "the leader's verdict, as rank 0's line");
  t.match(cluster.output(), /Root cause:\n {2}rank 1 on \S+ made no progress for [\d.]+ s in iteration \d+ \(forward: all-reduce\) \(reported by rank 0/,
    `the root cause names rank 1, its host and the step (output: ${cluster.output().slice(-1200)})`);
  t.notMatch(cluster.output(), /mpirun exited with code/, 'not "mpirun exited with code N"');
  t.not(await inFlight, 200, 'the request in flight is not answered as if it had succeeded');
  t.ok(await waitFor(() => processesWith(marker).length === 0), 'no rank or mpirun left');
});

t.test('--hang-timeout reaches every rank; a bad value is refused naming it', async (t) => {
  const dry = await execa('node', [BIN, '--model', MODEL, '--world-size', '2', '--oversubscribe', '--hang-timeout', '7', '--dry-run'], { reject: false, all: true });
  t.equal(dry.exitCode, 0);
  t.match(dry.stdout, / rank .*--hang-timeout 7/);
  const bad = await execa('node', [BIN, '--model', MODEL, '--hang-timeout', '-1', '--dry-run'], { reject: false, all: true });
  t.not(bad.exitCode, 0);
  t.match(bad.all, /--hang-timeout must be an integer >= 0, got "-1"/);
});
