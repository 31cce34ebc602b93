// The launcher's checks of --model before anything starts, through the real command line: a missing directory, a
// directory without config.json / tokenizer.json, an unsupported architecture, a --tp the heads cannot split, a
// --pp beyond the layers and a --pp-layers that does not add up all exit 2 with the option and value named — and no mpirun was ever started. The mpirun on
// PATH is a stand-in that records each start, so "not started" is a fact the test reads, not a timing.
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';

import { execa } from 'execa';
import t from 'tap';

import { packageRoot } from '../../worker/common/package-root.js';
import { fixtureDir } from '../helpers/fixtures.js';
import { tempDir } from '../helpers/temp-dir.js';

const bin = join(packageRoot(), 'bin', 'trtllm-launch.js');
const MODEL = fixtureDir('tiny-llama');   // 4 attention heads, 2 kv heads, 2 layers
const dir = tempDir('model-preflight-');

// The stand-in: appends its arguments to a file and says nothing (the launcher then takes it for Open MPI).
const fakeBin = join(dir, 'bin');
const starts = join(dir, 'mpirun-starts');
mkdirSync(fakeBin);
writeFileSync(join(fakeBin, 'mpirun'), `#!/bin/sh\necho "$*" >> '${starts}'\n`);
chmodSync(join(fakeBin, 'mpirun'), 0o755);

function launch(args: string[]) {
  return execa(process.execPath, [bin, ...args], {
    reject: false, all: true, env: { PATH: `${fakeBin}${delimiter}${process.env.PATH ?? ''}`, TRTLLM_DEVICE: 'cpu' },
  });
}
const mpirunStarts = () => (existsSync(starts) ? readFileSync(starts, 'utf8').trim().split('\n') : []);

/** A checkpoint directory with only some of tiny-llama's files (and config.json possibly replaced). */
function partialModel(name: string, files: string[], config?: unknown): string {
  const model = join(dir, name);
  mkdirSync(model);
  for (const f of files) copyFileSync(join(MODEL, f), join(model, f));
  if (config !== undefined) writeFileSync(join(model, 'config.json'), JSON.stringify(config));
  return model;
}

