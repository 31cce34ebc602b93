// kill -9 of the launcher (issue 22, case 1): the cluster must not live on without it — orphaned, still serving, its
// ports taken so that the next start on them fails. The end of mpirun's stdin (the launcher's pipe) reaches rank 0,
// which stops, and mpirun ends the job in order; every rank is also bound to its parent and watches the launcher
// (worker/lifeline.ts). How fast it all goes is measured in bench/launcher-overhead.ts; here: that it goes, and
// leaves nothing.
import t from 'tap';

import { launchCluster } from '../../helpers/launched-cluster.js';
import { openMpiFilesLeft, portsFree } from '../../helpers/open-mpi-job.js';
import { processesWith } from '../../helpers/processes.js';
import { waitFor } from '../../helpers/wait.js';

t.test('kill -9 of the launcher: mpirun and every rank go, the ports are free, nothing of Open MPI is left', async (t) => {
  const cluster = await launchCluster();
  t.teardown(() => { cluster.child.kill('SIGKILL'); });
  const ready = await cluster.ready;
  t.ok(ready, ready ? 'ready' : `not ready: ${cluster.output().slice(-1500)}`);
  const job = await cluster.job();
  t.ok(job, 'the Open MPI job is known');
  const ports = [cluster.ports.http, cluster.ports.metrics, cluster.ports.grpc];
  t.ok((await fetch(`http://127.0.0.1:${cluster.ports.http}/v2/health/ready`)).ok, 'serving');
  t.ok(processesWith(cluster.marker).length >= 4, 'launcher, mpirun and two ranks run');

  cluster.child.kill('SIGKILL');
  await cluster.child;
  t.ok(await waitFor(() => processesWith(cluster.marker).length === 0), 'no mpirun and no rank outlives the launcher');
  t.same(processesWith(cluster.marker).map((p) => p.cmd.slice(0, 80)), []);
  t.ok(await waitFor(() => portsFree(ports)), 'the HTTP, gRPC and metrics ports are free');
  t.ok(await waitFor(() => openMpiFilesLeft(job!).length === 0), 'mpirun removed its session directory and shared memory');
  t.same(openMpiFilesLeft(job!), []);

  // What the user tries next: a start on the same ports.
  const next = await launchCluster([], {}, cluster.ports);
  t.teardown(() => { next.child.kill('SIGKILL'); });
  const again = await next.ready;
  t.ok(again, again ? 'a new cluster starts on the same ports' : `no new cluster on the same ports: ${next.output().slice(-1500)}`);
  next.child.kill('SIGINT');
  t.equal((await next.child).exitCode, 0, 'and stops cleanly');
});
