// LoRA in orchestrator mode: `trtllm-launch --multi-model` with a model file whose lora.modules preloads the PEFT
// fixtures (test/fixtures/lora/tiny-llama) on a spawned tp-2 group beside a second model. OpenAI's "model" names an
// adapter of the group's model, the orchestrator routes it there with its task id, and every reference case comes
// back as PEFT's merged model's greedy tokens (make_lora_fixtures.py); /v1/models lists the adapters under their
// model.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';

import { packageRoot } from '../../worker/common/package-root.js';
import { loadTokenizer } from '../../worker/tokenizer.js';
import { fixtureDir } from '../helpers/fixtures.js';
import { startLauncher } from '../helpers/launched-cluster.js';
import { freePort } from '../helpers/processes.js';
import { postJson } from '../helpers/serving.js';
import { tempDir } from '../helpers/temp-dir.js';

const ROOT = join(packageRoot(), 'test', 'fixtures', 'lora', 'tiny-llama');
const NAMES = ['alpha', 'beta', 'gamma'] as const;
interface Case { name: string; input_ids: number[]; max_new_tokens: number; greedy_output_ids: number[] }
const ref = JSON.parse(readFileSync(join(ROOT, 'reference.json'), 'utf8')) as {
  adapters: Record<(typeof NAMES)[number], { cases: Case[] }>;
};

const repo = tempDir('trtllm-lora-repo-');
// lora.modules as a mapping of name to directory, relative to the model file.
writeFileSync(join(repo, 'llama.yaml'), `model: ${fixtureDir('tiny-llama')}\nparallel:\n  tp: 2\nkv_cache:\n  tokens_per_block: 16\n` +
  `lora:\n  modules:\n${NAMES.map((n) => `    ${n}: ${join(ROOT, n)}`).join('\n')}\n`);
writeFileSync(join(repo, 'gpt.yaml'), `model: ${fixtureDir('tiny-gpt2')}\nkv_cache:\n  tokens_per_block: 16\n`);

const port = await freePort();
const launcher = startLauncher(['--multi-model', '--model-repo', repo, '--oversubscribe', '--threads', '1',
  '--http-port', String(port), '--metrics-port', String(await freePort()), '--grpc-port', String(await freePort()), '--drain-timeout', '5']);
t.teardown(async () => {
  launcher.child.kill('SIGINT');
  await launcher.child;
});
const base = `http://127.0.0.1:${port}`;

t.test('the adapters of a spawned tp-2 group answer by name with PEFT\'s tokens', async (t) => {
  t.ok(await launcher.ready, `ready (${launcher.output().slice(-1500)})`);
  const models = await (await fetch(`${base}/v1/models`)).json() as { data: { id: string; parent?: string }[] };
  for (const name of NAMES) t.match(models.data.find((m) => m.id === name), { parent: 'llama' }, `/v1/models lists ${name} under llama`);
  const tok = await loadTokenizer(fixtureDir('tiny-llama'));
  const runs = NAMES.flatMap((name) => ref.adapters[name].cases.map(async (c) => {
    const r = await postJson(`${base}/v1/completions`, { model: name, prompt: c.input_ids, max_tokens: c.max_new_tokens, temperature: 0, ignore_eos: true });
    return { label: `${name} ${c.name}`, status: r.status, text: r.status === 200 ? r.json.choices[0].text as string : JSON.stringify(r.json), want: tok.decode(c.greedy_output_ids) };
  }));
  for (const r of await Promise.all(runs)) {
    t.equal(r.status, 200, r.label);
    t.equal(r.text, r.want, `${r.label}: PEFT's greedy tokens`);
  }
  const gpt = await postJson(`${base}/v1/completions`, { model: 'gpt', prompt: 'hello', max_tokens: 2 });
  t.equal(gpt.status, 200, 'the other model serves on');
});
