// The supervisor's decisions (pure): each path through the state machine, with the exact lines and exit codes the
// launcher's users (and the cluster, Slurm and orchestrator tests) see, and the leader lines that feed it.
import t from 'tap';

import { hangLineEvent, leaderLineEvent } from '../../../launcher/cluster/leader-lines.js';
import {
  type Effect, initialState, type SupervisorEvent, type SupervisorSettings, type SupervisorState, transition,
} from '../../../launcher/cluster/supervisor-state.js';

const SETTINGS: SupervisorSettings = {
  startupTimeoutMs: 60_000, drainTimeoutMs: 30_000, launcher: 'mpirun', ranksShown: '2 rank(s)', localHost: 'here',
  leaderReportsExit: false, canSignalStep: false, canForwardDrain: false,
};

/** Runs events from the start; returns the last state and every effect in order. */
function run(events: SupervisorEvent[], settings: Partial<SupervisorSettings> = {}): { state: SupervisorState; effects: Effect[] } {
  const start = initialState({ ...SETTINGS, ...settings });
  let state = start.state;
  const effects = [...start.effects];
  for (const event of events) {
    const next = transition(state, event);
    state = next.state;
    effects.push(...next.effects);
  }
  return { state, effects };
}

const lines = (effects: Effect[]) => effects.flatMap((e) => (e.type === 'say' ? [e.line] : []));
const READY: SupervisorEvent = { type: 'health-ok', elapsedMs: 2345 };
const CLEAN: SupervisorEvent = { type: 'exited', exitCode: 0 };

t.test('starting: health is checked at once, then every 200 ms; ready prints the line and the banner', async (t) => {
  t.same(initialState(SETTINGS).effects, [{ type: 'check-health', afterMs: 0 }]);
  const waiting = run([{ type: 'health-failed', elapsedMs: 10 }]);
  t.equal(waiting.state.phase, 'starting');
  t.same(waiting.effects.at(-1), { type: 'check-health', afterMs: 200 });
  t.same(run([{ type: 'leader-listening' }]).effects.at(-1), { type: 'check-health-now' }, "the leader's ready line hurries the check");
  const ready = run([READY]);
  t.equal(ready.state.phase, 'ready');
  t.same(ready.effects.slice(1), [{ type: 'say', line: '[launcher] ready after 2.35 s: 2 rank(s)' }, { type: 'banner' }]);
  t.same(run([READY, { type: 'leader-listening' }, { type: 'health-failed', elapsedMs: 99_999 }]).effects.slice(3), [], 'checks no longer matter once ready');
});

t.test('not ready within --startup-timeout: every rank is stopped, the exit is mpirun\'s', async (t) => {
  const late = run([{ type: 'health-failed', elapsedMs: 60_001 }]);
  t.equal(late.state.phase, 'giving-up');
  t.same(late.effects.slice(1), [{ type: 'say', line: '[launcher] not ready after 60 s (--startup-timeout): stopping every rank' }, { type: 'stop-ranks' }]);
  const failed = run([{ type: 'health-failed', elapsedMs: 60_001 }, { type: 'exited', exitCode: 143 }]);
  t.same({ phase: failed.state.phase, exitCode: failed.state.exitCode }, { phase: 'failed', exitCode: 143 });
  t.same(failed.effects.slice(-2), [{ type: 'kill-ranks' }, { type: 'root-cause', exitCode: 143, signal: undefined }]);
  const clean = run([{ type: 'health-failed', elapsedMs: 60_001 }, CLEAN]);
  t.same(lines(clean.effects).at(-1), '[launcher] all ranks stopped cleanly');
  t.equal(clean.state.exitCode, 0);
});

t.test('a signal before ready stops every rank; the launcher exits 0, nothing was served', async (t) => {
  const early = run([{ type: 'signal', signal: 'SIGTERM' }]);
  t.equal(early.state.phase, 'stopping-early');
  t.same(early.effects.slice(1), [{ type: 'say', line: '[launcher] SIGTERM before the leader was ready: stopping every rank' }, { type: 'stop-ranks' }]);
  const ended = run([{ type: 'signal', signal: 'SIGTERM' }, { type: 'exited', exitCode: 1 }]);
  t.same({ phase: ended.state.phase, exitCode: ended.state.exitCode }, { phase: 'stopped', exitCode: 0 }, 'whatever mpirun says');
  t.same(lines(ended.effects).at(-1), '[launcher] stopped before the leader was ready; nothing was served');
  t.same(run([{ type: 'signal', signal: 'SIGTERM' }, READY]).state.phase, 'stopping-early', 'a late health answer is ignored');
});

