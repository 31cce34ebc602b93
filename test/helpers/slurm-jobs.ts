// What the Slurm tests do with a job: run `trtllm-launch slurm ...` as a user would, read the endpoint it prints,
// query scontrol, wait for a final state, find our processes, and get the one-rank answer to compare with.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { execa } from 'execa';

import { packageRoot } from '../../worker/common/package-root.js';
import { startServer } from '../../worker/serve.js';
import { isFinal, type JobInfo, jobInfo, parseScontrolRecord } from '../../launcher/slurm/job-status.js';
import { fixtureDir } from './fixtures.js';
import { GENEROUS_MS, LAUNCH_MS } from './wait.js';
export { freePort } from './free-port.js';

export const BIN = join(packageRoot(), 'bin', 'trtllm-launch.js');
export const SEEDS_BODY = '{"text_input": "What is machine learning?", "max_tokens": 20, "bad_words": "", "stop_words": ""}';


/** `trtllm-launch <args>` as a user runs it on a login node (cwd: where the job's output directory goes). */
export async function trtllm(args: string[], cwd: string, env: Record<string, string>, timeoutMs = LAUNCH_MS) {
  return execa(process.execPath, [BIN, ...args], { cwd, env, reject: false, all: true, timeout: timeoutMs });
}

export interface Submitted {
  jobId: string;
  host: string;
  port: number;
  addr: string;       // where to connect: the node's NodeAddr when Slurm has one, else its name
}

/** The job id and endpoint `slurm submit` printed; undefined fields when it did not get that far. */
export function parseSubmit(output: string): Partial<Submitted> {
  const id = /submitted batch job (\d+)/.exec(output)?.[1];
  const e = /job \d+ is serving: endpoint (\S+):(\d+)(?: \(address (\S+):\d+\))?/.exec(output);
  if (!e) return { jobId: id };
  return { jobId: id, host: e[1]!, port: Number(e[2]), addr: e[3] ?? e[1]! };
}

export async function showJob(env: Record<string, string>, jobId: string): Promise<JobInfo | undefined> {
  const r = await execa('scontrol', ['show', 'job', '-o', jobId], { env, reject: false });
  return r.exitCode === 0 ? jobInfo(parseScontrolRecord(r.stdout)) : undefined;
}

/** Polls until the job is in a final state (or `ms` passed); the last state seen. */
export async function waitFinal(env: Record<string, string>, jobId: string, ms = GENEROUS_MS): Promise<JobInfo | undefined> {
  const end = Date.now() + ms;
  let info = await showJob(env, jobId);
  while (Date.now() < end && !(info && isFinal(info.state))) {
    await new Promise((r) => setTimeout(r, 250));
    info = await showJob(env, jobId);
  }
  return info;
}

/** Live processes (pid, command line) whose command line contains `marker`. */
export function processesWith(marker: string): { pid: number; cmd: string }[] {
  const out: { pid: number; cmd: string }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2)[0] === 'Z') continue;
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmd.includes(marker)) out.push({ pid: Number(entry), cmd });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

export async function waitNoProcesses(marker: string, ms = GENEROUS_MS): Promise<{ pid: number; cmd: string }[]> {
  const end = Date.now() + ms;
  while (Date.now() < end && processesWith(marker).length > 0) await new Promise((r) => setTimeout(r, 100));
  return processesWith(marker);
}

/** What one rank in this process answers to the seeds' curl body: the reference a cluster must reproduce. */
export async function oneRankAnswer(body: string): Promise<string> {
  const server = await startServer({
    model: fixtureDir('tiny-llama'), host: '127.0.0.1', httpPort: 0, metricsPort: 0, authHealth: false, authMetrics: false,
    maxBodyBytes: 1024 * 1024, drainTimeoutMs: 1000, logLevel: 'error', threads: 1, tokensPerBlock: 16,
  });
  try {
    const r = await fetch(`http://127.0.0.1:${server.httpPort}/v2/models/ensemble/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    return ((await r.json()) as { text_output: string }).text_output;
  } finally {
    await server.close();
  }
}

/** The seeds' curl command, verbatim but for the host and port. */
export async function seedsCurl(hostPort: string): Promise<{ ok: boolean; json: { text_output?: string } | undefined; raw: string }> {
  const r = await execa('curl', ['-s', '-X', 'POST', `${hostPort}/v2/models/ensemble/generate`, '-d', SEEDS_BODY], { reject: false, all: true, timeout: GENEROUS_MS });
  try {
    return { ok: r.exitCode === 0, json: JSON.parse(r.stdout) as { text_output?: string }, raw: r.all ?? '' };
  } catch {
    return { ok: false, json: undefined, raw: r.all ?? '' };
  }
}
