// Runs the cluster's mpirun and watches it: every rank's lines on the console as `[rank N] ...` (and in
// --log-dir), ready only when the leader answers /v2/health/ready within --startup-timeout, a root-cause summary
// when any rank dies, and SIGINT/SIGTERM turned into a drain of the leader, then a stop; a second Ctrl-C forces.
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import { execa, type ResultPromise } from 'execa';

import { DRAIN_SIGNAL } from '../../worker/common/drain-signal.js';
import { killJob, type SweepResult, sweepJob } from './job-sweep.js';
import { ROOT_CAUSE_HEADER } from './launcher-lines.js';
import { hangLineEvent, leaderLineEvent } from './leader-lines.js';
import { parseMpirunFailure, parseRankLine, parseSrunFailure, RankTail } from './rank-output.js';
import { type Effect, type HangFact, initialState, type SupervisorEvent, transition } from './supervisor-state.js';

export interface SuperviseOptions {
  file: string;
  args: string[];
  env: Record<string, string>;
  worldSize: number;
  // The leader's /v2/health/ready and the lines printed once it answers, given the host the leader reported
  // (undefined until it did, or when it is this host): under srun it may run on another node.
  readyUrl: (leaderHost: string | undefined) => string;
  readyBanner: (leaderHost: string | undefined) => string[];
  startupTimeoutMs: number;
  drainTimeoutMs: number;
  logDir?: string | undefined;
  out?: (line: string) => void;  // console sink (tests capture it)
  launcher?: 'mpirun' | 'srun';  // how rank lines are tagged
  ranksShown?: string;           // the ready line's count, when it is not just worldSize ("1 rank(s) + 3 spawned")
  // Orchestrator mode runs under mpirun --enable-recovery, whose exit status says nothing about a process that
  // died: the job is clean only when the leader itself printed "leader exit code 0".
  leaderReportsExit?: boolean;
  // Under srun the leader may run on another node, where its pid means nothing: the drain request goes to its
  // step instead (followers ignore SIGTERM, so signalling the step reaches the leader alone).
  signalLeaderStep?: (step: string) => void;
  forwardDrain?: boolean;  // mpirun forwards DRAIN_SIGNAL to the ranks (Open MPI's does)
  // This launcher's identity as its ranks carry it (TRTLLM_LAUNCHED_BY): how what is left of the job on this host is
  // found once mpirun/srun has exited, and killed with it on a forced stop (job-sweep.ts).
  launcherIdentity?: string;
  // Open MPI's mpirun: the session directory and shared memory an mpirun that was killed leaves are removed.
  openMpiFiles?: boolean;
  // mpirun's stdin is a pipe held open here and never written: it ends when this process dies, and mpirun forwards
  // that end to rank 0, which stops — the launcher's lifeline (worker/lifeline.ts).
  stdinLifeline?: boolean;
}

async function isReady(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(1000) });
    return response.status === 200;
  } catch {
    return false;
  }
}

/** A hang's root cause: the reporting rank's verdict, and the last lines of the ranks it names. */
function hangCause(hang: HangFact, tail: RankTail): string[] {
  const lines = [ROOT_CAUSE_HEADER, `  ${hang.sentence} (reported by rank ${hang.reporter}; --hang-timeout)`];
  for (const rank of hang.culprits) {
    const last = tail.last(rank).slice(-5);
    if (last.length > 0) lines.push(`  rank ${rank} last lines:`, ...last.map((l) => `    ${l}`));
  }
  return lines;
}