t.test('Ctrl-C once ready drains the leader: by pid here, by step under srun, forwarded by Open MPI\'s mpirun, else stopped through mpirun', async (t) => {
  const here = run([{ type: 'leader-pid', pid: 42, host: 'here' }, READY, { type: 'signal', signal: 'SIGINT' }]);
  t.equal(here.state.phase, 'draining');
  t.same(here.effects.slice(-3), [
    { type: 'say', line: '[launcher] SIGINT: draining the leader (up to 30 s), then stopping all ranks' },
    { type: 'signal-leader', pid: 42 }, { type: 'arm-drain-deadline', afterMs: 35_000 },
  ]);
  const remote = [{ type: 'leader-pid', pid: 42, host: 'node2' }, { type: 'leader-step', step: '17.0' }, READY, { type: 'signal', signal: 'SIGTERM' }] as SupervisorEvent[];
  t.same(run(remote).state.leader, { host: 'node2', step: '17.0' }, 'a pid on another host is not kept');
  t.same(run(remote, { canSignalStep: true }).effects.at(-2), { type: 'signal-step', step: '17.0' });
  t.same(run(remote).effects.at(-2), { type: 'stop-ranks' }, 'no way to reach the step: mpirun/srun is asked');
  const elsewhere = [{ type: 'leader-pid', pid: 42, host: 'node2' }, READY, { type: 'signal', signal: 'SIGTERM' }] as SupervisorEvent[];
  t.same(run(elsewhere, { canForwardDrain: true }).effects.at(-2), { type: 'forward-drain' }, 'a leader on another host under Open MPI: through mpirun');
  t.same(run(elsewhere).effects.at(-2), { type: 'stop-ranks' }, 'a launcher that forwards nothing: mpirun is asked to stop');
  const clean = run([READY, { type: 'signal', signal: 'SIGINT' }, CLEAN]);
  t.same({ phase: clean.state.phase, exitCode: clean.state.exitCode }, { phase: 'stopped', exitCode: 0 });
  t.same(clean.effects.slice(-2), [{ type: 'kill-ranks' }, { type: 'say', line: '[launcher] all ranks stopped cleanly' }]);
});

t.test('the drain deadline, a second signal, and events after the end', async (t) => {
  const draining = [READY, { type: 'signal', signal: 'SIGINT' }] as SupervisorEvent[];
  t.same(run([...draining, { type: 'drain-deadline' }]).effects.slice(-2), [{ type: 'say', line: '[launcher] drain deadline passed: stopping the ranks' }, { type: 'stop-ranks' }]);
  t.same(run([...draining, { type: 'signal', signal: 'SIGINT' }]).effects.slice(-2), [{ type: 'say', line: '[launcher] SIGINT again: killing every rank now' }, { type: 'kill-ranks' }]);
  t.same(run([{ type: 'signal', signal: 'SIGINT' }, { type: 'signal', signal: 'SIGTERM' }]).effects.at(-2), { type: 'say', line: '[launcher] SIGTERM again: killing every rank now' });
  const after = run([...draining, CLEAN, { type: 'drain-deadline' }, { type: 'signal', signal: 'SIGINT' }, { type: 'exited', exitCode: 3 }]);
  t.same({ phase: after.state.phase, exitCode: after.state.exitCode }, { phase: 'stopped', exitCode: 0 }, 'the end is final');
  t.equal(lines(after.effects).at(-1), '[launcher] all ranks stopped cleanly');
  t.same(run([...draining, { type: 'exited', exitCode: 0 }, READY]).effects.at(-1), { type: 'say', line: '[launcher] all ranks stopped cleanly' });
});

