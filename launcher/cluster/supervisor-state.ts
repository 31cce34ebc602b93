// The supervisor's life as one state machine (pure): every decision supervise.ts makes about a running cluster —
// when it is ready, what a Ctrl-C means at each point, when to give up, what the exit code is — is a transition
// here, and the I/O it needs (print, signal, kill, schedule a check) comes back as effects for supervise.ts to run.
// Keeping the decisions in one function is what lets them be tested without processes and read in one place.
//
//   starting ──health ok──▶ ready ──signal──▶ draining ──exited──▶ stopped | failed
//      │  └──timeout──▶ giving-up ──exited──▶ stopped | failed
//      └──signal──▶ stopping-early ──exited──▶ stopped
//   (any phase but stopped/failed) ──exited──▶ stopped | failed; a second signal kills every rank at once.
import { notReadyLine, readyAfterLine, stoppedCleanlyLine } from './launcher-lines.js';

export type Phase =
  | 'starting'        // ranks started; the leader does not answer its health check yet
  | 'ready'           // the leader answers: serving
  | 'draining'        // asked to stop once ready: the leader drains, then releases its followers
  | 'stopping-early'  // asked to stop before ready: nothing to drain, every rank is stopped
  | 'giving-up'       // not ready within --startup-timeout: every rank is stopped
  | 'stopped'         // mpirun/srun exited and the cluster ended as asked (exit code 0)
  | 'failed';         // it exited otherwise: a root cause is printed, the exit code is non-zero

export interface SupervisorSettings {
  startupTimeoutMs: number;
  drainTimeoutMs: number;
  launcher: 'mpirun' | 'srun';
  ranksShown: string;          // the ready line's count: "2 rank(s)", "1 rank(s) + 3 spawned"
  localHost: string;           // this host: a leader pid is signalled only when the leader runs here
  // Orchestrator mode runs under mpirun --enable-recovery, whose exit status says nothing about a process that
  // died: the job is clean only when the leader itself printed "leader exit code 0".
  leaderReportsExit: boolean;
  canSignalStep: boolean;      // under srun: the drain request can go to the leader's step (supervise.ts)
  canForwardDrain: boolean;    // under Open MPI's mpirun: it forwards SIGUSR2, a leader's drain request, to the job
}

/** A rank's hang report (the liveness watch's verdict): the root cause once the gang is down. */
export interface HangFact {
  reporter: number;     // the rank that printed it
  sentence: string;     // "rank 1 on vm made no progress for 30.0 s in iteration 1234 (forward: all-reduce)"
  culprits: number[];   // the ranks it names
}

/** What the leader said about itself on its output (see leader-lines.ts). */
export interface LeaderFacts {
  pid?: number;                // set only when it runs on this host: a pid means nothing on another node
  host?: string;               // set when it runs on another host
  step?: string;               // its Slurm step ("17.0")
  exitCode?: number;           // what it reported as it ended (orchestrator mode)
}

export interface SupervisorState {
  readonly settings: SupervisorSettings;
  readonly phase: Phase;
  readonly leader: LeaderFacts;
  readonly hang?: HangFact;    // the first hang reported (one hang makes every rank wait: later reports follow it)
  readonly exitCode?: number;  // the launcher's exit code, once stopped or failed
}

export type SupervisorEvent =
  | { type: 'leader-pid'; pid: number; host: string }
  | { type: 'leader-step'; step: string }
  | { type: 'leader-exit-code'; code: number }
  | { type: 'leader-listening' }                         // it printed "ready: serving": worth checking at once
  | { type: 'health-ok'; elapsedMs: number }
  | { type: 'health-failed'; elapsedMs: number }
  | { type: 'signal'; signal: string }                   // SIGINT/SIGTERM to the launcher
  | { type: 'drain-deadline' }
  | { type: 'rank-hang'; reporter: number; sentence: string; culprits: number[] }  // a rank's liveness watch ends the gang
  | { type: 'exited'; exitCode?: number | undefined; signal?: string | undefined };   // mpirun/srun ended

export type Effect =
  | { type: 'say'; line: string }                        // one console line
  | { type: 'banner' }                                   // the ready banner, for the leader's host
  | { type: 'check-health'; afterMs: number }            // check the leader's health after a pause
  | { type: 'check-health-now' }                         // cut a pending pause short
  | { type: 'stop-ranks' }                               // SIGTERM to mpirun/srun
  | { type: 'kill-ranks' }                               // SIGKILL to its whole process group
  | { type: 'signal-leader'; pid: number }               // SIGTERM to the leader (stop-ranks if it is gone)
  | { type: 'signal-step'; step: string }                // the drain request to the leader's Slurm step
  | { type: 'forward-drain' }                            // the drain request through mpirun (worker/common/drain-signal.ts)
  | { type: 'arm-drain-deadline'; afterMs: number }
  | { type: 'root-cause'; exitCode?: number | undefined; signal?: string | undefined; hang?: HangFact | undefined };

export interface Step {
  state: SupervisorState;
  effects: Effect[];
}

const HEALTH_POLL_MS = 200;
// The leader's own drain is bounded by --drain-timeout; this margin is for it to release its followers and exit.
const DRAIN_MARGIN_MS = 5000;

/** Where every supervision starts: the ranks were just started, and the leader's health is checked at once. */
export function initialState(settings: SupervisorSettings): Step {
  return { state: { settings, phase: 'starting', leader: {} }, effects: [{ type: 'check-health', afterMs: 0 }] };
}

const say = (line: string): Effect => ({ type: 'say', line });
const done = (phase: Phase): boolean => phase === 'stopped' || phase === 'failed';

