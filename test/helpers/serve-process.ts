// `trtllm-launch ...` started as users start it, in a process of its own with no TRTLLM_* setting of the caller's:
// for tests of how a server is configured (flags, env, model files, Triton repositories).
import { join } from 'node:path';

import { execa, type ResultPromise } from 'execa';

import { packageRoot } from '../../worker/common/package-root.js';

export const LAUNCHER_BIN = join(packageRoot(), 'bin', 'trtllm-launch.js');

/** The caller's environment without TRTLLM_* (none may leak into what a test asserts), plus `extra`. */
export function cleanEnv(extra: Record<string, string> = {}): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { ...process.env };
  for (const name of Object.keys(env)) if (name.startsWith('TRTLLM_') && name !== 'TRTLLM_ADDON_PATH') env[name] = undefined;
  return { ...env, ...extra };
}

export interface ServeProcess {
  child: ResultPromise;
  output: string;       // its stdout up to the ready banner
  httpPort: string;
  metricsPort: string;
}

/** Starts `trtllm-launch <args>` (a one-process server on 127.0.0.1) and resolves once it prints how to query it. */
export async function startServeProcess(args: string[]): Promise<ServeProcess> {
  const child = execa('node', [LAUNCHER_BIN, ...args], { reject: false, env: cleanEnv(), extendEnv: false });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (/metrics: curl/.test(out)) resolve();
    });
    void child.then((r) => reject(new Error(`exited early (${r.exitCode}): ${r.stderr}`)));
  });
  const port = (what: string) => new RegExp(`Started ${what} at 127\\.0\\.0\\.1:(\\d+)`).exec(out)![1]!;
  return { child, output: out, httpPort: port('HTTPService'), metricsPort: port('Metrics Service') };
}