t.test('exits nobody asked for: a root cause and non-zero, or a leader stopped directly', async (t) => {
  const killed = run([READY, { type: 'exited', exitCode: undefined, signal: 'SIGKILL' }]);
  t.same({ phase: killed.state.phase, exitCode: killed.state.exitCode }, { phase: 'failed', exitCode: 1 });
  t.same(killed.effects.at(-1), { type: 'root-cause', exitCode: undefined, signal: 'SIGKILL' });
  t.equal(run([READY, { type: 'exited', exitCode: 137 }]).state.exitCode, 137);
  t.equal(lines(run([READY, CLEAN]).effects).at(-1), '[launcher] all ranks stopped cleanly (the leader was asked to stop directly)');
});

t.test('orchestrator mode: clean only when the leader reported exit code 0', async (t) => {
  const settings = { leaderReportsExit: true };
  const ok = run([READY, { type: 'leader-exit-code', code: 0 }, CLEAN], settings);
  t.same({ phase: ok.state.phase, exitCode: ok.state.exitCode }, { phase: 'stopped', exitCode: 0 });
  const three = run([READY, { type: 'leader-exit-code', code: 3 }, CLEAN], settings);
  t.same({ phase: three.state.phase, exitCode: three.state.exitCode }, { phase: 'failed', exitCode: 3 });
  t.same(three.effects.slice(-2), [{ type: 'say', line: '[launcher] the leader exited with code 3' }, { type: 'root-cause', exitCode: 3 }]);
  const silent = run([READY, CLEAN], settings);
  t.same(silent.effects.slice(-2), [{ type: 'say', line: '[launcher] the leader ended without reporting its exit code (killed?)' }, { type: 'root-cause', exitCode: 1 }]);
  t.equal(silent.state.exitCode, 1);
  t.equal(run([READY, { type: 'exited', exitCode: 2 }], settings).state.exitCode, 2, "mpirun's own failure still counts");
});

t.test("rank 0's status lines as events", async (t) => {
  t.same(leaderLineEvent('leader pid 4242 on node1'), { type: 'leader-pid', pid: 4242, host: 'node1' });
  t.same(leaderLineEvent('leader exit code 0'), { type: 'leader-exit-code', code: 0 });
  t.same(leaderLineEvent('slurm step 17.0: task 0 of 2 on node1 (device cpu)'), { type: 'leader-step', step: '17.0' });
  t.same(leaderLineEvent('ready: serving tiny-llama as ensemble, tensorrt_llm'), { type: 'leader-listening' });
  t.equal(leaderLineEvent('loaded LlamaForCausalLM in 0.2 s'), undefined);
  t.equal(leaderLineEvent('the leader pid 4242 on node1'), undefined, 'whole lines only');
});

t.test("a rank's hang report is the root cause of the exit that follows it, the first one only", async (t) => {
  const sentence = 'rank 1 on vm made no progress for 3.0 s in iteration 12 (forward: all-reduce)';
  const hang = hangLineEvent(0, `hang: ${sentence}`)!;
  t.same(hang, { type: 'rank-hang', reporter: 0, sentence, culprits: [1] });
  const later = hangLineEvent(2, 'hang: rank 0 on vm made no progress for 6.0 s in iteration 12 (forward: all-reduce)')!;
  const ended = run([READY, hang, later, { type: 'exited', exitCode: 6 }]);
  t.same({ phase: ended.state.phase, exitCode: ended.state.exitCode }, { phase: 'failed', exitCode: 6 });
  t.same(ended.effects.at(-1), { type: 'root-cause', exitCode: 6, signal: undefined, hang: { reporter: 0, sentence, culprits: [1] } },
    'the rank that aborted the gang is not the cause: the one it names is');
  t.same(run([READY, hang]).effects.slice(3), [], 'the reporting rank ends the gang itself');
  t.same(run([hang, { type: 'exited', exitCode: 6 }]).effects.at(-1)?.type, 'root-cause', 'during warm-up too');
  t.equal(run([READY, CLEAN, hang]).state.hang, undefined, 'nothing after the end');
  t.equal(hangLineEvent(1, 'hang: on'), undefined);
  t.equal(hangLineEvent(1, 'loaded LlamaForCausalLM in 0.2 s'), undefined);
});
