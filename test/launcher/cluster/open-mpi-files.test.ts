// Open MPI's files of one mpirun, removed when a killed mpirun left them: exactly that mpirun's session directory and
// its jobs' shared-memory segments (spawned jobs included) — never another job's, another user's, or an older mpirun's
// that had the same pid. On a scratch layout, since other jobs on this machine write the real /tmp and /dev/shm.
import { existsSync, mkdirSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';

import { isVaderSegmentOf, jobFamilyOfContact, removeOpenMpiFiles } from '../../../launcher/cluster/open-mpi-files.js';
import { tempDir } from '../../helpers/temp-dir.js';

t.test('parsing: the job family of contact.txt, a segment of that family and user', async (t) => {
  t.equal(jobFamilyOfContact('640090112.0;tcp://192.0.2.2:57497;tcp6://[fd00::2]:36429'), 0x2627);
  t.equal(jobFamilyOfContact(''), undefined);
  t.ok(isVaderSegmentOf('vader_segment.vm.0.26270001.0', 0x2627, 0));
  t.ok(isVaderSegmentOf('vader_segment.node.a.b.1000.26270003.12', 0x2627, 1000), 'a spawned job (3), a dotted host name');
  t.notOk(isVaderSegmentOf('vader_segment.vm.0.24e70001.0', 0x2627, 0), 'another job family');
  t.notOk(isVaderSegmentOf('vader_segment.vm.1000.26270001.0', 0x2627, 0), 'another user');
  t.notOk(isVaderSegmentOf('sem.vader_segment', 0x2627, 0));
});

t.test('removal: this mpirun\'s session directory and segments only', async (t) => {
  const root = tempDir('trtllm-ompi-files-', t);
  const layout = { tmp: join(root, 'tmp'), shm: join(root, 'shm'), uid: process.getuid?.() ?? 0 };
  const top = join(layout.tmp, `ompi.vm.${layout.uid}`);
  const ours = join(top, 'pid.4242');
  const other = join(top, 'pid.5151');
  for (const dir of [join(ours, '1', '0'), join(other, '1'), layout.shm]) mkdirSync(dir, { recursive: true });
  writeFileSync(join(ours, 'contact.txt'), '640090112.0;tcp://127.0.0.1:1');
  writeFileSync(join(other, 'contact.txt'), '619118592.0;tcp://127.0.0.1:2');
  const segments = ['26270001.0', '26270001.1', '26270002.0', '24e70001.0'].map((s) => `vader_segment.vm.${layout.uid}.${s}`);
  for (const s of segments) writeFileSync(join(layout.shm, s), '');
  const since = Date.now();

  t.same(removeOpenMpiFiles(4242, since, layout).sort(), [
    ours, ...segments.slice(0, 3).map((s) => join(layout.shm, s)),
  ].sort(), 'the session directory and the segments of its two jobs');
  t.notOk(existsSync(ours));
  t.ok(existsSync(other), 'another mpirun\'s session directory stays');
  t.same(readdirSync(layout.shm), [segments[3]], 'another job family\'s segment stays');
  t.same(removeOpenMpiFiles(4242, since, layout), [], 'nothing left: nothing removed');

  // An older mpirun had pid 5151 before: its directory predates this launch and is not this job's.
  utimesSync(other, new Date(since - 3_600_000), new Date(since - 3_600_000));
  t.same(removeOpenMpiFiles(5151, since, layout), []);
  t.ok(existsSync(other));
});
