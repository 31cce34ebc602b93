// Pure planning: tp/pp/world resolution, the exact mpirun command lines (snapshots written here, not generated),
// rank output parsing and Triton's flag spellings.
import t from 'tap';

import { chooseLauncher, mpiFlavor, mpirunCommand, shellQuote, srunCommand, srunMpiPlugin } from '../../../launcher/cluster/mpirun-command.js';
import { resolveExperts, resolveParallel } from '../../../launcher/cluster/parallel-plan.js';
import { parseMpirunFailure, parseRankLine, RankTail } from '../../../launcher/cluster/rank-output.js';
import { normalizeTritonSpellings } from '../../../launcher/triton-spellings.js';

t.test('world size, tp and pp', async (t) => {
  t.same(resolveParallel({}), { worldSize: 1, tp: 1, pp: 1 });
  t.same(resolveParallel({ worldSize: 4 }), { worldSize: 4, tp: 4, pp: 1 }, 'world size alone: tensor parallel');
  t.same(resolveParallel({ tp: 2, pp: 2 }), { worldSize: 4, tp: 2, pp: 2 });
  t.same(resolveParallel({ worldSize: 4, pp: 2 }), { worldSize: 4, tp: 2, pp: 2 });
  t.throws(() => resolveParallel({ worldSize: 3, tp: 2, pp: 2 }), /--world-size 3 does not equal --tp 2 x --pp 2 = 4/);
  t.throws(() => resolveParallel({ worldSize: 3, tp: 2 }), /--world-size 3 is not a multiple of --tp 2/);
});

t.test('the experts\' split within tp: tp = moe_tp x ep', async (t) => {
  t.same(resolveExperts(4, {}), { ep: 1, moeTp: 4 }, 'neither: each expert split over every tp rank');
  t.same(resolveExperts(4, { ep: 2 }), { ep: 2, moeTp: 2 });
  t.same(resolveExperts(4, { moeTp: 1 }), { ep: 4, moeTp: 1 }, '--moe-tp 1: whole experts, spread over the ranks');
  t.same(resolveExperts(4, { ep: 2, moeTp: 2 }), { ep: 2, moeTp: 2 });
  t.throws(() => resolveExperts(4, { ep: 3 }), /--ep 3 does not divide --tp 4/);
  t.throws(() => resolveExperts(4, { moeTp: 3 }), /--moe-tp 3 does not divide --tp 4/);
  t.throws(() => resolveExperts(4, { ep: 4, moeTp: 2 }), /--moe-tp 2 x --ep 4 = 8 does not equal --tp 4/);
});

t.test('mpirun command lines', async (t) => {
  const rankArgv = ['node', '/opt/bin/trtllm-launch.js', 'rank', '--tp', '2', '--pp', '1'];
  const openmpi = mpirunCommand({ flavor: 'openmpi', mpirun: '/usr/bin/mpirun', np: 2, isRoot: true, oversubscribe: true, forwardEnv: ['PATH', 'OMP_NUM_THREADS'], rankArgv });
  t.equal(shellQuote([openmpi.file, ...openmpi.args]),
    '/usr/bin/mpirun -np 2 --tag-output --bind-to none --mca odls_base_sigkill_timeout 0 --oversubscribe --allow-run-as-root -x PATH -x OMP_NUM_THREADS node /opt/bin/trtllm-launch.js rank --tp 2 --pp 1');
  const user = mpirunCommand({ flavor: 'openmpi', mpirun: 'mpirun', np: 4, isRoot: false, oversubscribe: false, hostfile: '/etc/hosts list', forwardEnv: [], rankArgv });
  t.equal(shellQuote([user.file, ...user.args]),
    "mpirun -np 4 --tag-output --bind-to none --mca odls_base_sigkill_timeout 0 --hostfile '/etc/hosts list' node /opt/bin/trtllm-launch.js rank --tp 2 --pp 1", 'no root flag for users; quoted paths');
  const mpich = mpirunCommand({ flavor: 'mpich', mpirun: 'mpiexec.hydra', np: 2, isRoot: true, oversubscribe: true, hosts: 'a,b', forwardEnv: ['PATH', 'OMP_NUM_THREADS'], rankArgv });
  t.equal(shellQuote([mpich.file, ...mpich.args]),
    'mpiexec.hydra -n 2 -prepend-rank -hosts a,b -genvlist PATH,OMP_NUM_THREADS node /opt/bin/trtllm-launch.js rank --tp 2 --pp 1');
  t.equal(mpiFlavor('mpirun (Open MPI) 4.1.4'), 'openmpi');
  t.equal(mpiFlavor('HYDRA build details:\n    Version: 4.0.2'), 'mpich');
});

