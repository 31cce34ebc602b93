// Runs the cluster's mpirun and watches it: every rank's lines on the console as `[rank N] ...` (and in
// --log-dir), ready only when the leader answers /v2/health/ready within --startup-timeout, a root-cause summary
// when any rank dies, and SIGINT/SIGTERM turned into a drain of the leader, then a stop; a second Ctrl-C forces.
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import { execa, type ResultPromise } from 'execa';

import { isReadyLine, parseLeaderExit, parseLeaderPid, parseSlurmStep } from '../../worker/common/status-lines.js';
import { parseMpirunFailure, parseRankLine, parseSrunFailure, RankTail } from './rank-output.js';

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
  ranksShown?: string;
  // Orchestrator mode runs under mpirun --enable-recovery, whose exit status says nothing about a process that
  // died: the job is clean only when the leader itself printed "leader exit code 0".
  leaderReportsExit?: boolean;           // the ready line's count, when it is not just worldSize ("1 rank(s) + 3 spawned")
  // Under srun the leader may run on another node, where its pid means nothing: the drain request goes to its
  // step instead (followers ignore SIGTERM, so signalling the step reaches the leader alone).
  signalLeaderStep?: (step: string) => void;
}

async function isReady(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(1000) });
    return response.status === 200;
  } catch {
    return false;
  }
}

