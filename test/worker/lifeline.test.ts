// A rank's lifeline on real processes: a process bound with PR_SET_PDEATHSIG dies when its parent is SIGKILLed, and
// a rank watching its launcher dies when the launcher does — but never for a pid that is not its launcher's (the
// start time differs: a reused pid) or a launcher it cannot see.
import { hostname } from 'node:os';
import { join } from 'node:path';

import { execa, type ResultPromise } from 'execa';
import t from 'tap';

import { formatLauncherIdentity, LAUNCHER_ENV, processStartTime } from '../../worker/common/launcher-identity.js';
import { packageRoot } from '../../worker/common/package-root.js';
import { processesWith } from '../helpers/processes.js';
import { waitFor } from '../helpers/wait.js';

const program = join(packageRoot(), 'dist', 'test', 'programs', 'lifeline-child.js');
const alive = (pid: number) => processesWith('').some((p) => p.pid === pid);

/** The first line of a child's stdout that matches `pattern` (its acknowledgement). */
function line(child: ResultPromise, pattern: RegExp): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
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