/** The one place the supervisor decides: the next state and the effects to run, for any event in any phase. */
export function transition(state: SupervisorState, event: SupervisorEvent): Step {
  const { settings, phase, leader } = state;
  const stay = (effects: Effect[] = []): Step => ({ state, effects });
  const to = (next: Phase, effects: Effect[]): Step => ({ state: { ...state, phase: next }, effects });
  switch (event.type) {
    case 'leader-pid':
      return { state: { ...state, leader: event.host === settings.localHost ? { ...leader, pid: event.pid } : { ...leader, host: event.host } }, effects: [] };
    case 'leader-step':
      return { state: { ...state, leader: { ...leader, step: event.step } }, effects: [] };
    case 'leader-exit-code':
      return { state: { ...state, leader: { ...leader, exitCode: event.code } }, effects: [] };
    case 'leader-listening':
      return stay(phase === 'starting' ? [{ type: 'check-health-now' }] : []);
    case 'health-ok':
      if (phase !== 'starting') return stay();
      return to('ready', [say(readyAfterLine(event.elapsedMs / 1000, settings.ranksShown)), { type: 'banner' }]);
    case 'health-failed':
      if (phase !== 'starting') return stay();
      if (event.elapsedMs > settings.startupTimeoutMs) {
        return to('giving-up', [say(notReadyLine(settings.startupTimeoutMs / 1000)), { type: 'stop-ranks' }]);
      }
      return stay([{ type: 'check-health', afterMs: HEALTH_POLL_MS }]);
    case 'signal':
      return onSignal(state, event.signal);
    case 'drain-deadline':
      return phase === 'draining' ? stay([say('[launcher] drain deadline passed: stopping the ranks'), { type: 'stop-ranks' }]) : stay();
    case 'rank-hang': {
      // The reporting rank ends the gang itself (MPI_Abort); the report is kept as the root cause of that exit.
      if (done(phase) || state.hang) return stay();
      const { reporter, sentence, culprits } = event;
      return { state: { ...state, hang: { reporter, sentence, culprits } }, effects: [] };
    }
    case 'exited':
      return done(phase) ? stay() : onExit(state, event);
  }
}

/** SIGINT/SIGTERM: drain when serving, stop when not yet, force on the second one. */
function onSignal(state: SupervisorState, signal: string): Step {
  const { settings, phase, leader } = state;
  switch (phase) {
    case 'starting':
      // Nothing is served yet, so nothing to drain; and a leader still loading has no drain handler to answer with.
      // (Under Slurm this is a time limit's signal or a stop that came before the job got going.)
      return { state: { ...state, phase: 'stopping-early' }, effects: [say(`[launcher] ${signal} before the leader was ready: stopping every rank`), { type: 'stop-ranks' }] };
    case 'ready': {
      // The leader stops admitting (503), finishes or cancels what is in flight, then releases its followers.
      // srun answers a SIGTERM of its own by killing its tasks at once: under srun the leader's step is signalled.
      // A leader on another host under mpirun: mpirun forwards the drain request to it.
      const request: Effect = leader.pid !== undefined ? { type: 'signal-leader', pid: leader.pid }
        : leader.step !== undefined && settings.canSignalStep ? { type: 'signal-step', step: leader.step }
          : settings.canForwardDrain ? { type: 'forward-drain' } : { type: 'stop-ranks' };
      return {
        state: { ...state, phase: 'draining' },
        effects: [
          say(`[launcher] ${signal}: draining the leader (up to ${settings.drainTimeoutMs / 1000} s), then stopping all ranks`),
          request, { type: 'arm-drain-deadline', afterMs: settings.drainTimeoutMs + DRAIN_MARGIN_MS },
        ],
      };
    }
    case 'draining':
    case 'stopping-early':
    case 'giving-up':
      return { state, effects: [say(`[launcher] ${signal} again: killing every rank now`), { type: 'kill-ranks' }] };
    case 'stopped':
    case 'failed':
      return { state, effects: [] };
  }
}

/** mpirun/srun ended: the outcome and its exit code. Every rank exits 0 only after the leader drained and released
 * its followers: a stop, whoever asked for it (under Slurm, `scancel --signal=TERM <job>` reaches the leader without
 * passing through the launcher). */
function onExit(state: SupervisorState, exit: { exitCode?: number | undefined; signal?: string | undefined }): Step {
  const { settings, phase, leader } = state;
  // A rank that outlived mpirun (mpirun killed, say) must not become an orphan.
  const effects: Effect[] = [{ type: 'kill-ranks' }];
  const end = (next: 'stopped' | 'failed', exitCode: number): Step => ({ state: { ...state, phase: next, exitCode }, effects });
  if (phase === 'stopping-early') {
    effects.push(say('[launcher] stopped before the leader was ready; nothing was served'));
    return end('stopped', 0);
  }
  if (settings.leaderReportsExit && exit.exitCode === 0 && leader.exitCode !== 0) {
    effects.push(
      say(leader.exitCode === undefined ? '[launcher] the leader ended without reporting its exit code (killed?)' : `[launcher] the leader exited with code ${leader.exitCode}`),
      { type: 'root-cause', exitCode: leader.exitCode ?? 1 },
    );
    return end('failed', leader.exitCode ?? 1);
  }
  if (exit.exitCode === 0) {
    effects.push(say(stoppedCleanlyLine(phase === 'ready' || phase === 'starting')));
    return end('stopped', 0);
  }
  effects.push({ type: 'root-cause', exitCode: exit.exitCode, signal: exit.signal, ...(state.hang ? { hang: state.hang } : {}) });
  return end('failed', exit.exitCode && exit.exitCode !== 0 ? exit.exitCode : 1);
}
