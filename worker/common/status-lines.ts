// The lines a rank prints for the launcher to act on, written and read back here only: a rank formats them with these
// functions and the supervisor (launcher/cluster/supervise.ts) parses them with their counterparts, so the two sides
// cannot drift apart. Each line is one whole stdout line of rank 0 (mpirun/srun add their rank tags around it).

/** The leader listens: the supervisor checks readiness at once instead of at its next poll. */
export function readyLine(servedModelName: string, tritonNames: readonly string[]): string {
  return `ready: serving ${servedModelName} as ${tritonNames.join(', ')}`;
}

export function isReadyLine(text: string): boolean {
  return text.startsWith('ready: serving ');
}

/** Where the leader (or the orchestrator) runs: the supervisor drains it by this pid when it is on the same host. */
export function leaderPidLine(pid: number, host: string): string {
  return `leader pid ${pid} on ${host}`;
}

export function parseLeaderPid(text: string): { pid: number; host: string } | undefined {
  const m = /^leader pid (\d+) on (\S+)$/.exec(text);
  return m ? { pid: Number(m[1]), host: m[2]! } : undefined;
}

/** The orchestrator's own exit code: under mpirun --enable-recovery, mpirun's status says nothing about it. */
export function leaderExitLine(code: number): string {
  return `leader exit code ${code}`;
}

export function parseLeaderExit(text: string): number | undefined {
  const m = /^leader exit code (\d+)$/.exec(text);
  return m ? Number(m[1]) : undefined;
}

/** A process of the cluster that cannot go on says why, as its last line, before it exits: the launcher puts the
 * first such line of any rank first in the root cause (launcher/cluster/supervise.ts). `role` is its command. */
export function rankFailureLine(role: string, message: string): string {
  return `trtllm-launch ${role}: ${message}`;
}

/** The failure a rank's or the orchestrator's line reports, or undefined for any other line. */
export function parseRankFailure(text: string): string | undefined {
  return /^trtllm-launch (?:rank|orchestrated): (.+)$/.exec(text)?.[1];
}

/** Where an srun task landed (every rank says it); rank 0's step is what the supervisor signals on another node. */
export interface SlurmStepReport {
  jobId: string;
  stepId: string;
  procId: number;
  tasks: number;
  node: string;
  localId: number;
  worldRank: number;
  device: string;
}

export function slurmStepLine(r: SlurmStepReport): string {
  return `slurm step ${r.jobId}.${r.stepId}: task ${r.procId} of ${r.tasks} on ${r.node} (local ${r.localId}) = MPI rank ${r.worldRank}, device ${r.device}`;
}

/** The step ("4242.0") of a slurm step line, or undefined for any other line. */
export function parseSlurmStep(text: string): string | undefined {
  return /^slurm step (\d+\.\d+): /.exec(text)?.[1];
}

/** What a rank was doing when the liveness watch reported (worker/binding/addon-types.ts's RankActivity, minus what
 * the lines do not say). */
export interface RankWait {
  rank: number;
  host: string;
  iteration: number;
  step: string;        // 'forward'
  waitingFor: string;  // 'all-reduce'; '' while computing
  seconds: number;
}

const activity = (w: RankWait): string => (w.waitingFor === '' ? w.step : `${w.step}: ${w.waitingFor}`);
const where = (w: RankWait): string => `iteration ${w.iteration} (${activity(w)})`;

/** The leader's wait for another rank has lasted half the hang timeout: it is not ready (503) until the wait ends. */
export function stalledLine(self: RankWait, hangTimeoutMs: number): string {
  return `stalled: no progress for ${self.seconds.toFixed(1)} s in ${where(self)}; not ready, asking the other ranks ` +
    `(--hang-timeout ${hangTimeoutMs / 1000} s)`;
}

export function isStalledLine(text: string): boolean {
  return text.startsWith('stalled: no progress for ');
}

/** That wait ended after all: ready again. */
export function resumedLine(self: RankWait): string {
  return `resumed: progress again after ${self.seconds.toFixed(1)} s in ${where(self)}; ready`;
}

/** A hang: which ranks made no progress while `self` (the reporting rank) waited; the gang ends right after it. */
export interface HangReport {
  culprits: { rank: number; host: string }[];  // empty: every rank answered, each waiting for another
  self: RankWait;
  waiting: RankWait[];                          // the ranks that answered, when no culprit is known
}

/** "hang: rank 1 on vm made no progress for 30.0 s in iteration 1234 (forward: all-reduce)". */
export function hangLine(report: HangReport): string {
  const when = `for ${report.self.seconds.toFixed(1)} s in ${where(report.self)}`;
  if (report.culprits.length > 0) {
    return `hang: ${report.culprits.map((c) => `rank ${c.rank} on ${c.host}`).join(', ')} made no progress ${when}`;
  }
  const answers = report.waiting.map((w) => `rank ${w.rank} in ${where(w)}`).join('; ');
  return `hang: no rank made progress ${when}; every rank answered: ${answers}`;
}

/** A hang line read back: the ranks it names and its sentence (what follows "hang: "). */
export function parseHangLine(text: string): { culprits: { rank: number; host: string }[]; sentence: string } | undefined {
  const m = /^hang: (.+)$/.exec(text);
  if (!m) return undefined;
  const sentence = m[1]!;
  const named = /^(rank \d+ on \S+(?:, rank \d+ on \S+)*) made no progress /.exec(sentence);
  if (!named && !sentence.startsWith('no rank made progress ')) return undefined;
  const culprits = named ? [...named[1]!.matchAll(/rank (\d+) on ([^\s,]+)/g)].map((c) => ({ rank: Number(c[1]), host: c[2]! })) : [];
  return { culprits, sentence };
}
