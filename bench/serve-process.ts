// A one-rank server started as a user starts it (`trtllm-launch --model ... --http-port 0 ...`), for benchmarks
// that measure it from outside: resolves with its startup output once it prints its endpoints, from which each
// benchmark reads the ports it needs.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

export async function startServeProcess(root: string, args: string[]): Promise<{ child: ChildProcess; out: string }> {
  const child = spawn('node', [join(root, 'bin', 'trtllm-launch.js'), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => { out += c.toString(); if (out.includes('metrics: curl')) resolve(); });
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
  return { child, out };
}
