// A leader-mode cluster started the way a user starts it — `trtllm-launch --world-size 2` under mpirun, as its own
// process — for the tests of what happens to it (test/launcher/cluster/): its ports, its output, a promise for the
// launcher's "ready" line, and the Open MPI job it runs (found once it runs).
import { join } from 'node:path';

import { execa, type Options, type ResultPromise } from 'execa';
import type { Test } from 'tap';

import { packageRoot } from '../../worker/common/package-root.js';
import { fixtureDir } from './fixtures.js';
import { type OpenMpiJob, openMpiJob } from './open-mpi-job.js';
import { freePort } from './processes.js';
import { waitFor } from './wait.js';

export const BIN = join(packageRoot(), 'bin', 'trtllm-launch.js');

export interface LaunchedCluster extends StartedLauncher {
  ports: ClusterPorts;
  marker: string;                        // in the command line of the launcher, mpirun and every rank
  /** The Open MPI job, once its ranks run. */
  job: () => Promise<OpenMpiJob | undefined>;
}

export interface ClusterPorts { http: number; metrics: number; grpc: number }

/** A launcher process as a test watches it: its output so far, a promise per line it waits for, and its readiness. */
export interface StartedLauncher {
  child: ResultPromise;
  output: () => string;
  /** Resolves with the first match of `pattern` in the output; rejects if the launcher exits first. */
  line: (pattern: RegExp) => Promise<RegExpExecArray>;
  ready: Promise<boolean>;               // the launcher's "ready" line (false: it exited without one)
}

/** `trtllm-launch <args>` (leader mode or --multi-model), watched line by line; `options` go to execa. */
export function startLauncher(args: string[], options: Options = {}): StartedLauncher {
  let all = '';
  const child = execa('node', [BIN, ...args], { reject: false, all: true, ...options });
  const waiters: (() => void)[] = [];
  child.all!.on('data', (chunk: Buffer) => {
    all += chunk.toString();
    for (const w of waiters.slice()) w();
  });
  const line = (pattern: RegExp) => new Promise<RegExpExecArray>((resolve, reject) => {
    const check = () => {
      const m = pattern.exec(all);
      if (m) {
        waiters.splice(waiters.indexOf(check), 1);
        resolve(m);
      }
    };
    waiters.push(check);
    check();
    void child.then(() => {
      const m = pattern.exec(all);
      if (m) resolve(m);
      else reject(new Error(`the launcher exited before printing ${pattern}:\n${all.slice(-2000)}`));
    });
  });
  const ready = line(/\[launcher\] ready after/).then(() => true, () => false);
  return { child, output: () => all, line, ready };
}

async function freePorts(): Promise<ClusterPorts> {
  return { http: await freePort(), metrics: await freePort(), grpc: await freePort() };
}

function portArgs(ports: ClusterPorts): string[] {
  return ['--http-port', String(ports.http), '--metrics-port', String(ports.metrics), '--grpc-port', String(ports.grpc)];
}

/** Starts `--world-size 2` on the tiny Llama on `ports` (fresh free ones by default) with `extra` options. */
export async function launchCluster(extra: string[] = [], options: Options = {}, given?: ClusterPorts): Promise<LaunchedCluster> {
  const ports = given ?? await freePorts();
  const started = startLauncher(['--model', fixtureDir('tiny-llama'), '--world-size', '2', '--oversubscribe', '--threads', '1',
    '--tokens-per-block', '16', ...portArgs(ports), ...extra], options);
  const marker = `--http-port ${ports.http}`;
  const job = async () => {
    let found: OpenMpiJob | undefined;
    await waitFor(() => (found = openMpiJob(marker)) !== undefined);
    return found;
  };
  return { ...started, ports, marker, job };
}

/** `trtllm-launch <args>` on fresh free ports, stopped (SIGINT) when the test ends; asserts it became ready and
 * returns its HTTP and metrics base URLs. */
export async function startServingCluster(t: Test, args: string[]): Promise<{ base: string; metricsBase: string }> {
  const ports = await freePorts();
  const launcher = startLauncher([...args, ...portArgs(ports)]);
  t.teardown(async () => {
    launcher.child.kill('SIGINT');
    await launcher.child;
  });
  t.ok(await launcher.ready, `ready (${launcher.output().slice(-1500)})`);
  return { base: `http://127.0.0.1:${ports.http}`, metricsBase: `http://127.0.0.1:${ports.metrics}` };
}
