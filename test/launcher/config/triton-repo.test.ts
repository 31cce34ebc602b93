// `--model_repo` / `--model-repo` naming a Triton TensorRT-LLM model repository (the seeds' triton_model_repo): the
// protobuf text format read, tensorrt_llm/config.pbtxt's parameters checked into the same values a YAML model file
// gives, what sets nothing said as notes, bad values refused naming the file and the parameter, and the seeds'
// `launch_triton_server.py --world_size ... --model_repo=...` spelling launching (dry run) and serving that model.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { execa } from 'execa';
import t from 'tap';

import { messages, parsePbtxt, scalarOf } from '../../../launcher/config/pbtxt.js';
import { isTritonRepo, readTritonRepo } from '../../../launcher/config/triton-repo.js';
import { packageRoot } from '../../../worker/common/package-root.js';
import { fixtureDir } from '../../helpers/fixtures.js';
import { cleanEnv, LAUNCHER_BIN as bin, startServeProcess } from '../../helpers/serve-process.js';
import { tempDir } from '../../helpers/temp-dir.js';

const REPO = join(packageRoot(), 'test', 'fixtures', 'triton-repo');
const dir = tempDir('trtllm-triton-repo-');
t.teardown(() => execa('rm', ['-rf', dir]));

/** A repository whose tensorrt_llm/config.pbtxt is `text`. */
function repo(name: string, text: string): string {
  const root = join(dir, name);
  mkdirSync(join(root, 'tensorrt_llm'), { recursive: true });
  writeFileSync(join(root, 'tensorrt_llm', 'config.pbtxt'), text);
  return root;
}
const param = (key: string, value: string) => `parameters: { key: "${key}" value: { string_value: "${value}" } }\n`;

t.test('protobuf text format', async (t) => {
  const m = parsePbtxt(`# a comment
name: "tensorrt_llm" max_batch_size: 8
model_transaction_policy { decoupled: True }
dims: [ -1, 2 ], ratio: 0.5; flag: false
input [ { name: "a" data_type: TYPE_INT32 }, < name: 'b\\"c' > ]
parameters: { key: "k1" value: { string_value: "x" } }
parameters { key: "k2" value { string_value: "y" "z" } }
max_tokens: \${triton_max_tokens}
`, 'c.pbtxt');
  t.equal(scalarOf(m, 'name'), 'tensorrt_llm');
  t.equal(scalarOf(m, 'max_batch_size'), 8);
  t.equal(scalarOf(messages(m, 'model_transaction_policy')[0]!, 'decoupled'), true);
  t.same(m.get('dims'), [-1, 2], 'a list adds each element');
  t.equal(scalarOf(m, 'ratio'), 0.5);
  t.equal(scalarOf(m, 'flag'), false);
  t.same(messages(m, 'input').map((i) => [scalarOf(i, 'name'), scalarOf(i, 'data_type')]), [['a', 'TYPE_INT32'], ['b"c', undefined]], 'messages in a list, both brackets');
  t.same(messages(m, 'parameters').map((p) => scalarOf(p, 'key')), ['k1', 'k2'], 'a repeated field keeps every value');
  t.equal(scalarOf(messages(messages(m, 'parameters')[1]!, 'value')[0]!, 'string_value'), 'yz', 'adjacent strings join');
  t.equal(scalarOf(m, 'max_tokens'), '${triton_max_tokens}', "fill_template.py's placeholder, read as is");
  t.throws(() => parsePbtxt('name: "open\n', 'c.pbtxt'), /c\.pbtxt:1: a string is not closed/);
  t.throws(() => parsePbtxt('a { b: 1\n', 'c.pbtxt'), /c\.pbtxt:end: expected a field name, got the end of the file/);
  t.throws(() => parsePbtxt('a: [1 2]', 'c.pbtxt'), /c\.pbtxt:1: expected "," or "\]" in a list, got "2"/);
  t.throws(() => parsePbtxt('a 5', 'c.pbtxt'), /expected ":" after a/);
  t.throws(() => parsePbtxt('a: @', 'c.pbtxt'), /c\.pbtxt:1: unexpected "@"/);
});

t.test("the fixture repository's values and notes", async (t) => {
  t.ok(isTritonRepo(REPO));
  t.notOk(isTritonRepo(fixtureDir('tiny-llama')));
  const file = readTritonRepo(REPO);
  t.equal(file.path, join(REPO, 'tensorrt_llm', 'config.pbtxt'));
  t.same(Object.fromEntries(file.values), {
    'model': fixtureDir('tiny-llama'), 'batching.max_batch_size': 4, 'serving.decoupled': true, 'decoding.max_beam_width': 2,
    'batching.scheduler_policy': 'max_utilization', 'kv_cache.max_tokens': 2048, 'kv_cache.free_mem_fraction': 0.85,
    'batching.enable_chunked_context': true, 'serving.exclude_input_in_output': true,
  }, 'gpt_model_path relative to the config file; numbers, toggles and the policy as the flags read them');
  t.same(file.notes, [
    'tensorrt_llm/config.pbtxt parameter gpt_model_type = "inflight_fused_batching" sets nothing here: the executor always batches in flight',
    'tensorrt_llm/config.pbtxt parameter normalize_log_probs = "false" sets nothing here: output_log_probs are always the sampled tokens\' log probabilities',
    'tensorrt_llm/config.pbtxt: enable_kv_cache_reuse left as ${...} (unset, as Triton reads them)',
  ]);
});

