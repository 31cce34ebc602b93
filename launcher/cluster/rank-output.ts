// Rank output as the user sees it: Open MPI's `[1,0]<stdout>:` and MPICH's `[0] ` tags become `[rank 0]`, and the
// last lines of every rank are kept for the root-cause summary, with the failures ranks reported, first first
// (pure parsing + a small ring buffer).
import { parseRankFailure } from '../../worker/common/status-lines.js';

export interface TaggedLine {
  rank: number | undefined;
  text: string;
  group?: number;  // Open MPI: a job spawned by the orchestrator (its n-th worker group, 0-based)
}

const OPENMPI_TAG = /^\[(\d+),(\d+)\]<std(?:out|err)>:(.*)$/;
const MPICH_TAG = /^\[(\d+)\] (.*)$/;
const SRUN_LABEL = /^\s*(\d+): (.*)$/;

export function parseRankLine(line: string, launcher: 'mpirun' | 'srun' = 'mpirun'): TaggedLine {
  if (launcher === 'mpirun') {
    const o = OPENMPI_TAG.exec(line);
    // Job 1 is what mpirun started; jobs 2, 3, ... are the groups an orchestrator spawned, in order.
    if (o) return Number(o[1]) > 1 ? { rank: Number(o[2]), text: o[3]!, group: Number(o[1]) - 2 } : { rank: Number(o[2]), text: o[3]! };
  }
  const m = launcher === 'srun' ? SRUN_LABEL.exec(line) : MPICH_TAG.exec(line);
  return m ? { rank: Number(m[1]), text: m[2]! } : { rank: undefined, text: line };
}

/** A failure a rank reported about itself (worker/common/status-lines.ts, rankFailureLine). */
export interface ReportedFailure {
  rank: number;
  cause: string;
}

export class RankTail {
  private readonly lines = new Map<number | 'mpirun', string[]>();
  private readonly reported: ReportedFailure[] = [];
  constructor(private readonly keep = 15) {}

  add(rank: number | undefined, text: string): void {
    const key = rank ?? 'mpirun';
    const list = this.lines.get(key) ?? [];
    list.push(text);
    if (list.length > this.keep) list.shift();
    this.lines.set(key, list);
    const cause = rank === undefined ? undefined : parseRankFailure(text);
    if (cause !== undefined && !this.reported.some((f) => f.rank === rank)) this.reported.push({ rank: rank!, cause });
  }

  /** The failures ranks reported, in the order they arrived (the first is the first cause); one per rank. */
  failures(): readonly ReportedFailure[] {
    return this.reported;
  }

  last(rank: number | 'mpirun'): string[] {
    return this.lines.get(rank) ?? [];
  }
}

export interface RankFailure {
  rank: number;
  host?: string | undefined;
  exitCode?: number | undefined;
  signal?: string | undefined;
}

/** The first failing task as srun reports it ("srun: error: h2: task 1: Exited with exit code 2", "...: Killed"). */
export function parseSrunFailure(text: string): RankFailure | undefined {
  const m = /srun: error: (\S+): tasks? (\d+)[-,\d]*: (.+)$/m.exec(text);
  if (!m) return undefined;
  const code = /^Exited with exit code (\d+)/.exec(m[3]!);
  return code ? { rank: Number(m[2]), host: m[1], exitCode: Number(code[1]) } : { rank: Number(m[2]), host: m[1], signal: m[3]!.trim() };
}

/** The failing rank as Open MPI's mpirun reports it ("process rank 1 with PID 123 on node vm exited on signal 9"). */
export function parseMpirunFailure(text: string): RankFailure | undefined {
  const signal = /process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)(?: \(([^)]+)\))?/.exec(text);
  if (signal) return { rank: Number(signal[1]), host: signal[2], signal: `${signal[3]}${signal[4] ? ` (${signal[4]})` : ''}` };
  const code = /Process name: \[\[\d+,\d+\],(\d+)\][\s\S]*?Exit code:\s+(\d+)/.exec(text);
  if (code) return { rank: Number(code[1]), exitCode: Number(code[2]) };
  const node = /process rank (\d+) with PID \d+ on\s+node (\S+) exiting improperly/.exec(text);
  if (node) return { rank: Number(node[1]), host: node[2] };
  return undefined;
}
