// --config, TRTLLM_CONFIG, --model-repo and `config print` as users run them: real processes, real files, and a
// real server whose executor got the file's and the flags' values (chunked context, KV reuse, beam width).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { execa } from 'execa';
import t from 'tap';

import { packageRoot } from '../../../worker/common/package-root.js';
import { fixtureDir } from '../../helpers/fixtures.js';
import { cleanEnv, startServeProcess } from '../../helpers/serve-process.js';
import { tempDir } from '../../helpers/temp-dir.js';

const bin = join(packageRoot(), 'bin', 'trtllm-launch.js');
const dir = tempDir('trtllm-config-');
t.teardown(() => execa('rm', ['-rf', dir]));

function write(name: string, text: string): string {
  const path = join(dir, name);
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, text);
  return path;
}

const run = (args: string[], env: Record<string, string> = {}) =>
  execa('node', [bin, ...args], { reject: false, env: cleanEnv(env), extendEnv: false });

interface Printed { file: { path: string; via: string } | null; settings: Record<string, { value: unknown; source: string; origin: string; ignored?: string }> }

const MODEL_FILE = `
model: ${fixtureDir('tiny-llama')}
name: tiny
gpu_device_ids: [0, 1]
batching: { max_batch_size: 4, max_num_tokens: 256 }
kv_cache: { tokens_per_block: 32, enable_reuse: true, free_mem_fraction: 0.9 }
decoding: { max_beam_width: 2 }
`;

t.test('config print: flag beats env beats file beats default, with where each came from', async (t) => {
  const file = write('model.yaml', MODEL_FILE);
  // TRTLLM_DEVICE=cpu: what the GPU keys do depends on the backend, and this asserts the CPU's (on a GPU build too).
  const r = await run(['config', 'print', '--json', '--config', file, '--max-batch-size', '8'],
    { TRTLLM_MAX_BATCH_SIZE: '6', TRTLLM_MAX_NUM_TOKENS: '512', TRTLLM_ENABLE_KV_CACHE_REUSE: 'false', TRTLLM_DEVICE: 'cpu' });
  t.equal(r.exitCode, 0, r.stderr);
  const printed = JSON.parse(r.stdout) as Printed;
  t.same(printed.file, { path: file, via: '--config' });
  const s = printed.settings;
  t.match(s['batching.max_batch_size'], { value: 8, source: 'flag', origin: '--max-batch-size' }, 'flag beats env and file');
  t.match(s['batching.max_num_tokens'], { value: 512, source: 'env', origin: 'TRTLLM_MAX_NUM_TOKENS' }, 'env beats file');
  t.match(s['kv_cache.enable_reuse'], { value: false, source: 'env', origin: 'TRTLLM_ENABLE_KV_CACHE_REUSE' }, 'env false turns a file\'s true off');
  t.match(s['kv_cache.tokens_per_block'], { value: 32, source: 'file', origin: file }, 'file beats default');
  t.match(s['decoding.max_beam_width'], { value: 2, source: 'file' });
  t.match(s['serving.http_port'], { value: 8000, source: 'default' });
  t.match(s['gpu_device_ids'], { value: [0, 1], source: 'file', ignored: /ignored on the CPU backend/ });
  t.match(s['kv_cache.free_mem_fraction'], { value: 0.9, ignored: /ignored on the CPU backend/ });

  const viaEnv = await run(['config', 'print', '--enable-kv-cache-reuse', 'false'], { TRTLLM_CONFIG: file, TRTLLM_DEVICE: 'cpu' });
  t.equal(viaEnv.exitCode, 0, viaEnv.stderr);
  t.match(viaEnv.stdout, `configuration file: ${file} (TRTLLM_CONFIG)`);
  t.match(viaEnv.stdout, /\nkv_cache\.enable_reuse +false +flag --enable-kv-cache-reuse\n/);
  t.match(viaEnv.stdout, /\nbatching\.max_batch_size +4 +file \S+model\.yaml\n/);
  t.match(viaEnv.stdout, /\ngpu_device_ids +\[0,1\] +file \S+; ignored on the CPU backend/);
  t.match(viaEnv.stdout, /\n--world-size +- +default\n/);
});

t.test('bad files: exit 2, every problem named with key, value and file; did-you-mean', async (t) => {
  const bad = write('bad.yaml', 'batching: { max_batch_size: abc, max_batch_sise: 3 }\nkv_cache: { free_mem_fraction: 2 }\nservng: {}\n');
  const r = await run(['--config', bad, '--dry-run']);
  t.equal(r.exitCode, 2);
  t.match(r.stderr, `batching.max_batch_size in ${bad} must be an integer >= 1, got "abc"`);
  t.match(r.stderr, `unknown key "batching.max_batch_sise" in ${bad}; did you mean "batching.max_batch_size"?`);
  t.match(r.stderr, `kv_cache.free_mem_fraction in ${bad} must be a number in (0, 1], got 2`);
  t.match(r.stderr, `unknown key "servng" in ${bad}; did you mean "serving"?`);
  const missing = await run(['config', 'print', '--config', join(dir, 'nope.yaml')]);
  t.equal(missing.exitCode, 2);
  t.match(missing.stderr, `--config ${join(dir, 'nope.yaml')} cannot be read: no such file`);
  const noModel = write('no-model.yaml', 'model: ./not-there\n');
  const m = await run(['config', 'print', '--config', noModel]);
  t.match(m.stderr, `model in ${noModel} must be an existing checkpoint directory, got "${join(dir, 'not-there')}"`);
  const flag = await run(['config', 'print', '--enable-chunked-context', 'maybe']);
  t.match(flag.stderr, /--enable-chunked-context must be true or false, got "maybe"/);
});

