// The launch plan (pure): the exact program, arguments, environment and --dry-run lines for mpirun, srun and the
// orchestrator, from fixed facts. Expected values are written here rather than generated snapshots: tap keys a
// snapshot file by the compiled test's path under dist/, and these read as the documentation of the command lines.
import t from 'tap';

import { type LaunchFacts, type LaunchPlanOptions, planLaunch, portChecks } from '../../../launcher/cluster/launch-plan.js';

const base: LaunchPlanOptions = {
  parallel: { worldSize: 4, tp: 2, pp: 2 }, host: '0.0.0.0', httpPort: 8000, metricsPort: 8002, grpcPort: 8001,
  oversubscribe: true, rankOptions: ['--model', '/m/llama', '--threads', '1'],
};
const facts: LaunchFacts = {
  starter: { kind: 'mpirun', path: '/usr/bin/mpirun', flavor: 'openmpi' }, packageRoot: '/opt/trtllm-launch',
  nodePath: '/usr/bin/node', isRoot: true, hostname: 'h1', env: { PATH: '/usr/bin', TRTLLM_API_KEY: 'k' },
};
const BIN = '/opt/trtllm-launch/bin/trtllm-launch.js';

t.test('mpirun (Open MPI): tp 2 x pp 2 as root, what --dry-run prints', async (t) => {
  const plan = planLaunch(base, facts);
  t.equal(plan.file, '/usr/bin/mpirun');
  t.same(plan.args, [
    '-np', '4', '--tag-output', '--bind-to', 'none', '--mca', 'odls_base_sigkill_timeout', '0', '--oversubscribe', '--allow-run-as-root',
    '-x', 'PATH', '-x', 'OMP_NUM_THREADS', '-x', 'TRTLLM_API_KEY',
    '/usr/bin/node', BIN, 'rank', '--tp', '2', '--pp', '2', '--model', '/m/llama', '--threads', '1',
  ], 'only the variables that are set are forwarded; OMP_NUM_THREADS always is');
  t.same(plan.env, { OMP_NUM_THREADS: '1' });
  t.same({ np: plan.np, launcher: plan.launcher, leaderReportsExit: plan.leaderReportsExit, ranksShown: plan.ranksShown },
    { np: 4, launcher: 'mpirun', leaderReportsExit: false, ranksShown: undefined });
  t.same(plan.dryRunLines, [
    `/usr/bin/mpirun -np 4 --tag-output --bind-to none --mca odls_base_sigkill_timeout 0 --oversubscribe --allow-run-as-root -x PATH -x OMP_NUM_THREADS -x TRTLLM_API_KEY /usr/bin/node ${BIN} rank --tp 2 --pp 2 --model /m/llama --threads 1`,
    'rank 0: tp_rank 0, pp_rank 0; leader: HTTP 0.0.0.0:8000, gRPC :8001, metrics :8002; env OMP_NUM_THREADS=1',
    'rank 1: tp_rank 1, pp_rank 0; follower: no ports; env OMP_NUM_THREADS=1',
    'rank 2: tp_rank 0, pp_rank 1; follower: no ports; env OMP_NUM_THREADS=1',
    'rank 3: tp_rank 1, pp_rank 1; follower: no ports; env OMP_NUM_THREADS=1',
  ]);
  t.equal(plan.readyUrl(undefined), 'http://127.0.0.1:8000/v2/health/ready', 'a wildcard host is checked on loopback');
  t.same(plan.readyBanner(undefined), [
    'serving on http://localhost:8000 (tp 2 x pp 2), metrics on http://localhost:8002/metrics',
    `  curl -X POST localhost:8000/v2/models/ensemble/generate -d '{"text_input": "What is machine learning?", "max_tokens": 20, "bad_words": "", "stop_words": ""}'`,
    '  Ctrl-C drains and stops every rank',
  ]);
});

t.test('the all-reduce settings reach every rank when they are set (a tp group must agree on its path)', async (t) => {
  const env = { ...facts.env, TRTLLM_ALL_REDUCE: 'nccl', TRTLLM_PEER_BLOCKS: '64' };
  const args = planLaunch(base, { ...facts, env }).args;
  const forwarded = args.flatMap((a, i) => (args[i - 1] === '-x' ? [a] : []));
  t.same(forwarded, ['PATH', 'OMP_NUM_THREADS', 'TRTLLM_API_KEY', 'TRTLLM_ALL_REDUCE', 'TRTLLM_PEER_BLOCKS']);
});

