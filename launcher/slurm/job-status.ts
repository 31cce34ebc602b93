// Reading Slurm's and the launcher's words back (pure): `scontrol show job|node -o` records, which job states are
// final, and what a job's output says — ready with an endpoint, or failed with the lines that explain why.
import {
  isNotReadyLine, isReadyAfterLine, isStoppedCleanlyLine, parseServingLine, ROOT_CAUSE_HEADER, type ServingEndpoint,
} from '../cluster/launcher-lines.js';

/** `scontrol show <thing> -o`: one line of Key=Value pairs (values may hold spaces; keys never follow a space). */
export function parseScontrolRecord(line: string): Map<string, string> {
  const out = new Map<string, string>();
  const keys = [...line.matchAll(/(?:^|\s)([A-Za-z][\w:/]*)=/g)];
  keys.forEach((m, i) => {
    const start = m.index! + m[0].length;
    const end = i + 1 < keys.length ? keys[i + 1]!.index! : line.length;
    out.set(m[1]!, line.slice(start, end).trim());
  });
  return out;
}

export interface JobInfo {
  state: string;        // PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
  reason: string;       // why it pends, or why it ended (None when nothing to say)
  nodes: string;        // NodeList: "h[1-2]"; "(null)" while pending
  batchHost?: string | undefined;
  exitCode: string;     // "0:0" = exit code:signal of the batch script
  stdout?: string | undefined;
}

export function jobInfo(record: Map<string, string>): JobInfo {
  return {
    state: (record.get('JobState') ?? 'UNKNOWN').split(/\s/)[0]!,
    reason: record.get('Reason') ?? 'None',
    nodes: record.get('NodeList') ?? '(null)',
    batchHost: record.get('BatchHost'),
    exitCode: record.get('ExitCode') ?? '?',
    stdout: record.get('StdOut'),
  };
}

// Slurm's final states: the job holds no node any more (COMPLETING still runs its epilog and kills leftovers).
const FINAL = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL', 'PREEMPTED', 'OUT_OF_MEMORY', 'BOOT_FAIL', 'DEADLINE', 'REVOKED', 'SPECIAL_EXIT']);

export function isFinal(state: string): boolean {
  return FINAL.has(state);
}

export type Endpoint = ServingEndpoint;

/** The launcher's output of a job, line by line: ready (with the endpoint), a failure summary, or a clean stop. */
export class JobOutput {
  readonly lines: string[] = [];
  endpoint: Endpoint | undefined;
  ready = false;
  failed = false;
  stoppedCleanly = false;
  private rootCauseAt = -1;

  add(line: string): void {
    this.lines.push(line);
    if (this.lines.length > 5000) {
      this.lines.splice(0, 1000);
      if (this.rootCauseAt >= 0) this.rootCauseAt = Math.max(0, this.rootCauseAt - 1000);
    }
    if (isReadyAfterLine(line)) this.ready = true;
    this.endpoint = parseServingLine(line) ?? this.endpoint;
    if (line === ROOT_CAUSE_HEADER) {
      this.failed = true;
      this.rootCauseAt = this.lines.length - 1;
    }
    if (isNotReadyLine(line) || /^trtllm-launch( serve)?: /.test(line)) this.failed = true;
    if (isStoppedCleanlyLine(line)) this.stoppedCleanly = true;
  }

  /** The lines that explain a failure: the launcher's root cause when it gave one, else the last lines. */
  explanation(max = 20): string[] {
    if (this.rootCauseAt >= 0) return this.lines.slice(this.rootCauseAt, this.rootCauseAt + max);
    return this.lines.slice(-max);
  }
}
