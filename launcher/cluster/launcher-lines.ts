// The launcher's own lines that another program reads back — `trtllm-launch slurm submit` follows a job through its
// output file (launcher/slurm/job-status.ts) — written and parsed here only, so the supervisor and the follower
// cannot drift apart. (The ranks' lines the supervisor reads are worker/common/status-lines.ts.)

/** The leader answers its health check: the cluster serves. */
export function readyAfterLine(seconds: number, ranksShown: string): string {
  return `[launcher] ready after ${seconds.toFixed(2)} s: ${ranksShown}`;
}

export function isReadyAfterLine(line: string): boolean {
  return line.startsWith('[launcher] ready after ');
}

export function notReadyLine(startupTimeoutSeconds: number): string {
  return `[launcher] not ready after ${startupTimeoutSeconds} s (--startup-timeout): stopping every rank`;
}

export function isNotReadyLine(line: string): boolean {
  return line.startsWith('[launcher] not ready after ');
}

export interface ServingEndpoint {
  host: string;
  port: number;
  metricsHost: string;
  metricsPort: number;
}

/** The first line of the ready banner: where to send requests and scrape metrics. */
export function servingLine(host: string, port: number, tp: number, pp: number, metricsPort: number): string {
  return `serving on http://${host}:${port} (tp ${tp} x pp ${pp}), metrics on http://${host}:${metricsPort}/metrics`;
}

export function parseServingLine(line: string): ServingEndpoint | undefined {
  // (`serving on ...` for one model's ranks, `serving <model> on ...` for --dp, `serving N model(s) on ...`.)
  const m = /^serving (?:.* )?on http:\/\/(\S+):(\d+) .*metrics on http:\/\/(\S+):(\d+)\/metrics/.exec(line);
  return m ? { host: m[1]!, port: Number(m[2]), metricsHost: m[3]!, metricsPort: Number(m[4]) } : undefined;
}

/** Every rank exited 0 after a stop. */
export function stoppedCleanlyLine(leaderAskedDirectly: boolean): string {
  return `[launcher] all ranks stopped cleanly${leaderAskedDirectly ? ' (the leader was asked to stop directly)' : ''}`;
}

export function isStoppedCleanlyLine(line: string): boolean {
  return line.startsWith('[launcher] all ranks stopped cleanly');
}

/** The header of a failure's summary; the lines after it explain the failure. */
export const ROOT_CAUSE_HEADER = 'Root cause:';
