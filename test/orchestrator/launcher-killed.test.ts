// kill -9 of the launcher in orchestrator mode (issue 22, case 1): the orchestrator and every worker group it spawned
// (separate Open MPI jobs of the same mpirun) go, the ports are free, nothing of Open MPI of that mpirun is left.
// The orchestrator is rank 0, which mpirun gives the launcher's stdin pipe; the groups watch the orchestrator.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';

import { fixtureDir } from '../helpers/fixtures.js';
import { startLauncher } from '../helpers/launched-cluster.js';
import { openMpiFilesLeft, openMpiJob, portsFree, type OpenMpiJob } from '../helpers/open-mpi-job.js';
import { freePort, processesWith } from '../helpers/processes.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait.js';

t.test('kill -9 of the launcher: the orchestrator and every spawned group go, the ports are free', async (t) => {
  const repo = tempDir('trtllm-repo-', t);
  writeFileSync(join(repo, 'alpha.yaml'), `model: ${fixtureDir('tiny-llama')}\nparallel:\n  tp: 2\nkv_cache:\n  tokens_per_block: 16\n`);
  writeFileSync(join(repo, 'beta.yaml'), `model: ${fixtureDir('tiny-gpt2')}\nkv_cache:\n  tokens_per_block: 16\n`);
  const ports = [await freePort(), await freePort(), await freePort()];
  const launcher = startLauncher(['--multi-model', '--model-repo', repo, '--oversubscribe', '--threads', '1',
    '--http-port', String(ports[0]), '--metrics-port', String(ports[1]), '--grpc-port', String(ports[2])]);
  const { child } = launcher;
  t.teardown(() => { child.kill('SIGKILL'); });
  t.ok(await launcher.ready, 'ready');
  // Every process of the job carries the plan, with this unique port, in its environment (spawned ones included).
  const marker = `"httpPort":${ports[0]},`;
  t.ok(await waitFor(() => processesWith(marker, true).length >= 5), 'mpirun, the orchestrator and three group ranks run');
  let job: OpenMpiJob | undefined;
  t.ok(await waitFor(() => (job = openMpiJob(marker, true)) !== undefined), 'the Open MPI job is known');

  child.kill('SIGKILL');
  await child;
  t.ok(await waitFor(() => processesWith(marker, true).length === 0), 'no mpirun, orchestrator or group rank outlives the launcher');
  t.same(processesWith(marker, true).map((p) => p.cmd.slice(0, 80)), []);
  t.ok(await waitFor(() => portsFree(ports)), 'the HTTP, gRPC and metrics ports are free');
  t.ok(await waitFor(() => openMpiFilesLeft(job!).length === 0), 'mpirun removed the files of every job it ran');
  t.same(openMpiFilesLeft(job!), []);
});
