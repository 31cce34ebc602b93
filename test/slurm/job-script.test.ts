// Pure parts of the Slurm support, without daemons: time limits, the job plan and its refusals, the rendered
// script, the templates in slurm/ (re-rendered from their own headers), scontrol records, the launcher output a
// submit follows, srun's failure lines, and the SLURM_PROCID/SLURM_LOCALID → rank/device mapping.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { Command } from 'commander';
import { execa } from 'execa';
import t from 'tap';

import { shellQuote, splitArgs, srunCommand } from '../../launcher/cluster/mpirun-command.js';
import { parseSrunFailure } from '../../launcher/cluster/rank-output.js';
import { dpNodeLayout } from '../../launcher/multi-model/dp-node-layout.js';
import { addServeOptions } from '../../launcher/serve-options.js';
import { isFinal, jobInfo, JobOutput, parseScontrolRecord } from '../../launcher/slurm/job-status.js';
import { type JobPlan, planJob, type ServeFacts, type SlurmJobOptions } from '../../launcher/slurm/job-plan.js';
import { renderSbatchScript } from '../../launcher/slurm/sbatch-script.js';
import { forwardedServeArgs, givenArgv } from '../../launcher/slurm/serve-args.js';
import { addSlurmJobOptions } from '../../launcher/slurm/slurm-options.js';
import { parseTimeLimit } from '../../launcher/slurm/time-limit.js';
import { packageRoot } from '../../worker/common/package-root.js';
import { checkSlurmTask, slurmTask } from '../../worker/rank.js';

const job = (o: Partial<SlurmJobOptions> = {}): SlurmJobOptions => ({ jobName: 'serve', time: '00:30:00', nodes: 1, outputDir: 'logs', sbatchArg: [], ...o });
const serve = (o: Partial<ServeFacts> = {}): ServeFacts => ({ parallel: { worldSize: 2, tp: 2, pp: 1 }, device: 'auto', drainTimeout: 30, httpPort: 8000, metricsPort: 8002, ...o });

t.test('Slurm time limits', async (t) => {
  t.equal(parseTimeLimit('30'), 1800, 'minutes');
  t.equal(parseTimeLimit('1:30'), 90, 'MM:SS');
  t.equal(parseTimeLimit('02:00:00'), 7200);
  t.equal(parseTimeLimit('1-2'), 26 * 3600, 'D-HH');
  t.equal(parseTimeLimit('1-00:30'), 24 * 3600 + 1800, 'D-HH:MM');
  t.equal(parseTimeLimit('1-00:00:10'), 86410);
  t.equal(parseTimeLimit('UNLIMITED'), Infinity);
  for (const bad of ['', 'abc', '1:2:3:4', '0', '-5', '1h']) t.throws(() => parseTimeLimit(bad), new RegExp(`--time must be a Slurm time limit .*got "${bad}"`));
});