t.test('bad repositories: every problem at once, naming the file and the parameter', async (t) => {
  const model = fixtureDir('tiny-llama');
  const bad = repo('bad', `max_batch_size: -3\n${param('gpt_model_path', model)}${param('kv_cache_free_gpu_mem_fraction', '1.5')}${param('batch_scheduler_policy', 'fastest')}${param('enable_chunked_context', 'maybe')}${param('gpu_device_ids', '0,x')}`);
  const path = join(bad, 'tensorrt_llm', 'config.pbtxt');
  let message = '';
  try { readTritonRepo(bad); } catch (error) { message = (error as Error).message; }
  for (const p of ['max_batch_size', 'parameter kv_cache_free_gpu_mem_fraction', 'parameter batch_scheduler_policy', 'parameter enable_chunked_context', 'parameter gpu_device_ids']) {
    t.match(message, `${p} in ${path} `, `${p} named`);
  }
  t.match(message, /got "fastest"/);
  t.match(message, /got "maybe"/);
  const unset = repo('unset', param('gpt_model_path', '${engine_dir}'));
  t.throws(() => readTritonRepo(unset), /parameter gpt_model_path in \S+ must name the model's Hugging Face checkpoint directory \(it was left as \$\{\.\.\.\}: fill it in\)/);
  const missing = repo('missing', param('gpt_model_path', '/nonexistent/engines'));
  t.throws(() => readTritonRepo(missing), /must be an existing checkpoint directory, got "\/nonexistent\/engines" \(no such directory\)/);
  const engines = join(dir, 'engines');
  mkdirSync(engines, { recursive: true });
  writeFileSync(join(engines, 'rank0.engine'), 'x');
  writeFileSync(join(engines, 'config.json'), '{}');
  t.throws(() => readTritonRepo(repo('engine', param('gpt_model_path', engines))), /holds TensorRT engines \(rank0\.engine\), which do not run here: point it at the Hugging Face checkpoint/);
  t.throws(() => readTritonRepo(repo('syntax', 'max_batch_size 4')), /config\.pbtxt:1: expected ":" after max_batch_size/);
  // A checkpoint without tokenizer.json whose repository's preprocessing names a tokenizer_dir that has one.
  const bare = join(dir, 'bare-checkpoint');
  mkdirSync(bare, { recursive: true });
  writeFileSync(join(bare, 'config.json'), '{}');
  const split = repo('split', param('gpt_model_path', bare));
  mkdirSync(join(split, 'preprocessing'), { recursive: true });
  writeFileSync(join(split, 'preprocessing', 'config.pbtxt'), param('tokenizer_dir', fixtureDir('tiny-llama')));
  t.throws(() => readTritonRepo(split), new RegExp(`${bare} has no tokenizer\\.json, which the server reads from the checkpoint itself; the repository's tokenizer_dir ${fixtureDir('tiny-llama')} has one: copy it into`));
});

t.test("the BLS's target and draft models (the seeds' draft-target flow)", async (t) => {
  const model = fixtureDir('tiny-llama');
  const write = (root: string, name: string, text: string) => {
    mkdirSync(join(root, name), { recursive: true });
    writeFileSync(join(root, name, 'config.pbtxt'), text);
  };
  const root = join(dir, 'draft-target');
  write(root, 'llama_target', `max_batch_size: 2\n${param('gpt_model_path', model)}`);
  write(root, 'llama_draft', param('gpt_model_path', model));
  write(root, 'tensorrt_llm_bls', `${param('tensorrt_llm_model_name', 'llama_target')}${param('tensorrt_llm_draft_model_name', 'llama_draft')}`);
  t.ok(isTritonRepo(root), 'a BLS naming its target makes a repository');
  const file = readTritonRepo(root);
  t.equal(file.path, join(root, 'llama_target', 'config.pbtxt'), 'the target the BLS names');
  t.equal(file.values.get('batching.max_batch_size'), 2);
  t.equal(file.values.get('decoding.draft_model'), model, "the draft model's gpt_model_path drafts");
  const dry = await execa('node', [bin, '--world_size=2', '--oversubscribe', `--model_repo=${root}`, '--dry-run'], { reject: false, env: cleanEnv(), extendEnv: false });
  t.equal(dry.exitCode, 0, dry.stderr);
  t.match(dry.stdout, ` --draft-model ${model}`);
  const noDraft = join(dir, 'no-draft');
  write(noDraft, 'tensorrt_llm', param('gpt_model_path', model));
  write(noDraft, 'tensorrt_llm_bls', param('tensorrt_llm_draft_model_name', 'missing_draft'));
  t.throws(() => readTritonRepo(noDraft), /parameter tensorrt_llm_draft_model_name in \S+ names "missing_draft", but \S+missing_draft\/config\.pbtxt does not exist/);
  const unsetDraft = join(dir, 'unset-draft');
  write(unsetDraft, 'tensorrt_llm', param('gpt_model_path', model));
  write(unsetDraft, 'tensorrt_llm_draft', param('gpt_model_path', '${draft_engine_dir}'));
  write(unsetDraft, 'tensorrt_llm_bls', param('tensorrt_llm_draft_model_name', 'tensorrt_llm_draft'));
  t.throws(() => readTritonRepo(unsetDraft), /parameter gpt_model_path in \S+tensorrt_llm_draft\/config\.pbtxt \(the draft model\) must name its Hugging Face checkpoint directory/);
  const noTarget = join(dir, 'no-target');
  write(noTarget, 'tensorrt_llm_bls', param('accumulate_tokens', 'false'));
  t.throws(() => readTritonRepo(noTarget), /has tensorrt_llm_bls\/config\.pbtxt but no tensorrt_llm\/config\.pbtxt: add the tensorrt_llm model, or name it with the BLS's tensorrt_llm_model_name/);
  const wrongTarget = join(dir, 'wrong-target');
  write(wrongTarget, 'tensorrt_llm_bls', param('tensorrt_llm_model_name', 'nope'));
  t.throws(() => readTritonRepo(wrongTarget), /parameter tensorrt_llm_model_name in \S+ names "nope", but \S+nope\/config\.pbtxt does not exist/);
});

t.test("the seeds' command: launch_triton_server.py's spelling with a model repository", async (t) => {
  const dry = await execa('node', [bin, '--world_size=2', `--model_repo=${REPO}`, '--oversubscribe', '--dry-run'], { reject: false, env: cleanEnv(), extendEnv: false });
  t.equal(dry.exitCode, 0, dry.stderr);
  t.match(dry.stdout, ` --model ${fixtureDir('tiny-llama')} `, 'the ranks serve gpt_model_path, not the bundled model');
  for (const flag of ['--max-batch-size 4', '--max-tokens-in-paged-kv-cache 2048', '--scheduler-policy max_utilization', '--enable-chunked-context true', '--max-beam-width 2']) {
    t.match(dry.stdout, ` ${flag}`);
  }
  t.match(dry.stderr, /parameter gpt_model_type = "inflight_fused_batching" sets nothing here/, 'notes said, not dropped');
  t.notMatch(dry.stderr, /--model_repo .*not used/);
  const printed = await execa('node', [bin, 'config', 'print', '--model-repo', REPO, '--json'], { reject: false, env: cleanEnv(), extendEnv: false });
  t.equal(printed.exitCode, 0, printed.stderr);
  const json = JSON.parse(printed.stdout) as { file: { path: string; notes: string[] }; settings: Record<string, { value: unknown; source: string }> };
  t.equal(json.file.path, join(REPO, 'tensorrt_llm', 'config.pbtxt'));
  t.equal(json.file.notes.length, 3);
  t.match(json.settings['batching.max_batch_size'], { value: 4, source: 'file', origin: json.file.path });
  const multi = await execa('node', [bin, '--multi-model', '--model-repo', REPO, '--dry-run'], { reject: false, env: cleanEnv(), extendEnv: false });
  t.equal(multi.exitCode, 2);
  t.match(multi.stderr, /is a Triton model repository \(tensorrt_llm\/config\.pbtxt\), which serves one model: drop --multi-model/);
  const neither = await execa('node', [bin, '--model_repo', fixtureDir('tiny-llama'), '--dry-run'], { reject: false, env: cleanEnv(), extendEnv: false });
  t.equal(neither.exitCode, 2);
  t.match(neither.stderr, /has no model files \(\*\.yaml, \*\.yml\) and is not a Triton model repository \(no tensorrt_llm\/config\.pbtxt\)/);
});

t.test('serving from a Triton repository: its model, max batch size and beam width', async (t) => {
  const { child, output: out, httpPort: port } = await startServeProcess(['serve', '--model-repo', REPO, '--host', '127.0.0.1', '--http-port', '0', '--metrics-port', '0', '--threads', '1']);
  t.match(out, /OpenAI base URL: \S+ \(model "tiny-llama"/, 'the repository\'s checkpoint, not the bundled model');
  const config = await (await fetch(`http://127.0.0.1:${port}/v2/models/tensorrt_llm/config`)).json() as { max_batch_size: number; parameters: Record<string, { string_value: string }> };
  t.equal(config.max_batch_size, 4, 'max_batch_size from config.pbtxt');
  t.equal(config.parameters.max_beam_width?.string_value, '2', 'max_beam_width from its parameters');
  const r = await fetch(`http://127.0.0.1:${port}/v2/models/tensorrt_llm/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: [1, 2, 3], request_output_len: 2, beam_width: 2 }) });
  t.equal(r.status, 200, 'beam width 2 accepted');
  child.kill('SIGTERM');
  const result = await child;
  t.equal(result.exitCode, 0, String(result.stderr));
});
