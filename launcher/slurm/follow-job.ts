// Follows a Slurm job from a login node: its state through scontrol, its output file as it grows (the launcher's
// lines and every rank's), until the leader is ready, the job ends, a timeout, or Ctrl-C (which leaves the job be).
import { closeSync, openSync, readSync, statSync } from 'node:fs';

import { execa } from 'execa';

import { TrtllmError } from '../../worker/common/errors.js';
import { isFinal, type JobInfo, jobInfo, JobOutput, parseScontrolRecord } from './job-status.js';

export interface FollowOptions {
  jobId: string;
  until: 'ready' | 'end';
  timeoutMs: number;            // 0: no limit
  out: (line: string) => void;
  fromEnd?: boolean;            // skip what the output file already holds
  pollMs?: number;
}

export interface FollowResult {
  outcome: 'ready' | 'ended' | 'timeout' | 'interrupted';
  info: JobInfo | undefined;    // undefined: Slurm no longer knows the job
  output: JobOutput;
  stdoutPath: string | undefined;
}

/** Runs a Slurm client command; a missing binary becomes an error that says where to run it. */
export async function slurmCommand(file: string, args: string[], input?: string, env?: Record<string, string>) {
  try {
    return await execa(file, args, { reject: false, all: true, ...(input === undefined ? {} : { input }), ...(env ? { env } : {}) });
  } catch (error) {
    throw new TrtllmError(`${file} could not run (${(error as Error).message}): run this on a Slurm login node, where the Slurm client commands are on PATH`, 'not_found');
  }
}

/** `scontrol show job -o <id>`; undefined once Slurm has forgotten the job (MinJobAge after it ended). */
export async function showJob(jobId: string): Promise<JobInfo | undefined> {
  const r = await slurmCommand('scontrol', ['show', 'job', '-o', jobId]);
  if (r.exitCode !== 0) {
    if (/invalid job id/i.test(r.all ?? '')) return undefined;
    throw new TrtllmError(`scontrol show job ${jobId} failed: ${(r.all ?? '').trim()}`, 'internal');
  }
  return jobInfo(parseScontrolRecord(r.stdout.split('\n')[0] ?? ''));
}

/** A node's address as slurm.conf gives it (NodeAddr), when it differs from its name. */
export async function nodeAddress(node: string): Promise<string | undefined> {
  const r = await slurmCommand('scontrol', ['show', 'node', '-o', node]);
  if (r.exitCode !== 0) return undefined;
  const addr = parseScontrolRecord(r.stdout.split('\n')[0] ?? '').get('NodeAddr');
  return addr && addr !== node ? addr : undefined;
}

/** Reads what a growing file gained since the last call, as whole lines. */
class FileTail {
  private offset = 0;
  private partial = '';
  constructor(readonly path: string, fromEnd: boolean) {
    if (fromEnd) this.offset = statSync(path, { throwIfNoEntry: false })?.size ?? 0;
  }

  read(flush = false): string[] {
    let fd: number;
    try {
      fd = openSync(this.path, 'r');
    } catch {
      return [];
    }
    try {
      const buf = Buffer.alloc(64 * 1024);
      let text = '';
      for (;;) {
        const n = readSync(fd, buf, 0, buf.length, this.offset);
        if (n <= 0) break;
        this.offset += n;
        text += buf.subarray(0, n).toString('utf8');
      }
      const lines = (this.partial + text).split('\n');
      this.partial = lines.pop() ?? '';
      if (flush && this.partial !== '') {
        lines.push(this.partial);
        this.partial = '';
      }
      return lines;
    } finally {
      closeSync(fd);
    }
  }
}

function describe(jobId: string, info: JobInfo): string {
  if (info.state === 'PENDING') return `job ${jobId}: PENDING (${info.reason})`;
  if (info.state === 'RUNNING') return `job ${jobId}: RUNNING on ${info.nodes}`;
  return `job ${jobId}: ${info.state}`;
}

export async function followJob(options: FollowOptions): Promise<FollowResult> {
  const output = new JobOutput();
  const started = Date.now();
  let interrupted = false;
  let wake: (() => void) | undefined;
  const onSigint = () => {
    interrupted = true;
    wake?.();
  };
  process.on('SIGINT', onSigint);
  let tail: FileTail | undefined;
  let info: JobInfo | undefined;
  let shown = '';
  const take = (flush = false) => {
    for (const line of tail?.read(flush) ?? []) {
      output.add(line);
      options.out(`  ${line}`);
    }
  };
  try {
    for (;;) {
      info = await showJob(options.jobId);
      if (info === undefined) {
        take(true);
        return { outcome: 'ended', info, output, stdoutPath: tail?.path };
      }
      const now = describe(options.jobId, info);
      if (now !== shown) {
        options.out(now);
        shown = now;
      }
      if (info.stdout && tail?.path !== info.stdout) tail = new FileTail(info.stdout, options.fromEnd ?? false);
      const final = isFinal(info.state);
      take(final);
      if (options.until === 'ready' && output.ready && output.endpoint) return { outcome: 'ready', info, output, stdoutPath: tail?.path };
      if (final) return { outcome: 'ended', info, output, stdoutPath: tail?.path };
      if (interrupted) return { outcome: 'interrupted', info, output, stdoutPath: tail?.path };
      if (options.timeoutMs > 0 && Date.now() - started > options.timeoutMs) return { outcome: 'timeout', info, output, stdoutPath: tail?.path };
      const pause = options.pollMs ?? (info.state === 'PENDING' ? 2000 : 500);
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, pause);
      });
    }
  } finally {
    process.off('SIGINT', onSigint);
  }
}