t.test('job plan: tasks per node, GPUs, the drain signal, and what it refuses', async (t) => {
  const multi = planJob(job({ nodes: 2 }), serve({ parallel: { worldSize: 16, tp: 8, pp: 2 }, device: 'cuda' }));
  t.equal(multi.tasksPerNode, 8);
  t.equal(multi.gpusPerNode, 8, 'one GPU per rank by default with --device cuda');
  t.equal(multi.signalSeconds, 60, '--drain-timeout 30 + 30 s');
  t.equal(planJob(job(), serve()).gpusPerNode, undefined, 'no GPUs asked for on the CPU backend');
  t.equal(planJob(job({ gpusPerNode: 0 }), serve({ device: 'cuda' })).gpusPerNode, undefined, '--gpus-per-node 0 asks for none');
  t.equal(planJob(job(), serve({ threads: 4 })).cpusPerTask, 4, '--threads sizes the task');
  t.equal(planJob(job({ time: 'UNLIMITED' }), serve()).signalSeconds, undefined, 'no limit, no signal');
  t.equal(planJob(job({ containerImage: 'nvcr.io/nvidia/x:1', containerMounts: '/data:/data' }), serve({ srunArgs: '--overlap' })).srunArgs,
    '--overlap --container-image=nvcr.io/nvidia/x:1 --container-mounts=/data:/data');
  t.throws(() => planJob(job({ nodes: 3 }), serve()), /--nodes 3 does not divide tp 2 x pp 1 = 2 ranks/);
  t.throws(() => planJob(job({ gpusPerNode: 4 }), serve({ parallel: { worldSize: 8, tp: 8, pp: 1 } })), /--gpus-per-node 4 is fewer than the 8 ranks per node/);
  t.throws(() => planJob(job({ time: '1' }), serve()), /--time 1 \(60 s\) leaves no time to serve: the launcher is asked to drain 60 s before the limit/);
  t.throws(() => planJob(job({ jobName: 'my job' }), serve()), /--job-name must be one word without spaces.*got "my job"/);
  t.throws(() => planJob(job({ outputDir: 'a b' }), serve()), /--output-dir must be one word/);
  t.throws(() => planJob(job({ sbatchArg: ['exclusive'] }), serve()), /--sbatch-arg must be one sbatch option such as "--exclusive".*got "exclusive"/);
  t.throws(() => planJob(job({ containerMounts: '/a:/a' }), serve()), /--container-mounts needs --container-image/);
  t.throws(() => planJob(job(), serve({ drainTimeout: 70000 })), /--drain-timeout 70000 is too long for Slurm's --signal/);
});

function render(plan: JobPlan, extra: Partial<Parameters<typeof renderSbatchScript>[0]> = {}): string {
  return renderSbatchScript({ plan, launch: 'trtllm-launch', model: '/models/llama 3', serveArgs: ['--http-port', '9000', '--enable-kv-cache-reuse', 'true'], renderedBy: ['slurm', 'render'], ...extra });
}

t.test('the rendered script', async (t) => {
  const plan = planJob(job({ nodes: 2, account: 'proj1', sbatchArg: ['--exclusive', '--qos=high'], containerImage: 'img' }),
    serve({ parallel: { worldSize: 4, tp: 2, pp: 2 }, device: 'cuda', httpPort: 9000 }));
  const s = render(plan);
  t.match(s, /^#!\/bin\/bash\n# trtllm-launch serving job: tp 2 x pp 2 = 4 ranks on 2 nodes, 2 per node\.\n/);
  t.match(s, /\n#SBATCH --job-name=serve\n/);
  t.match(s, /\n#SBATCH --account=proj1\n##SBATCH --partition=<your partition>\n/, 'given: on; not given: switched off with a hint');
  t.match(s, /\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\n/);
  t.match(s, /\n#SBATCH --gpus-per-node=2\n/);
  t.match(s, /\n#SBATCH --time=00:30:00\n/);
  t.match(s, /\n#SBATCH --signal=B:TERM@60\n/);
  t.match(s, /\n#SBATCH --output=logs\/%x-%j\.out\n/);
  t.match(s, /\n#SBATCH --exclusive\n#SBATCH --qos=high\n/);
  t.notMatch(s, /\n#SBATCH --ntasks=/, 'the launcher sizes the step, not sbatch');
  t.match(s, /ssh -L 9000:<node>:9000 <login node>/, 'says how to reach the port');
  t.match(s, /\nset -euo pipefail\nexec trtllm-launch serve \\\n  --tp 2 --pp 2 \\\n  --model '\/models\/llama 3' \\\n  --log-dir logs\/"\$\{SLURM_JOB_NAME\}-\$\{SLURM_JOB_ID\}" \\\n  --http-port 9000 \\\n  --enable-kv-cache-reuse true \\\n  --srun-args --container-image=img\n$/);
  t.match(s, /# The ranks run in a container \(pyxis\/enroot/);
  const own = render(planJob(job(), serve()), { logDir: '/scratch/my logs', model: undefined, serveArgs: [] });
  t.match(own, /\nexec trtllm-launch serve \\\n  --tp 2 --pp 1 \\\n  --log-dir '\/scratch\/my logs'\n$/, 'no --model: the launcher\'s default; --log-dir as given');
  t.match(own, /\n##SBATCH --gpus-per-node=2\n/, 'a switched-off GPU line to edit');
  const syntax = await execa('bash', ['-n'], { input: s, reject: false, all: true });
  t.equal(syntax.exitCode, 0, `bash -n accepts it${syntax.exitCode === 0 ? '' : `: ${syntax.all}`}`);
});

t.test('--dp: the orchestrator is one more task on the first node; its replicas take one GPU per rank; --no-spawn added', async (t) => {
  const dp = planJob(job(), serve({ parallel: { worldSize: 2, tp: 2, pp: 1 }, dp: 3, device: 'cuda' }));
  t.equal(dp.tasksPerNode, 7, '1 + 3 replicas x 2 ranks');
  t.equal(dp.gpusPerNode, 6, 'no GPU for the orchestrator');
  // Several nodes: each node a task slot more than its ranks (the first node's runs the orchestrator), GPUs per rank.
  const two = planJob(job({ nodes: 2 }), serve({ parallel: { worldSize: 2, tp: 2, pp: 1 }, dp: 2, device: 'cuda' }));
  t.same([two.tasksPerNode, two.gpusPerNode], [3, 2], '2 replicas x 2 ranks over 2 nodes: 2 ranks a node + a slot');
  t.match(render(two, { serveArgs: ['--dp', '2'] }), /\n#SBATCH --nodes=2\n# --dp 2: one task slot a node more than its 2 rank\(s\); the first node's runs the orchestrator \(task 0\), which\n# serves HTTP and routes \(the launcher lays the tasks out with srun --distribution=arbitrary; the others stay free\)\.\n#SBATCH --ntasks-per-node=3\n/);
  t.throws(() => planJob(job({ nodes: 4 }), serve({ dp: 3, parallel: { worldSize: 1, tp: 1, pp: 1 } })), /--nodes 4 does not divide --dp 3 x tp 1 x pp 1 = 3 ranks: every node runs the same number of ranks/);
  t.throws(() => planJob(job({ gpusPerNode: 4 }), serve({ dp: 3, device: 'cuda' })), /--gpus-per-node 4 is fewer than the 6 ranks per node/);
  const s = render(dp, { serveArgs: ['--dp', '3'] });
  t.match(s, /^#!\/bin\/bash\n# trtllm-launch serving job: 3 replicas of tp 2 x pp 1 behind an orchestrator = 7 tasks on 1 node\.\n/);
  t.match(s, /\n#SBATCH --nodes=1\n# --dp 3: one task more than the replicas' 6 ranks: the orchestrator \(task 0\), which serves HTTP and routes\.\n#SBATCH --ntasks-per-node=7\n/);
  t.match(s, /\n  --dp 3 \\\n  --no-spawn\n$/, '--no-spawn: srun starts every rank up front');
  t.notMatch(render(dp, { serveArgs: ['--dp', '3', '--no-spawn'] }), /--no-spawn[^]*--no-spawn/, 'once');
  const syntax = await execa('bash', ['-n'], { input: s, reject: false, all: true });
  t.equal(syntax.exitCode, 0, `bash -n accepts it${syntax.exitCode === 0 ? '' : `: ${syntax.all}`}`);
});

t.test('serve options passed on: set ones only, paths absolute, never the key', async (t) => {
  const command = addSlurmJobOptions(addServeOptions(new Command('render')).exitOverride());
  command.parse(['--tp', '2', '--model', 'm', '--api-key', 'secret', '--max-batch-size', '8', '--hostfile', 'hosts', '--srun-args', '--overlap', '--sbatch-arg=--exclusive', '--enable-chunked-context'], { from: 'user' });
  const forwarded = forwardedServeArgs(command, '/home/u');
  t.same(forwarded, ['--hostfile', '/home/u/hosts', '--max-batch-size', '8', '--enable-chunked-context', 'true']);
  const given = givenArgv(command);
  t.notOk(given.includes('secret'), 'the key is not recorded');
  t.ok(given.includes('--sbatch-arg=--exclusive'), 'a value that looks like an option stays glued to its flag');
  t.ok(given.includes('--srun-args=--overlap'));
});

t.test('the templates in slurm/ are what `slurm render` writes for the arguments in their header', async (t) => {
  const dir = join(packageRoot(), 'slurm');
  const templates = readdirSync(dir).filter((f) => f.endsWith('.sbatch'));
  t.ok(templates.length >= 2, `one-node and multi-node templates (${templates.join(', ')})`);
  for (const name of templates) {
    const text = readFileSync(join(dir, name), 'utf8');
    const header = /^# Rendered by: trtllm-launch (.*)$/m.exec(text);
    t.ok(header, `${name} says how it was rendered`);
    if (!header) continue;
    const r = await execa(process.execPath, [join(packageRoot(), 'bin', 'trtllm-launch.js'), ...splitArgs(header[1]!)], { reject: false, all: true, stripFinalNewline: false });
    t.equal(r.stdout, text, `${name} is current (re-render: trtllm-launch ${header[1]} > slurm/${name})`);
  }
});

t.test('scontrol records and job states', async (t) => {
  const line = 'JobId=12 JobName=serve UserId=root(0) JobState=RUNNING Reason=None Dependency=(null) ExitCode=0:0 NodeList=h[1-2] BatchHost=h1 ' +
    'ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=2,billing=2 Command=(null) WorkDir=/home/u/my dir StdOut=/home/u/logs/serve-12.out Power=';
  const record = parseScontrolRecord(line);
  t.equal(record.get('WorkDir'), '/home/u/my dir', 'values may hold spaces');
  t.equal(record.get('TRES'), 'cpu=2,node=2,billing=2', 'and = signs');
  t.equal(record.get('ReqB:S:C:T'), '0:0:*:*');
  t.equal(record.get('Power'), '');
  t.same(jobInfo(record), { state: 'RUNNING', reason: 'None', nodes: 'h[1-2]', batchHost: 'h1', exitCode: '0:0', stdout: '/home/u/logs/serve-12.out' });
  t.ok(isFinal('COMPLETED') && isFinal('TIMEOUT') && isFinal('CANCELLED') && isFinal('NODE_FAIL'));
  t.notOk(isFinal('RUNNING') || isFinal('PENDING') || isFinal('COMPLETING'), 'COMPLETING still holds its nodes');
});

t.test('what a job\'s output says', async (t) => {
  const ready = new JobOutput();
  for (const l of ['[rank 0] leader pid 5 on h1', '[launcher] ready after 2.10 s: 2 rank(s)', 'serving on http://h1:8000 (tp 2 x pp 1), metrics on http://h1:8002/metrics']) ready.add(l);
  t.ok(ready.ready);
  t.same(ready.endpoint, { host: 'h1', port: 8000, metricsHost: 'h1', metricsPort: 8002 });
  t.notOk(ready.failed);
  const failed = new JobOutput();
  for (const l of ['[rank 1] trtllm-launch rank: num_attention_heads 4 is not divisible by tp 3', '[srun] srun: error: h1: tasks 0-2: Exited with exit code 2', 'Root cause:', '  rank 0 on h1: exit code 2', '  its last lines:']) failed.add(l);
  t.ok(failed.failed);
  t.same(failed.explanation(), ['Root cause:', '  rank 0 on h1: exit code 2', '  its last lines:'], 'the root cause block');
  const noCause = new JobOutput();
  for (let i = 0; i < 30; i += 1) noCause.add(`line ${i}`);
  t.same(noCause.explanation(3), ['line 27', 'line 28', 'line 29'], 'else the last lines');
  const stopped = new JobOutput();
  stopped.add('[launcher] all ranks stopped cleanly');
  t.ok(stopped.stoppedCleanly);
});

t.test('srun: failures, command line, --srun-args', async (t) => {
  t.same(parseSrunFailure('srun: error: h2: task 1: Exited with exit code 3\nsrun: error: h1: task 0: Killed'), { rank: 1, host: 'h2', exitCode: 3 });
  t.same(parseSrunFailure('srun: error: vm: tasks 0-2: Exited with exit code 2'), { rank: 0, host: 'vm', exitCode: 2 });
  t.same(parseSrunFailure('srun: error: n7: task 3: Segmentation fault (core dumped)'), { rank: 3, host: 'n7', signal: 'Segmentation fault (core dumped)' });
  t.equal(parseSrunFailure('srun: Job step aborted'), undefined);
  const cmd = srunCommand({ srun: 'srun', np: 4, mpiPlugin: 'pmi2', cpusPerTask: 8, extraArgs: ['--container-image=img'], rankArgv: ['node', 'x.js', 'rank'] });
  t.equal(shellQuote([cmd.file, ...cmd.args]), 'srun --mpi=pmi2 -n 4 --cpus-per-task=8 --label --kill-on-bad-exit=1 --export=ALL --container-image=img node x.js rank');
  t.same(splitArgs(`--container-image=nvcr.io/x:1  --container-mounts='/a b:/a b' --x="y z"`), ['--container-image=nvcr.io/x:1', '--container-mounts=/a b:/a b', '--x=y z']);
  t.same(splitArgs(''), []);
});

t.test('Slurm task numbering → MPI rank and device', async (t) => {
  const env = { SLURM_JOB_ID: '12', SLURM_STEP_ID: '0', SLURM_PROCID: '3', SLURM_LOCALID: '1', SLURM_STEP_NUM_TASKS: '4', SLURMD_NODENAME: 'n2' };
  t.same(slurmTask(env), { jobId: '12', stepId: '0', procId: 3, localId: 1, tasks: 4, node: 'n2', device: 'cpu' });
  t.equal(slurmTask({ ...env, CUDA_VISIBLE_DEVICES: '0,1,2,3' })?.device, 'cuda:1', 'all of the node\'s GPUs visible: the local id picks one');
  t.equal(slurmTask({ ...env, CUDA_VISIBLE_DEVICES: '5' })?.device, 'cuda:0', 'one GPU bound to the task: that one');
  t.equal(slurmTask({ SLURM_PROCID: '0' }), undefined, 'not an srun task');
  const info = { mpi: true, worldRank: 3, worldSize: 4, localRank: 1, localSize: 2, host: 'n2', library: 'Open MPI', jobRank: 3, jobSize: 4, spawned: false };
  t.doesNotThrow(() => checkSlurmTask(info, slurmTask(env)!, 'pmix'));
  t.throws(() => checkSlurmTask({ ...info, worldRank: 0, worldSize: 1, mpi: false }, slurmTask(env)!, 'none'),
    /srun started 4 tasks but MPI sees a world of 1 \(srun --mpi=none\).*PMIx troubleshooting/);
  t.throws(() => checkSlurmTask({ ...info, worldRank: 2 }, slurmTask(env)!, 'pmi2'), /srun task 3 became MPI rank 2/);
});

t.test('--dp over several nodes: the orchestrator and the first node\'s ranks there, then each node\'s in turn', async (t) => {
  t.same(dpNodeLayout(['h1', 'h2'], 2, 1), { hosts: ['h1', 'h1', 'h2'] }, 'replica 0 beside the orchestrator, replica 1 on h2');
  t.same(dpNodeLayout(['a', 'b'], 2, 2), { hosts: ['a', 'a', 'a', 'b', 'b'] });
  t.same(dpNodeLayout(['a', 'b', 'c'], 3, 2), { hosts: ['a', 'a', 'a', 'b', 'b', 'c', 'c'] }, 'srun\'s block layout would have put replica 1 across a and b');
  t.same(dpNodeLayout(['a', 'b'], 1, 4), { hosts: ['a', 'a', 'a', 'b', 'b'] }, 'a replica may span nodes');
  t.match(dpNodeLayout(['a', 'b'], 3, 1), { error: /--dp 3 x 1 rank\(s\) a replica = 3 ranks do not spread evenly over the allocation's 2 nodes \(a, b\)/ });
});
