// A rank's lifeline on real processes: a process bound with PR_SET_PDEATHSIG dies when its parent is SIGKILLed; a
// rank watching its launcher dies when the launcher does — or at once when the launcher died before it started — but
// never for a pid that is not its launcher's (the start time differs: a reused pid) or a launcher it cannot see; and
// rank 0 stops when the launcher's stdin pipe (forwarded by mpirun) ends.
import { hostname } from 'node:os';
import { join } from 'node:path';

import { execa, type ResultPromise } from 'execa';
import t from 'tap';

import { formatLauncherIdentity, LAUNCHER_ENV, LIFELINE_STDIN_ENV, processStartTime } from '../../worker/common/launcher-identity.js';
import { packageRoot } from '../../worker/common/package-root.js';
import { processesWith } from '../helpers/processes.js';
import { waitFor } from '../helpers/wait.js';

const program = join(packageRoot(), 'dist', 'test', 'programs', 'lifeline-child.js');
const alive = (pid: number) => processesWith('').some((p) => p.pid === pid);

/** The first match of `pattern` in a child's stdout (or stderr): its acknowledgement. Call it before any await:
 * execa reads the child's output from the start. */
function line(child: ResultPromise, pattern: RegExp, stream: 'stdout' | 'stderr' = 'stdout'): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let out = '';
    child[stream]!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const m = pattern.exec(out);
      if (m) resolve(m);
    });
    void child.then(() => reject(new Error(`exited before printing ${pattern}: ${out}`)));
  });
}

t.test('setParentDeathSignal: the child goes the moment its parent is SIGKILLed', async (t) => {
  const parent = execa(process.execPath, [program, 'parent'], { reject: false });
  t.teardown(() => { parent.kill('SIGKILL'); });
  const child = Number((await line(parent, /bound (\d+)\n/))[1]);
  t.ok(alive(child), 'the bound child runs');
  parent.kill('SIGKILL');
  await parent;
  t.ok(await waitFor(() => !alive(child)), 'the child is gone with its parent');
});

t.test('watchLauncher: a rank stops when its launcher is gone; never for a pid that is not its launcher', async (t) => {
  const launcher = execa(process.execPath, ['-e', 'setInterval(() => {}, 60000)'], { reject: false });
  t.teardown(() => { launcher.kill('SIGKILL'); });
  const identity = { host: hostname(), pid: launcher.pid!, startTime: processStartTime(launcher.pid!)! };
  // The acknowledgement is listened for from the start: execa reads stdout as soon as the child runs.
  const watch = (id: string) => {
    const child = execa(process.execPath, [program, 'watch'], { reject: false, env: { [LAUNCHER_ENV]: id } });
    return Object.assign(child, { watching: line(child, /watching (\w+)\n/).then((m) => m[1]) });
  };

  const reused = watch(formatLauncherIdentity({ ...identity, startTime: String(Number(identity.startTime) + 1) }));
  const elsewhere = watch(formatLauncherIdentity({ ...identity, host: `not-${hostname()}` }));
  const rank = watch(formatLauncherIdentity(identity));
  t.teardown(() => { for (const c of [reused, elsewhere, rank]) c.kill('SIGKILL'); });
  t.equal(await reused.watching, 'false', 'same pid, another start time: not its launcher');
  t.equal(await elsewhere.watching, 'false', 'a launcher on another host is not watched by pid');
  t.equal(await rank.watching, 'true', 'its launcher is watched');

  launcher.kill('SIGKILL');
  await launcher;
  const result = await rank;
  t.equal(result.signal, 'SIGKILL', 'the rank killed itself once its launcher was gone');
  t.match(result.stderr, new RegExp(`the launcher \\(pid ${identity.pid} on ${hostname()}\\) is gone: this rank stops`), 'it says why');
  t.ok(alive(reused.pid!) && alive(elsewhere.pid!), 'the others run on');
});

t.test('watchLauncher at the start: a launcher already gone ends the rank when its parent was started by it', async (t) => {
  const launcher = execa(process.execPath, ['-e', 'setInterval(() => {}, 60000)'], { reject: false });
  const identity = formatLauncherIdentity({ host: hostname(), pid: launcher.pid!, startTime: processStartTime(launcher.pid!)! });
  launcher.kill('SIGKILL');
  await launcher;
  // Its parent (mpirun, here a stand-in) carries the same identity: the same pid namespace, so the launcher is gone.
  const orphaned = execa(process.execPath, [program, 'parent', 'watch'], { reject: false, env: { [LAUNCHER_ENV]: identity } });
  const stopped = line(orphaned, /the launcher \(pid \d+ on \S+\) is gone: this rank stops/, 'stderr');
  // Started by the test, whose environment has no identity: the launcher may just be invisible from here.
  const unsure = execa(process.execPath, [program, 'watch'], { reject: false, env: { [LAUNCHER_ENV]: identity } });
  const unsureWatching = line(unsure, /watching (\w+)\n/);
  t.teardown(() => { for (const c of [orphaned, unsure]) c.kill('SIGKILL'); });
  t.ok(await stopped, 'the rank under the launcher\'s child stopped at once');
  t.equal((await unsureWatching)[1], 'false', 'a rank that cannot tell is not stopped');
  t.ok(alive(unsure.pid!), 'and runs on');
});

t.test('watchLauncherStdin: rank 0 stops when the launcher\'s pipe ends', async (t) => {
  const rank = execa(process.execPath, [program, 'stdin'], { reject: false, stdin: 'pipe', env: { [LIFELINE_STDIN_ENV]: '1' } });
  const other = execa(process.execPath, [program, 'stdin'], { reject: false, stdin: 'pipe' });
  const [rankWatching, otherWatching] = [line(rank, /watching (\w+)\n/), line(other, /watching (\w+)\n/)];
  t.teardown(() => { for (const c of [rank, other]) c.kill('SIGKILL'); });
  t.equal((await rankWatching)[1], 'true', 'rank 0 watches its stdin');
  t.equal((await otherWatching)[1], 'false', 'only where the launcher said its stdin is the lifeline');
  rank.stdin!.end();
  const result = await rank;
  t.equal(result.signal, 'SIGKILL', 'it stopped at the end of its stdin');
  t.match(result.stderr, /the launcher's stdin pipe closed \(the launcher is gone\): this rank stops/);
  other.stdin!.end();
  t.ok(alive(other.pid!), 'the other one did not');
});