t.test('rank output and failures', async (t) => {
  t.same(parseRankLine('[1,0]<stdout>:ready'), { rank: 0, text: 'ready' });
  t.same(parseRankLine('[1,3]<stderr>:oops: x'), { rank: 3, text: 'oops: x' });
  t.same(parseRankLine('[2] hello'), { rank: 2, text: 'hello' });
  t.same(parseRankLine('plain'), { rank: undefined, text: 'plain' });
  const tail = new RankTail(2);
  for (const line of ['a', 'b', 'c']) tail.add(1, line);
  t.same(tail.last(1), ['b', 'c']);
  // The failures ranks report about themselves, first first, one per rank: the root cause's first line.
  tail.add(0, 'trtllm-launch rank: --metrics-port 8002 on 0.0.0.0 cannot be bound (EADDRINUSE)');
  tail.add(1, 'trtllm-launch rank: a later one');
  tail.add(0, 'trtllm-launch rank: a second one of rank 0');
  tail.add(undefined, 'trtllm-launch rank: an mpirun line is no rank\'s');
  t.same(tail.failures(), [
    { rank: 0, cause: '--metrics-port 8002 on 0.0.0.0 cannot be bound (EADDRINUSE)' }, { rank: 1, cause: 'a later one' },
  ]);
  t.same(parseMpirunFailure('mpirun noticed that process rank 1 with PID 4242 on node vm exited on signal 9 (Killed).'),
    { rank: 1, host: 'vm', signal: '9 (Killed)' });
  t.same(parseMpirunFailure('The first process to do so was:\n\n  Process name: [[16430,1],0]\n  Exit code:    3\n'),
    { rank: 0, exitCode: 3 });
  t.equal(parseMpirunFailure('all good'), undefined);
});

t.test("launch_triton_server.py's spellings", async (t) => {
  const { argv, notes } = normalizeTritonSpellings(['--world_size', '2', '--http_port=9000', '--metrics_port', '9002', '--no-mpi', '--force', '--grpc_port', '9001', '--oversubscribe']);
  t.same(argv, ['--world-size', '2', '--http-port=9000', '--metrics-port', '9002', '--launcher=none', '--grpc-port', '9001', '--oversubscribe']);
  t.equal(notes.length, 1);
  t.match(notes.join('\n'), /--force .*no effect/);
});

t.test('srun inside a Slurm allocation', async (t) => {
  const rankArgv = ['node', '/opt/bin/trtllm-launch.js', 'rank', '--tp', '4', '--pp', '1'];
  const srun = srunCommand({ srun: '/usr/bin/srun', np: 4, mpiPlugin: 'pmix', rankArgv });
  t.equal(shellQuote([srun.file, ...srun.args]),
    '/usr/bin/srun --mpi=pmix -n 4 --label --kill-on-bad-exit=1 --export=ALL node /opt/bin/trtllm-launch.js rank --tp 4 --pp 1');
  t.equal(srunMpiPlugin('MPI plugin types are...\n\tnone\n\tpmi2\n\tpmix\nspecific pmix plugin versions available: pmix_v4'), 'pmix');
  t.equal(srunMpiPlugin('MPI plugin types are...\n\tnone\n\tpmi2\n'), 'pmi2');
  t.equal(chooseLauncher('auto', 4, { SLURM_JOB_ID: '17' }), 'srun', 'auto picks srun inside an allocation');
  t.equal(chooseLauncher('auto', 4, {}), 'mpirun');
  t.equal(chooseLauncher('auto', 1, { SLURM_JOB_ID: '17' }), 'none', 'one rank runs in process');
  t.equal(chooseLauncher('mpirun', 1, {}), 'mpirun', 'an explicit choice wins');
  t.same(parseRankLine(' 3: hello', 'srun'), { rank: 3, text: 'hello' });
  t.same(parseRankLine('12: hello', 'srun'), { rank: 12, text: 'hello' });
  t.same(parseRankLine('[1,0]<stdout>:x', 'srun'), { rank: undefined, text: '[1,0]<stdout>:x' });
});
