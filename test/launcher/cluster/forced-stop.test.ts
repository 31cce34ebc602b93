// The ends of a cluster that are not its own orderly stop (issue 22, case 3): a forced stop (a second Ctrl-C while
// the leader drains) and mpirun killed. In both, every rank is gone by the time the launcher has exited — none lives
// on to answer or stream after the launcher reported the failure — and nothing of Open MPI of that job is left in
// /tmp or /dev/shm (a killed mpirun cannot remove its files: the launcher does). Asserted at the launcher's exit,
// not after a wait: the launcher itself waits for its ranks to be gone before it reports.
import t from 'tap';

import { launchCluster } from '../../helpers/launched-cluster.js';
import { openMpiFilesLeft } from '../../helpers/open-mpi-job.js';
import { processesWith } from '../../helpers/processes.js';

t.test('second Ctrl-C while the leader drains: every rank killed at once, no Open MPI file left', async (t) => {
  const cluster = await launchCluster(['--drain-timeout', '600']);
  t.teardown(() => { cluster.child.kill('SIGKILL'); });
  t.ok(await cluster.ready, 'ready');
  const job = await cluster.job();
  const leader = Number((await cluster.line(/leader pid (\d+) on /))[1]);
  // A leader that does not finish its drain (stopped, here): what a user presses Ctrl-C a second time for.
  process.kill(leader, 'SIGSTOP');
  cluster.child.kill('SIGINT');
  await cluster.line(/\[launcher\] SIGINT: draining the leader/);
  cluster.child.kill('SIGINT');
  const result = await cluster.child;
  t.match(cluster.output(), /\[launcher\] SIGINT again: killing every rank now/);
  t.not(result.exitCode, 0, `a forced stop is no clean stop (exit ${result.exitCode})`);
  t.same(processesWith(cluster.marker).map((p) => p.cmd.slice(0, 80)), [], 'no mpirun and no rank outlived the launcher');
  t.same(openMpiFilesLeft(job!), [], 'no session directory, no shared-memory segment of the job');
});

t.test('mpirun killed: every rank gone with it, no Open MPI file left, the cause reported', async (t) => {
  const cluster = await launchCluster();
  t.teardown(() => { cluster.child.kill('SIGKILL'); });
  t.ok(await cluster.ready, 'ready');
  const job = await cluster.job();
  process.kill(job!.mpirunPid, 'SIGKILL');
  const result = await cluster.child;
  t.not(result.exitCode, 0);
  t.match(cluster.output(), /Root cause:\n\s+mpirun exited with signal SIGKILL/);
  t.same(processesWith(cluster.marker).map((p) => p.cmd.slice(0, 80)), [], 'no rank outlived mpirun and the launcher');
  t.same(openMpiFilesLeft(job!), [], 'the launcher removed what mpirun could not');
  t.match(cluster.output(), /\[launcher\] removed what mpirun could not: .*pid\.\d+/);
});
