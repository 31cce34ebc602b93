// Test helpers for real clusters: a free TCP port, and the processes of this machine that belong to a test (found
// in /proc by a marker in their command line or environment), so a test can prove nothing was left behind.
import { readdirSync, readFileSync } from 'node:fs';
export { freePort } from './free-port.js';


/** Live (non-zombie) processes whose command line — or, with `inEnv`, environment — contains `marker`. */
export function processesWith(marker: string, inEnv = false): { pid: number; cmd: string }[] {
  const out: { pid: number; cmd: string }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2)[0] === 'Z') continue;
      const where = inEnv ? readFileSync(`/proc/${entry}/environ`, 'utf8') : cmd;
      if (where.includes(marker)) out.push({ pid: Number(entry), cmd });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