function rootCause(all: string, tail: RankTail, worldSize: number, exit: { exitCode?: number | undefined; signal?: string | undefined }, launcher: 'mpirun' | 'srun', hang?: HangFact): string[] {
  // The rank that aborted the gang after a hang is not the cause: the one it names is.
  if (hang) return hangCause(hang, tail);
  const failure = launcher === 'srun' ? parseSrunFailure(all) : parseMpirunFailure(all);
  const lines = [ROOT_CAUSE_HEADER];
  // What a rank said about its own failure (a port it could not bind, --fail-fast's dead model) goes first: what
  // mpirun/srun report after it — an abort, a peer killed — is the consequence.
  const [first] = tail.failures();
  if (failure) {
    const how = failure.signal ? `killed by signal ${failure.signal}` : failure.exitCode !== undefined ? `exit code ${failure.exitCode}` : 'exited improperly';
    const own = tail.failures().find((f) => f.rank === failure.rank);
    lines.push(`  rank ${failure.rank}${failure.host ? ` on ${failure.host}` : ''}: ${how}${own ? `: ${own.cause}` : ''}`);
    if (first && first !== own) lines.push(`  reported first: rank ${first.rank}: ${first.cause}`);
    const last = tail.last(failure.rank);
    if (last.length > 0) lines.push(`  its last lines:`, ...last.map((l) => `    ${l}`));
  } else {
    if (first) lines.push(`  rank ${first.rank}: ${first.cause}`);
    lines.push(`  ${launcher} exited with ${exit.signal ? `signal ${exit.signal}` : `code ${exit.exitCode}`}`);
    for (let r = 0; r < worldSize; r += 1) {
      const last = tail.last(r).slice(-5);
      if (last.length > 0) lines.push(`  rank ${r} last lines:`, ...last.map((l) => `    ${l}`));
    }
    const own = tail.last('mpirun').slice(-8);
    if (own.length > 0) lines.push(`  ${launcher} said:`, ...own.map((l) => `    ${l}`));
  }
  return lines;
}

/** What the sweep after mpirun/srun's exit found, for the console (nothing after an orderly end). */
function sweepLines(sweep: SweepResult, launcher: string): string[] {
  const lines: string[] = [];
  if (sweep.killed > 0) lines.push(`[launcher] ${sweep.killed} process(es) of the job outlived ${launcher}: killed`);
  if (sweep.stillRunning.length > 0) lines.push(`[launcher] still running after SIGKILL: pid ${sweep.stillRunning.join(', ')}`);
  if (sweep.removed.length > 0) lines.push(`[launcher] removed what ${launcher} could not: ${sweep.removed.join(', ')}`);
  return lines;
}

/** Runs until the cluster stops; returns the launcher's exit code (0 only for a requested, clean stop). The decisions
 * are supervisor-state.ts's transitions; this function feeds them events (rank lines, health checks, signals, timers,
 * the exit) and carries out the effects they return. */
