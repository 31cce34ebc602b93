// `trtllm-launch --multi-model` on the command line: the plan it prints with --dry-run, and the errors a user sees
// before anything starts (exit code 2, the option and the value named).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { execa } from 'execa';
import t from 'tap';

import { packageRoot } from '../../../worker/common/package-root.js';
import { fixtureDir } from '../../helpers/fixtures.js';
import { tempDir } from '../../helpers/temp-dir.js';

const bin = join(packageRoot(), 'bin', 'trtllm-launch.js');

function repo(files: Record<string, string>): string {
  const dir = tempDir('trtllm-mm-cli-');
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

const TWO = { 'a.yaml': `model: ${fixtureDir('tiny-llama')}\nparallel:\n  tp: 2\n`, 'b.yaml': `model: ${fixtureDir('tiny-gpt2')}\n` };

t.test('--dry-run: one orchestrator under mpirun --enable-recovery, or every rank with --no-spawn', async (t) => {
  const dir = repo(TWO);
  const spawn = await execa('node', [bin, '--multi-model', '--model-repo', dir, '--oversubscribe', '--dry-run'], { reject: false, all: true });
  t.equal(spawn.exitCode, 0, spawn.all);
  t.match(spawn.stdout, /mpirun -np 1 .*--enable-recovery .*-x TRTLLM_MULTI_MODEL_PLAN .*trtllm-launch.js orchestrated/);
  t.match(spawn.stdout, /rank 0: orchestrator; HTTP 0.0.0.0:8000, metrics :8002; spawns 2 worker group\(s\)/);
  t.match(spawn.stdout, /a: tp 2 x pp 1 from .*tiny-llama \(spawned\)/);
  const noSpawn = await execa('node', [bin, '--multi-model', '--no-spawn', '--model-repo', dir, '--oversubscribe', '--dry-run'], { reject: false, all: true });
  t.equal(noSpawn.exitCode, 0, noSpawn.all);
  t.match(noSpawn.stdout, /mpirun -np 4 /);
  t.match(noSpawn.stdout, /a: tp 2 x pp 1 from .*, job ranks 1,2/);
  t.match(noSpawn.stdout, /b: tp 1 x pp 1 from .*, job ranks 3/);
});

t.test('errors before anything starts', async (t) => {
  const run = (args: string[]) => execa('node', [bin, '--multi-model', ...args, '--dry-run'], { reject: false, all: true });
  const none = await run([]);
  t.equal(none.exitCode, 2);
  t.match(none.stderr, /--multi-model needs --model-repo <dir>/);
  const dir = repo(TWO);
  const world = await run(['--model-repo', dir, '--world-size', '3', '--oversubscribe']);
  t.equal(world.exitCode, 2);
  t.match(world.stderr, /--world-size 3 does not apply/);
  const cores = await run(['--model-repo', dir]);
  t.equal(cores.exitCode, 2);
  t.match(cores.stderr, /pass --oversubscribe to run more ranks than cores|needs 4 processes/);
  const overlap = repo({ 'a.yaml': `model: ${fixtureDir('tiny-llama')}\ngpu_device_ids: [0, 1]\n`, 'b.yaml': `model: ${fixtureDir('tiny-gpt2')}\ngpu_device_ids: [1]\n` });
  const clash = await run(['--model-repo', overlap, '--oversubscribe']);
  t.equal(clash.exitCode, 2);
  t.match(clash.stderr, /device 1 is given to both model "a" and model "b"/);
  const triton = await run(['--model-repo', dir, '--oversubscribe', '--gpu-device-ids', '0;1']);
  t.equal(triton.exitCode, 2);
  t.match(triton.stderr, /model "a" .* needs 2 rank\(s\) \(tp 2 x pp 1\) but has 1 device id\(s\) \[0\]/);
  const eventsRepo = repo({ 'a.yaml': `model: ${fixtureDir('tiny-llama')}\nkv_cache:\n  enable_reuse: true\n  event_buffer_max_size: 16\n`,
    'b.yaml': `model: ${fixtureDir('tiny-gpt2')}\nkv_cache:\n  event_buffer_max_size: 16\n` });
  const events = await run(['--model-repo', eventsRepo, '--oversubscribe']);
  t.equal(events.exitCode, 2, events.all);
  t.match(events.stderr, `model "b" (${join(eventsRepo, 'b.yaml')}): kv_cache.event_buffer_max_size 16 needs kv_cache.enable_reuse: true`);
  const srun = await execa('node', [bin, '--multi-model', '--model-repo', dir, '--oversubscribe', '--launcher', 'srun', '--dry-run'], { reject: false, all: true });
  t.equal(srun.exitCode, 2);
  t.match(srun.stderr, /add --no-spawn to start every rank with srun up front/);
  const single = await execa('node', [bin, '--model-repo', dir, '--dry-run'], { reject: false, all: true });
  t.equal(single.exitCode, 2);
  t.match(single.stderr, /serve them all with --multi-model, or one of them with --config <file>/, 'without --multi-model, several files say what to do');
});
