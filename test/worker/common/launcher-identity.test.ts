// The launcher's identity as its ranks carry it: written and read back the same, and a live process told from a
// later one with its pid (the start time differs).
import { hostname } from 'node:os';

import t from 'tap';

import {
  formatLauncherIdentity, launcherAlive, ownIdentity, parseLauncherIdentity, processStartTime,
} from '../../../worker/common/launcher-identity.js';

t.test('format and parse', async (t) => {
  const id = { host: 'node-17.cluster', pid: 4242, startTime: '123456' };
  t.equal(formatLauncherIdentity(id), 'node-17.cluster:4242:123456');
  t.same(parseLauncherIdentity(formatLauncherIdentity(id)), id);
  for (const bad of [undefined, '', 'host:12', 'host:x:1', ':12:34', 'h:12:34x']) t.equal(parseLauncherIdentity(bad), undefined, `${bad} is no identity`);
});

t.test('this process: its own identity, alive; the same pid with another start time is not it', async (t) => {
  const own = parseLauncherIdentity(ownIdentity())!;
  t.same({ host: own.host, pid: own.pid }, { host: hostname(), pid: process.pid });
  t.match(own.startTime, /^\d+$/);
  t.equal(processStartTime(process.pid), own.startTime);
  t.ok(launcherAlive(own));
  t.notOk(launcherAlive({ ...own, startTime: String(Number(own.startTime) + 1) }), 'a reused pid is not the launcher');
  t.equal(processStartTime(2 ** 22 + 1), undefined, 'no such process');
});