function rootCause(all: string, tail: RankTail, worldSize: number, exit: { exitCode?: number | undefined; signal?: string | undefined }, launcher: 'mpirun' | 'srun'): string[] {
  const failure = launcher === 'srun' ? parseSrunFailure(all) : parseMpirunFailure(all);
  const lines = ['Root cause:'];
  if (failure) {
    const how = failure.signal ? `killed by signal ${failure.signal}` : failure.exitCode !== undefined ? `exit code ${failure.exitCode}` : 'exited improperly';
    lines.push(`  rank ${failure.rank}${failure.host ? ` on ${failure.host}` : ''}: ${how}`);
    const last = tail.last(failure.rank);
    if (last.length > 0) lines.push(`  its last lines:`, ...last.map((l) => `    ${l}`));
  } else {
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

/** Runs until the cluster stops; returns the launcher's exit code (0 only for a requested, clean stop). */
export async function superviseCluster(options: SuperviseOptions): Promise<number> {
  const out = options.out ?? ((line: string) => process.stdout.write(`${line}\n`));
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
  const child: ResultPromise = execa(options.file, options.args, {
    env: options.env, extendEnv: true, reject: false, buffer: false, stdin: 'ignore', cleanup: true,
    forceKillAfterDelay: 5000, detached: true,
  });
  const killGroup = () => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // the group is already empty
    }
  };
  process.once('exit', killGroup);
  const tail = new RankTail();
  let everything = '';
  let leaderPid: number | undefined;
  let leaderHost: string | undefined;
  let leaderExit: number | undefined;
  let leaderStep: string | undefined;
  let checkNow: (() => void) | undefined;
  const onLine = (line: string) => {
    const { rank, text, group } = parseRankLine(line, options.launcher);
    if (group !== undefined) {
      // A spawned worker group's line: shown and logged under its own name, never taken for the leader's.
      out(`[group ${group} rank ${rank}] ${text}`);
      tail.add(undefined, `[group ${group} rank ${rank}] ${text}`);
      logFile(`group-${group}-rank-${rank}`)?.write(`${text}\n`);
      return;
    }
    if (rank === 0) {
      // Signalled directly only when it runs on this host: a pid means nothing on another node.
      leaderExit = parseLeaderExit(text) ?? leaderExit;
      const pid = parseLeaderPid(text);
      if (pid && pid.host === hostname()) leaderPid = pid.pid;
      else if (pid) leaderHost = pid.host;
      leaderStep = parseSlurmStep(text) ?? leaderStep;
      // The leader says when it listens: check at once rather than up to a poll interval later.
      if (isReadyLine(text)) checkNow?.();
    }
    tail.add(rank, text);
    if (everything.length < 1_000_000) everything += `${line}\n`;
    out(rank === undefined ? `[${options.launcher ?? 'mpirun'}] ${text}` : `[rank ${rank}] ${text}`);
    if (rank !== undefined) logFile(`rank-${rank}`)?.write(`${text}\n`);
  };
  createInterface({ input: child.stdout! }).on('line', onLine);
  createInterface({ input: child.stderr! }).on('line', onLine);

  let stopping = false;
  let exited = false;
  let ready = false;
  let stoppedEarly = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      out(`[launcher] ${signal} again: killing every rank now`);
      killGroup();
      return;
    }
    stopping = true;
    if (!ready) {
      // Nothing is served yet, so nothing to drain; and a leader still loading has no drain handler to answer with.
      // (Under Slurm this is a time limit's signal or a stop that came before the job got going.)
      out(`[launcher] ${signal} before the leader was ready: stopping every rank`);
      stoppedEarly = true;
      child.kill('SIGTERM');
      return;
    }
    out(`[launcher] ${signal}: draining the leader (up to ${options.drainTimeoutMs / 1000} s), then stopping all ranks`);
    // The leader stops admitting (503), finishes or cancels what is in flight, then releases its followers.
    if (leaderPid !== undefined) {
      try {
        process.kill(leaderPid, 'SIGTERM');
      } catch {
        child.kill('SIGTERM');
      }
    } else if (leaderStep !== undefined && options.signalLeaderStep) {
      // srun answers a SIGTERM of its own by killing its tasks at once: it must not be the one signalled.
      options.signalLeaderStep(leaderStep);
    } else {
      child.kill('SIGTERM');
    }
    setTimeout(() => {
      if (!exited) {
        out('[launcher] drain deadline passed: stopping the ranks');
        child.kill('SIGTERM');
      }
    }, options.drainTimeoutMs + 5000).unref();
  };
  const onSigint = () => stop('SIGINT');
  const onSigterm = () => stop('SIGTERM');
  process.on('SIGINT', onSigint);
  process.on('SIGTERM', onSigterm);

  const started = performance.now();
  const readiness = (async () => {
    while (!exited && !stopping) {
      if (await isReady(options.readyUrl(leaderHost))) {
        ready = true;
        out(`[launcher] ready after ${((performance.now() - started) / 1000).toFixed(2)} s: ${options.ranksShown ?? `${options.worldSize} rank(s)`}`);
        for (const line of options.readyBanner(leaderHost)) out(line);
        return;
      }
      if (performance.now() - started > options.startupTimeoutMs) {
        out(`[launcher] not ready after ${options.startupTimeoutMs / 1000} s (--startup-timeout): stopping every rank`);
        stopping = true;
        child.kill('SIGTERM');
        return;
      }
      await new Promise<void>((r) => {
        checkNow = r;
        setTimeout(r, 200);
      });
    }
  })();

  const result = await child;
  exited = true;
  killGroup();  // a rank that outlived mpirun (mpirun killed, say) must not become an orphan
  process.off('exit', killGroup);
  await readiness;
  process.off('SIGINT', onSigint);
  process.off('SIGTERM', onSigterm);
  for (const f of files.values()) f.end();
  // Every rank exits 0 only after the leader drained and released its followers: a stop, whoever asked for it
  // (under Slurm, `scancel --signal=TERM <job>` reaches the leader without passing through this process).
  if (stoppedEarly) {
    out('[launcher] stopped before the leader was ready; nothing was served');
    return 0;
  }
  if (options.leaderReportsExit && result.exitCode === 0 && leaderExit !== 0) {
    out(leaderExit === undefined ? '[launcher] the leader ended without reporting its exit code (killed?)' : `[launcher] the leader exited with code ${leaderExit}`);
    for (const line of rootCause(everything, tail, options.worldSize, { exitCode: leaderExit ?? 1 }, options.launcher ?? 'mpirun')) out(line);
    return leaderExit ?? 1;
  }
  if (result.exitCode === 0) {
    out(`[launcher] all ranks stopped cleanly${stopping ? '' : ' (the leader was asked to stop directly)'}`);
    return 0;
  }
  for (const line of rootCause(everything, tail, options.worldSize, { exitCode: result.exitCode, signal: result.signal }, options.launcher ?? 'mpirun')) out(line);
  return result.exitCode && result.exitCode !== 0 ? result.exitCode : 1;
}