export async function superviseCluster(options: SuperviseOptions): Promise<number> {
  const out = options.out ?? ((line: string) => process.stdout.write(`${line}\n`));
  const launcher = options.launcher ?? 'mpirun';
  const files = new Map<string, WriteStream>();
  if (options.logDir) mkdirSync(options.logDir, { recursive: true });
  const logFile = (name: string): WriteStream | undefined => {
    if (!options.logDir) return undefined;
    let f = files.get(name);
    if (!f) {
      f = createWriteStream(join(options.logDir, `${name}.log`), { flags: 'a' });
      files.set(name, f);
    }
    return f;
  };

  // Its own process group: the terminal's Ctrl-C reaches only us (we drain first), and whatever mpirun leaves
  // behind on this host when it dies — ranks, daemons — can be killed as one group.
  const startedMs = Date.now();
  // mpirun/srun start with SIGPIPE ignored (the shell's trap survives its exec; Node's own spawn resets every signal to
  // its default): their output goes to this process through pipes, and a launcher killed with -9 leaves those broken.
  // mpirun then ends the job from the stdin lifeline, but with the default action the first rank line it forwards
  // afterwards kills it halfway through that, its session directory left behind (issue 22).
  const child: ResultPromise = execa('/bin/sh', ['-c', 'trap "" PIPE && exec "$0" "$@"', options.file, ...options.args], {
    env: options.env, extendEnv: true, reject: false, buffer: false, stdin: options.stdinLifeline ? 'pipe' : 'ignore', cleanup: true,
    forceKillAfterDelay: 5000, detached: true,
  });
  // mpirun's group holds mpirun alone: Open MPI puts every rank in a process group of its own (and signals a rank
  // through it, so a rank cannot join mpirun's). Each rank dies with mpirun (PR_SET_PDEATHSIG, worker/lifeline.ts);
  // the ranks are also killed directly, found by the launcher's identity, so none waits for that.
  const killGroup = () => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // the group is already empty
    }
    if (options.launcherIdentity !== undefined) killJob(options.launcherIdentity);
  };
  process.once('exit', killGroup);
  const tail = new RankTail();
  let everything = '';

  const initial = initialState({
    startupTimeoutMs: options.startupTimeoutMs, drainTimeoutMs: options.drainTimeoutMs, launcher,
    ranksShown: options.ranksShown ?? `${options.worldSize} rank(s)`, localHost: hostname(),
    leaderReportsExit: options.leaderReportsExit ?? false, canSignalStep: options.signalLeaderStep !== undefined,
    canForwardDrain: options.forwardDrain ?? false,
  });
  let state = initial.state;
  const started = performance.now();
  let healthTimer: NodeJS.Timeout | undefined;
  // One health check of the leader; its answer is an event like any other (ignored once no longer starting).
  const checkHealth = () => {
    healthTimer = undefined;
    if (state.phase !== 'starting') return;
    void isReady(options.readyUrl(state.leader.host)).then((ok) => {
      dispatch({ type: ok ? 'health-ok' : 'health-failed', elapsedMs: performance.now() - started });
    });
  };
  const perform = (effect: Effect): void => {
    switch (effect.type) {
      case 'say': out(effect.line); break;
      case 'banner': for (const line of options.readyBanner(state.leader.host)) out(line); break;
      case 'check-health':
        if (effect.afterMs === 0) checkHealth();
        else healthTimer = setTimeout(checkHealth, effect.afterMs);
        break;
      case 'check-health-now':
        // Only a check that is waiting is brought forward; one in flight answers soon anyway.
        if (healthTimer !== undefined) {
          clearTimeout(healthTimer);
          checkHealth();
        }
        break;
      case 'stop-ranks': child.kill('SIGTERM'); break;
      case 'kill-ranks': killGroup(); break;
      case 'signal-leader':
        try {
          process.kill(effect.pid, 'SIGTERM');
        } catch {
          child.kill('SIGTERM');
        }
        break;
      case 'signal-step': options.signalLeaderStep?.(effect.step); break;
      case 'forward-drain': child.kill(DRAIN_SIGNAL); break;
      case 'arm-drain-deadline': setTimeout(() => dispatch({ type: 'drain-deadline' }), effect.afterMs).unref(); break;
      case 'root-cause':
        for (const line of rootCause(everything, tail, options.worldSize, { exitCode: effect.exitCode, signal: effect.signal }, launcher, effect.hang)) out(line);
        break;
    }
  };
  const dispatch = (event: SupervisorEvent): void => {
    const next = transition(state, event);
    state = next.state;
    for (const effect of next.effects) perform(effect);
  };

  const onLine = (line: string) => {
    const { rank, text, group } = parseRankLine(line, options.launcher);
    if (group !== undefined) {
      // A spawned worker group's line: shown and logged under its own name, never taken for the leader's.
      out(`[group ${group} rank ${rank}] ${text}`);
      tail.add(undefined, `[group ${group} rank ${rank}] ${text}`);
      logFile(`group-${group}-rank-${rank}`)?.write(`${text}\n`);
      return;
    }
    const event = (rank === 0 ? leaderLineEvent(text) : undefined) ?? (rank !== undefined ? hangLineEvent(rank, text) : undefined);
    if (event) dispatch(event);
    tail.add(rank, text);
    if (everything.length < 1_000_000) everything += `${line}\n`;
    out(rank === undefined ? `[${launcher}] ${text}` : `[rank ${rank}] ${text}`);
    if (rank !== undefined) logFile(`rank-${rank}`)?.write(`${text}\n`);
  };
  const onSigint = () => dispatch({ type: 'signal', signal: 'SIGINT' });
  const onSigterm = () => dispatch({ type: 'signal', signal: 'SIGTERM' });

  createInterface({ input: child.stdout! }).on('line', onLine);
  createInterface({ input: child.stderr! }).on('line', onLine);
  process.on('SIGINT', onSigint);
  process.on('SIGTERM', onSigterm);
  for (const effect of initial.effects) perform(effect);

  const result = await child;
  // Before anything is reported: a rank still answering after the launcher said it failed is what issue 22 saw.
  if (options.launcherIdentity !== undefined) {
    const mpirun = options.openMpiFiles && child.pid !== undefined ? { pid: child.pid, startedMs } : undefined;
    for (const line of sweepLines(await sweepJob(options.launcherIdentity, mpirun), launcher)) out(line);
  }
  process.off('SIGINT', onSigint);
  process.off('SIGTERM', onSigterm);
  clearTimeout(healthTimer);
  for (const f of files.values()) f.end();
  dispatch({ type: 'exited', exitCode: result.exitCode, signal: result.signal });
  process.off('exit', killGroup);
  return state.exitCode ?? 1;
}