t.test('--model-repo: one model file is --config <that file>; two need --multi-model', async (t) => {
  const one = write('repo-one/llama.yaml', MODEL_FILE);
  write('repo-one/README.md', 'not a model file');
  const r = await run(['config', 'print', '--json', '--model-repo', join(dir, 'repo-one')]);
  t.equal(r.exitCode, 0, r.stderr);
  const printed = JSON.parse(r.stdout) as Printed;
  t.same(printed.file, { path: one, via: `--model-repo ${join(dir, 'repo-one')}` });
  t.match(printed.settings['batching.max_batch_size'], { value: 4, source: 'file', origin: one });
  write('repo-two/a.yaml', MODEL_FILE);
  write('repo-two/b.yml', MODEL_FILE);
  const two = await run(['--model-repo', join(dir, 'repo-two'), '--dry-run']);
  t.equal(two.exitCode, 2);
  t.match(two.stderr, `--model-repo ${join(dir, 'repo-two')} has 2 model files (a.yaml, b.yml): serve them all with --multi-model, or one of them with --config <file>`);
  const both = await run(['config', 'print', '--config', one], { TRTLLM_MODEL_REPO: join(dir, 'repo-one') });
  t.match(both.stderr, /--config \S+ and TRTLLM_MODEL_REPO \S+ both name a configuration: give one/);
});

t.test('a cluster\'s ranks get the effective values as flags', async (t) => {
  const file = write('cluster.yaml', MODEL_FILE);
  const r = await run(['--config', file, '--world-size', '2', '--oversubscribe', '--dry-run', '--enable-chunked-context'], { TRTLLM_DEVICE: 'cpu' });
  t.equal(r.exitCode, 0, r.stderr);
  t.match(r.stdout, / rank --tp 2 --pp 1 --model \S+tiny-llama /);
  for (const flag of ['--served-model-name tiny', '--max-batch-size 4', '--tokens-per-block 32', '--enable-chunked-context true', '--enable-kv-cache-reuse true', '--max-beam-width 2']) {
    t.match(r.stdout, ` ${flag}`);
  }
  t.match(r.stderr, /gpu_device_ids = \[0,1\] \(\S+cluster\.yaml\) ignored on the CPU backend/, 'said, not dropped');
});

t.test('a server from a file: chunked context, KV reuse and beam width reach the executor', async (t) => {
  const file = write('serve.yaml', `
model: ${fixtureDir('tiny-llama')}
batching: { max_num_tokens: 32, enable_chunked_context: true }
kv_cache: { tokens_per_block: 16, enable_reuse: true }
serving: { http_port: 0, grpc_port: 0, metrics_port: 0, host: 127.0.0.1 }
`);
  const { child, output: out, httpPort: port, metricsPort } = await startServeProcess(['--config', file, '--max-beam-width', '2', '--threads', '1']);
  t.match(out, /Started GRPCInferenceService at 127\.0\.0\.1:\d+/, 'serving.grpc_port from the file');
  const config = await (await fetch(`http://127.0.0.1:${port}/v2/models/tensorrt_llm/config`)).json() as { parameters: Record<string, { string_value: string }> };
  t.equal(config.parameters.max_beam_width?.string_value, '2', '--max-beam-width');
  // 40 prompt tokens > max_num_tokens 32: served only with chunked context; the second request reuses 2 blocks of 16.
  const prompt = Array.from({ length: 40 }, (_, i) => 10 + i);
  for (let i = 0; i < 2; i += 1) {
    const r = await fetch(`http://127.0.0.1:${port}/v2/models/tensorrt_llm/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: prompt, request_output_len: 2 }) });
    t.equal(r.status, 200, `request ${i + 1}: ${r.status === 200 ? '' : await r.text()}`);
  }
  const beams = await fetch(`http://127.0.0.1:${port}/v2/models/tensorrt_llm/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: [1, 2, 3], request_output_len: 2, beam_width: 2 }) });
  t.equal(beams.status, 200, 'beam width 2 accepted');
  const scrape = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const reused = /nv_trt_llm_kv_cache_block_metrics\{[^}]*kv_cache_block_type="reused"[^}]*\} (\d+)/.exec(scrape);
  t.ok(reused && Number(reused[1]) >= 2, `reused blocks after the same 40-token prompt twice: ${reused?.[1]}`);
  child.kill('SIGTERM');
  const result = await child;
  t.equal(result.exitCode, 0, String(result.stderr));
});
