// A port taken after the launcher checked it free, before rank 0 binds it (issue 22, case 3 — another server started
// meanwhile): the whole cluster ends at once, not at --startup-timeout, with that port as the root cause, and rank 0
// does not live on holding the ports it did bind. The window is opened on purpose: the launcher holds between its
// check and the start of the ranks (TRTLLM_TEST_HOLD_AFTER_PORT_CHECK, a test-only variable), the test takes the
// port, then lets it go on — ordered by acknowledgements, not by the clock.
import { createServer, type Server } from 'node:net';

import t from 'tap';

import { PORT_CHECK_HOLD_ENV, PORT_CHECK_HOLD_LINE } from '../../../launcher/cluster/port-check-hold.js';
import { launchCluster } from '../../helpers/launched-cluster.js';
import { portsFree } from '../../helpers/open-mpi-job.js';
import { processesWith } from '../../helpers/processes.js';

function take(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '0.0.0.0', () => resolve(server));
  });
}

for (const option of ['--metrics-port', '--grpc-port'] as const) {
  t.test(`${option} taken after the check: the cluster ends at once naming it`, async (t) => {
    const cluster = await launchCluster([], { stdin: 'pipe', env: { [PORT_CHECK_HOLD_ENV]: '1' } });
    t.teardown(() => { cluster.child.kill('SIGKILL'); });
    await cluster.line(new RegExp(PORT_CHECK_HOLD_LINE.replace(/[[\]().;]/g, '\\$&')));
    const port = option === '--metrics-port' ? cluster.ports.metrics : cluster.ports.grpc;
    const blocker = await take(port);
    t.teardown(() => { blocker.close(); });
    cluster.child.stdin!.write('go\n');

    const result = await cluster.child;
    t.not(result.exitCode, 0, `non-zero exit (${result.exitCode})`);
    t.match(cluster.output(), new RegExp(`Root cause:\\n\\s+rank 0: exit code \\d+: ${option} ${port} on 0\\.0\\.0\\.0 cannot be bound`),
      'the root cause names the option and the port');
    t.notMatch(cluster.output(), /not ready after/, 'ended by the failure, not by --startup-timeout');
    t.notMatch(cluster.output(), /\[launcher\] ready after/, 'never reported ready');
    t.same(processesWith(cluster.marker).map((p) => p.cmd.slice(0, 80)), [], 'no rank outlived the launcher');
    const others = [cluster.ports.http, cluster.ports.metrics, cluster.ports.grpc].filter((p) => p !== port);
    t.ok(await portsFree(others), 'rank 0 holds none of the ports it did bind');
  });
}