t.test('mpirun: a user, a hostfile, the caller\'s OMP_NUM_THREADS, MPICH\'s spelling', async (t) => {
  const user = planLaunch({ ...base, parallel: { worldSize: 2, tp: 2, pp: 1 }, oversubscribe: false, hostfile: '/etc/hosts list', grpcPort: undefined, host: '10.0.0.5' },
    { ...facts, isRoot: false, env: { OMP_NUM_THREADS: '4' } });
  t.same(user.dryRunLines, [
    `/usr/bin/mpirun -np 2 --tag-output --bind-to none --mca odls_base_sigkill_timeout 0 --hostfile '/etc/hosts list' -x OMP_NUM_THREADS /usr/bin/node ${BIN} rank --tp 2 --pp 1 --model /m/llama --threads 1`,
    'rank 0: tp_rank 0, pp_rank 0; leader: HTTP 10.0.0.5:8000, metrics :8002; env OMP_NUM_THREADS=4',
    'rank 1: tp_rank 1, pp_rank 0; follower: no ports; env OMP_NUM_THREADS=4',
  ]);
  t.same(user.env, { OMP_NUM_THREADS: '4' });
  t.equal(user.readyUrl(undefined), 'http://10.0.0.5:8000/v2/health/ready', 'a named host is checked as named');
  t.match(user.readyBanner(undefined)[0], /^serving on http:\/\/10\.0\.0\.5:8000 /);
  const mpich = planLaunch({ ...base, hosts: 'a,b' }, { ...facts, starter: { kind: 'mpirun', path: 'mpiexec.hydra', flavor: 'mpich' } });
  t.same(mpich.args.slice(0, 7), ['-n', '4', '-prepend-rank', '-hosts', 'a,b', '-genvlist', 'PATH,OMP_NUM_THREADS,TRTLLM_API_KEY']);
});

t.test('srun: pmix, the job\'s cpus per task as --threads, a container, the endpoint named by this node', async (t) => {
  const env = { SLURM_JOB_ID: '17', SLURM_CPUS_PER_TASK: '8' };
  const plan = planLaunch({ ...base, rankOptions: ['--model', '/m/llama'], srunArgs: "--container-image=nvcr.io#img --container-mounts='/a:/a'" },
    { ...facts, starter: { kind: 'srun', path: '/usr/bin/srun', plugin: 'pmix' }, env });
  t.equal(plan.file, '/usr/bin/srun');
  t.same(plan.args, [
    '--mpi=pmix', '-n', '4', '--cpus-per-task=8', '--label', '--kill-on-bad-exit=1', '--export=ALL',
    '--container-image=nvcr.io#img', '--container-mounts=/a:/a',
    'node', BIN, 'rank', '--tp', '2', '--pp', '2', '--model', '/m/llama', '--threads', '8',
  ], "inside a container, the image's node");
  t.same(plan.env, { OMP_NUM_THREADS: '1', TRTLLM_RANK_LAUNCHER: 'srun' });
  t.equal(plan.launcher, 'srun');
  t.equal(plan.readyUrl('10.1.0.2'), 'http://10.1.0.2:8000/v2/health/ready', 'the leader\'s address, once it said where it runs');
  t.same(plan.readyBanner('node2'), [
    'serving on http://node2:8000 (tp 2 x pp 2), metrics on http://node2:8002/metrics',
    `  curl -X POST node2:8000/v2/models/ensemble/generate -d '{"text_input": "What is machine learning?", "max_tokens": 20, "bad_words": "", "stop_words": ""}'`,
    '  Ctrl-C (from a login node: trtllm-launch slurm stop 17) drains and stops every rank',
  ]);
  t.match(plan.readyBanner(undefined)[0], /^serving on http:\/\/h1:8000 /, 'before the leader says where it runs: this node, not localhost');
  const own = planLaunch(base, { ...facts, starter: { kind: 'srun', path: 'srun', plugin: 'pmi2' }, env });
  t.same(own.args.slice(-4), ['--model', '/m/llama', '--threads', '1'], 'an explicit --threads wins over cpus per task');
  t.equal(own.args[0], '--mpi=pmi2');
  t.ok(own.args.includes('/usr/bin/node'), 'without a container, this node binary');
});