t.test('a model that cannot be served fails before mpirun: exit 2, the option and value named', async (t) => {
  const missing = await launch(['--model', '/missing/dir', '--world-size', '2', '--oversubscribe']);
  t.equal(missing.exitCode, 2, missing.exitCode === 2 ? 'exit 2' : missing.all);
  t.match(missing.all, '--model /missing/dir: no such directory (/missing/dir)');

  const tp3 = await launch(['--model', MODEL, '--tp', '3', '--oversubscribe']);
  t.equal(tp3.exitCode, 2, tp3.exitCode === 2 ? 'exit 2' : tp3.all);
  t.match(tp3.all, `--tp 3 x --pp 1 cannot split --model ${MODEL}: num_attention_heads 4 is not divisible by tp 3`,
    'the engine\'s own words (parallel-layout.cpp)');

  const pp3 = await launch(['--model', MODEL, '--pp', '3', '--oversubscribe']);
  t.equal(pp3.exitCode, 2, pp3.exitCode === 2 ? 'exit 2' : pp3.all);
  t.match(pp3.all, `--tp 1 x --pp 3 cannot split --model ${MODEL}: pp 3 > num_hidden_layers 2`);

  const layers = await launch(['--model', MODEL, '--pp', '2', '--pp-layers', '2,1', '--oversubscribe']);
  t.equal(layers.exitCode, 2, layers.exitCode === 2 ? 'exit 2' : layers.all);
  t.match(layers.all, `--tp 1 x --pp 2 and --pp-layers 2,1 cannot split --model ${MODEL}: --pp-layers '2,1': adds up to 3 layers, but the model has 2`);
  const badLayers = await launch(['--model', MODEL, '--pp', '2', '--pp-layers', 'half', '--oversubscribe']);
  t.equal(badLayers.exitCode, 1, 'a malformed value is an option error (exit 1, as commander reports every one)');
  t.match(badLayers.all, "--pp-layers must be 'balanced' or a comma-separated list of layer counts >= 1, one per pipeline stage");

  const noConfig = partialModel('no-config', ['tokenizer.json']);
  const c = await launch(['--model', noConfig, '--world-size', '2', '--oversubscribe']);
  t.equal(c.exitCode, 2, c.exitCode === 2 ? 'exit 2' : c.all);
  t.match(c.all, `--model ${noConfig}: config.json not found: ${noConfig}/config.json`);

  const bert = partialModel('bert', ['tokenizer.json'], { architectures: ['BertModel'], model_type: 'bert' });
  const b = await launch(['--model', bert, '--world-size', '2', '--oversubscribe']);
  t.equal(b.exitCode, 2, b.exitCode === 2 ? 'exit 2' : b.all);
  t.match(b.all, /--model \S+bert: architecture 'BertModel' in config\.json is not supported; supported: /);

  const noTokenizer = partialModel('no-tokenizer', ['config.json', 'model.safetensors']);
  const k = await launch(['--model', noTokenizer, '--world-size', '2', '--oversubscribe', '--load-format', 'dummy']);
  t.equal(k.exitCode, 2, k.exitCode === 2 ? 'exit 2' : k.all);
  t.match(k.all, `--model ${noTokenizer}: ${noTokenizer}/tokenizer.json is missing; the server needs the checkpoint's tokenizer.json`);

  const denseEp = await launch(['--model', MODEL, '--tp', '2', '--ep', '2', '--oversubscribe']);
  t.equal(denseEp.exitCode, 2, denseEp.exitCode === 2 ? 'exit 2' : denseEp.all);
  t.match(denseEp.all, `--tp 2 x --pp 1 with --ep 2 cannot split --model ${MODEL}: ep 2 splits the experts of a mixture-of-experts model; LlamaForCausalLM has none (leave ep at 1)`);

  const moe = fixtureDir('tiny-mixtral');  // 4 experts of 96 columns
  const sixExperts = partialModel('six-experts', ['tokenizer.json'],
    { ...JSON.parse(readFileSync(join(moe, 'config.json'), 'utf8')) as object, num_local_experts: 6 });
  const ep4 = await launch(['--model', sixExperts, '--tp', '4', '--ep', '4', '--oversubscribe']);
  t.equal(ep4.exitCode, 2, ep4.exitCode === 2 ? 'exit 2' : ep4.all);
  t.match(ep4.all, `--tp 4 x --pp 1 with --ep 4 cannot split --model ${sixExperts}: num_experts 6 is not divisible by ep 4`);
  const epTp = await launch(['--model', moe, '--tp', '2', '--ep', '4', '--oversubscribe']);
  t.equal(epTp.exitCode, 2, epTp.exitCode === 2 ? 'exit 2' : epTp.all);
  t.match(epTp.all, '--ep 4 does not divide --tp 2 (tp = moe_tp x ep: the experts are split within the tp ranks)');
  const both = await launch(['--model', moe, '--tp', '4', '--ep', '2', '--moe-tp', '4', '--oversubscribe']);
  t.equal(both.exitCode, 2, both.exitCode === 2 ? 'exit 2' : both.all);
  t.match(both.all, '--moe-tp 4 x --ep 2 = 8 does not equal --tp 4 (tp = moe_tp x ep)');

  const one = await launch(['--model', '/missing/dir', '--world-size', '1']);
  t.equal(one.exitCode, 2, 'world size 1 (no mpirun): the same check, before the model loads');
  t.match(one.all, '--model /missing/dir: no such directory');

  t.same(mpirunStarts(), [], 'mpirun was never started');
});

t.test('the stand-in is what the launcher starts; ranks on other hosts may hold a directory this host lacks', async (t) => {
  // --dry-run asks mpirun its version: the stand-in records it, so a launch that got that far would show here.
  const dry = await launch(['--model', MODEL, '--tp', '2', '--oversubscribe', '--dry-run']);
  t.equal(dry.exitCode, 0, dry.exitCode === 0 ? 'exit 0' : dry.all);
  t.same(mpirunStarts(), ['--version'], 'a valid model reaches mpirun');
  // --dry-run shows how a mixture-of-experts model's experts split (TensorRT-LLM's mapping: ep rank = tp rank % ep).
  const moe = await launch(['--model', fixtureDir('tiny-qwen3-moe'), '--tp', '4', '--moe-tp', '2', '--oversubscribe', '--dry-run']);
  t.equal(moe.exitCode, 0, moe.exitCode === 0 ? 'exit 0' : moe.all);
  t.match(moe.all, ' rank --tp 4 --pp 1 --model ', 'the ranks get the grid');
  t.match(moe.all, ' --ep 2 ', '--moe-tp 2 of tp 4 reaches the ranks as the ep it implies');
  t.match(moe.all, 'rank 1: tp_rank 1, pp_rank 0, ep_rank 1 (experts 4-7 of 8), moe_tp_rank 0 of 2;');
  t.match(moe.all, 'rank 2: tp_rank 2, pp_rank 0, ep_rank 0 (experts 0-3 of 8), moe_tp_rank 1 of 2;');
  t.same(mpirunStarts(), ['--version', '--version']);
  const remote = await launch(['--model', '/only/on/the/nodes', '--world-size', '2', '--hosts', 'a,b', '--dry-run']);
  t.equal(remote.exitCode, 0, remote.exitCode === 0 ? 'exit 0' : remote.all);
  t.match(remote.all, '--model /only/on/the/nodes: no such directory on this host; the ranks will look for it at /only/on/the/nodes on theirs');
});