t.test('orchestrator mode: the orchestrated program, its roles, recovery flags and the spawned count', async (t) => {
  const orchestrated = {
    np: 1, env: { TRTLLM_PLAN: '{}' }, roles: ['rank 0: orchestrator', 'a: tp 2 x pp 1 (spawned)'], spawned: 2,
    banner: (host: string) => [`serving 1 model(s) on http://${host}:8000`],
  };
  const plan = planLaunch({ ...base, parallel: { worldSize: 1, tp: 1, pp: 1 }, rankOptions: [], orchestrated }, { ...facts, env: {} });
  t.same(plan.args, [
    '-np', '1', '--tag-output', '--bind-to', 'none', '--mca', 'odls_base_sigkill_timeout', '0', '--oversubscribe', '--allow-run-as-root',
    '--enable-recovery', '-x', 'OMP_NUM_THREADS', '-x', 'TRTLLM_PLAN', '/usr/bin/node', BIN, 'orchestrated',
  ]);
  t.same(plan.env, { OMP_NUM_THREADS: '1', TRTLLM_PLAN: '{}' });
  t.same(plan.dryRunLines.slice(1), orchestrated.roles);
  t.same({ np: plan.np, ranksShown: plan.ranksShown, leaderReportsExit: plan.leaderReportsExit }, { np: 1, ranksShown: '1 rank(s) + 2 spawned', leaderReportsExit: true });
  t.equal(plan.readyUrl(undefined), 'http://127.0.0.1:8000/v2/health/live', 'the orchestrator is up once live');
  t.same(plan.readyBanner(undefined), ['serving 1 model(s) on http://localhost:8000']);
  const noSpawn = planLaunch({ ...base, rankOptions: [], orchestrated: { ...orchestrated, np: 4, spawned: 0 } },
    { ...facts, starter: { kind: 'srun', path: 'srun', plugin: 'pmix' }, env: { SLURM_CPUS_PER_TASK: '2' } });
  t.same(noSpawn.args, ['--mpi=pmix', '-n', '4', '--cpus-per-task=2', '--label', '--kill-on-bad-exit=0', '--export=ALL', '/usr/bin/node', BIN, 'orchestrated'],
    'no --threads for the orchestrated program; the step survives a failed task');
  t.equal(noSpawn.ranksShown, undefined);
});

t.test('the launcher\'s lifeline: mpirun\'s stdin (forwarded to rank 0), srun under setpriv --pdeathsig TERM', async (t) => {
  const lifeline = { ...facts, setpriv: '/usr/bin/setpriv', launcherIdentity: 'h1:4242:99' };
  const plain = planLaunch({ ...base, parallel: { worldSize: 2, tp: 2, pp: 1 } }, facts);
  const plan = planLaunch({ ...base, parallel: { worldSize: 2, tp: 2, pp: 1 } }, lifeline);
  t.same([plan.file, plan.args], [plain.file, plain.args], 'mpirun runs as it did: a second SIGTERM would make it exit without its cleanup');
  t.equal(plan.stdinLifeline, true, 'its stdin is the launcher\'s pipe');
  t.equal(plain.stdinLifeline, false, 'not without an identity for the ranks to check');
  t.same(plan.env, { OMP_NUM_THREADS: '1', TRTLLM_LAUNCHED_BY: 'h1:4242:99', TRTLLM_LIFELINE_STDIN: '1' }, 'not forwarded with -x: only ranks on this host watch a pid');
  t.notOk(plan.args.includes('TRTLLM_LAUNCHED_BY'));
  const srun = planLaunch(base, { ...lifeline, starter: { kind: 'srun', path: '/usr/bin/srun', plugin: 'pmix' } });
  t.same([srun.file, ...srun.args.slice(0, 4)], ['/usr/bin/setpriv', '--pdeathsig', 'TERM', '/usr/bin/srun', '--mpi=pmix'], 'srun kills its tasks on any SIGTERM');
  t.equal(srun.stdinLifeline, false, 'srun gives stdin to every task: no lifeline there');
  t.same(srun.env, { OMP_NUM_THREADS: '1', TRTLLM_RANK_LAUNCHER: 'srun', TRTLLM_LAUNCHED_BY: 'h1:4242:99' });
  t.match(srun.dryRunLines[0], /^\/usr\/bin\/setpriv --pdeathsig TERM \/usr\/bin\/srun --mpi=pmix /, '--dry-run prints what runs');
});

t.test('the ports checked before any rank starts', async (t) => {
  t.same(portChecks(base, 'mpirun'), [
    { port: 8000, option: '--http-port' }, { port: 8002, option: '--metrics-port' }, { port: 8001, option: '--grpc-port' },
  ]);
  t.same(portChecks({ ...base, grpcPort: undefined }, 'mpirun').map((c) => c.option), ['--http-port', '--metrics-port']);
  t.same(portChecks(base, 'srun'), [], 'under srun the leader binds them on its own node');
});
