// The configuration file, pure: every key's check and its message (key, file, value received), unknown keys with
// their did-you-mean, model-repo's choice of file, and the flag > env > file > default merge.
import t from 'tap';

import { closest, levenshtein } from '../../../launcher/config/did-you-mean.js';
import { type CliValue, effectiveConfig, ignoredSettings } from '../../../launcher/config/effective-config.js';
import { pickModelFile } from '../../../launcher/config/model-repo.js';
import { parseConfigText } from '../../../launcher/config/parse-config-file.js';
import { renderConfigJson, renderConfigText } from '../../../launcher/config/render-config.js';
import { CONFIG_KEYS } from '../../../launcher/config/schema.js';

const FILE = '/x/y.yaml';
const parse = (text: string) => parseConfigText(text, FILE);

t.test('a full file: typed values, the checkpoints relative to the file', async (t) => {
  const file = parse(`
model: ckpt/llama
name: llama
parallel: { tp: 2, pp: 2, ep: 2, moe_tp: 1, dp: 2, router: kv, pp_micro_batches: 1, pp_layers: [3, 1] }
gpu_device_ids: [0, 1]
quantization: fp8
participant_ids: [1, 2]
batching: { max_batch_size: 8, max_num_tokens: 512, scheduler_policy: max_utilization, enable_chunked_context: true }
kv_cache: { tokens_per_block: 32, max_tokens: 4096, free_mem_fraction: 0.9, enable_reuse: true, dtype: fp8, max_attention_window_size: 1024, event_buffer_max_size: 64 }
decoding: { max_beam_width: 4, speculative_ngram: 5, draft_model: ckpt/draft, medusa_heads: ckpt/medusa, medusa_choices: [[0], [0, 0], [1]], eagle_heads: ckpt/eagle, eagle_choices: [[0], [1], [0, 0]], num_draft_tokens: 3, speculative_max_batch: 16 }
lora: { modules: [sql=adapters/sql, chat=/abs/chat], enable: true, max_loras: 4, cache_optimal_adapter_size: 16, cache_max_adapter_size: 32, cache_gpu_memory_fraction: 0.1, cache_host_memory_bytes: 1000000 }
serving: { max_queue_size: 0, exclude_input_in_output: true, decoupled: true, http_port: 9000, grpc_port: 9001, metrics_port: 9002, host: 127.0.0.1, hang_timeout: 45 }
`);
  t.equal(file.values.get('model'), '/x/ckpt/llama', 'relative to the file');
  t.equal(file.values.get('batching.max_batch_size'), 8);
  t.equal(file.values.get('kv_cache.enable_reuse'), true);
  t.equal(file.values.get('kv_cache.event_buffer_max_size'), 64);
  t.equal(file.values.get('kv_cache.max_attention_window_size'), 1024);
  t.equal(file.values.get('serving.hang_timeout'), 45);
  t.equal(file.values.get('decoding.speculative_ngram'), 5);
  t.equal(file.values.get('decoding.draft_model'), '/x/ckpt/draft', 'the draft model relative to the file too');
  t.equal(file.values.get('decoding.medusa_heads'), '/x/ckpt/medusa', 'the Medusa heads relative to the file too');
  t.equal(file.values.get('decoding.eagle_heads'), '/x/ckpt/eagle', 'the EAGLE heads relative to the file too');
  t.equal(file.values.get('decoding.medusa_choices'), '[[0],[0,0],[1]]', 'the paths as the flag\'s JSON text');
  t.equal(file.values.get('decoding.eagle_choices'), '[[0],[1],[0,0]]', 'EAGLE\'s paths likewise');
  t.equal(file.values.get('decoding.num_draft_tokens'), 3);
  t.equal(file.values.get('decoding.speculative_max_batch'), 16);
  t.same(file.values.get('lora.modules'), ['sql=/x/adapters/sql', 'chat=/abs/chat'], 'the adapters relative to the file too');
  t.equal(file.values.get('lora.cache_host_memory_bytes'), 1000000);
  t.same(file.values.get('gpu_device_ids'), [0, 1]);
  t.same(file.values.get('participant_ids'), [1, 2]);
  t.equal(file.values.get('quantization'), 'fp8');
  t.equal(file.values.get('kv_cache.dtype'), 'fp8');
  t.equal(file.values.get('parallel.ep'), 2);
  t.equal(file.values.get('parallel.moe_tp'), 1);
  t.equal(file.values.get('parallel.dp'), 2);
  t.equal(file.values.get('parallel.router'), 'kv');
  t.equal(file.values.get('parallel.pp_micro_batches'), 1);
  t.same(file.values.get('parallel.pp_layers'), [3, 1], 'a YAML list (the flag\'s "3,1")');
  t.equal(file.values.size, CONFIG_KEYS.length, 'every key of the schema was set');
  t.equal(parse('').values.size, 0, 'an empty file sets nothing');
  t.equal(parse('model: /abs/ckpt').values.get('model'), '/abs/ckpt');
});

t.test('every bad value names the key, the file and the value', async (t) => {
  const cases: [string, string][] = [
    ['batching: { max_batch_size: abc }', 'batching.max_batch_size in /x/y.yaml must be an integer >= 1, got "abc"'],
    ['quantization: int4', 'quantization in /x/y.yaml must be one of none, fp8, got "int4"'],
    ['kv_cache: { dtype: int8 }', 'kv_cache.dtype in /x/y.yaml must be one of auto, fp8, got "int8"'],
    ['batching: { max_batch_size: 0 }', 'batching.max_batch_size in /x/y.yaml must be an integer >= 1, got 0'],
    ['batching: { max_batch_size: "8" }', 'batching.max_batch_size in /x/y.yaml must be an integer >= 1, got "8"'],
    ['batching: { max_num_tokens: 1.5 }', 'batching.max_num_tokens in /x/y.yaml must be an integer >= 1, got 1.5'],
    ['batching: { scheduler_policy: fifo }', 'batching.scheduler_policy in /x/y.yaml must be one of max_utilization, guaranteed_no_evict, got "fifo"'],
    ['batching: { enable_chunked_context: maybe }', 'batching.enable_chunked_context in /x/y.yaml must be true or false, got "maybe"'],
    ['kv_cache: { tokens_per_block: -1 }', 'kv_cache.tokens_per_block in /x/y.yaml must be an integer >= 1, got -1'],
    ['kv_cache: { max_tokens: [1] }', 'kv_cache.max_tokens in /x/y.yaml must be an integer >= 1, got [1]'],
    ['kv_cache: { free_mem_fraction: 1.5 }', 'kv_cache.free_mem_fraction in /x/y.yaml must be a number in (0, 1], got 1.5'],
    ['kv_cache: { enable_reuse: 1 }', 'kv_cache.enable_reuse in /x/y.yaml must be true or false, got 1'],
    ['kv_cache: { max_attention_window_size: 0 }', 'kv_cache.max_attention_window_size in /x/y.yaml must be an integer in [1, 2147483647], got 0'],
    ['kv_cache: { max_attention_window_size: -1 }', 'kv_cache.max_attention_window_size in /x/y.yaml must be an integer in [1, 2147483647], got -1'],
    ['kv_cache: { max_attention_window_size: 1.5 }', 'kv_cache.max_attention_window_size in /x/y.yaml must be an integer in [1, 2147483647], got 1.5'],
    ['kv_cache: { max_attention_window_size: abc }', 'kv_cache.max_attention_window_size in /x/y.yaml must be an integer in [1, 2147483647], got "abc"'],
    ['parallel: { pp_micro_batches: 0 }', 'parallel.pp_micro_batches in /x/y.yaml must be an integer >= 1, got 0'],
    ['parallel: { pp_layers: [3, 0] }', "parallel.pp_layers in /x/y.yaml must be 'balanced' or a comma-separated list of layer counts >= 1, one per pipeline stage, got [3,0]"],
    ['parallel: { pp_layers: even }', "parallel.pp_layers in /x/y.yaml must be 'balanced' or a comma-separated list of layer counts >= 1, one per pipeline stage, got \"even\""],
    ['decoding: { max_beam_width: 0 }', 'decoding.max_beam_width in /x/y.yaml must be an integer >= 1, got 0'],
    ['serving: { max_queue_size: -1 }', 'serving.max_queue_size in /x/y.yaml must be an integer >= 0, got -1'],
    ['serving: { http_port: 70000 }', 'serving.http_port in /x/y.yaml must be a port number in [0, 65535], got 70000'],
    ['serving: { metrics_port: "x" }', 'serving.metrics_port in /x/y.yaml must be a port number in [0, 65535], got "x"'],
    ['serving: { hang_timeout: -1 }', 'serving.hang_timeout in /x/y.yaml must be an integer >= 0, got -1'],
    ['serving: { host: "" }', 'serving.host in /x/y.yaml must be a non-empty string, got ""'],
    ['serving: { decoupled: yes }', 'serving.decoupled in /x/y.yaml must be true or false, got "yes"'],
    ['serving: { exclude_input_in_output: null }', 'serving.exclude_input_in_output in /x/y.yaml must be true or false, got null'],
    ['parallel: { tp: 0 }', 'parallel.tp in /x/y.yaml must be an integer >= 1, got 0'],
    ['parallel: { pp: two }', 'parallel.pp in /x/y.yaml must be an integer >= 1, got "two"'],
    ['parallel: { ep: 0 }', 'parallel.ep in /x/y.yaml must be an integer >= 1, got 0'],
    ['gpu_device_ids: 0', 'gpu_device_ids in /x/y.yaml must be a non-empty list of integers >= 0, got 0'],
    ['gpu_device_ids: [0, -1]', 'gpu_device_ids in /x/y.yaml must be a non-empty list of integers >= 0, got [0,-1]'],
    ['model: 3', 'model in /x/y.yaml must be a non-empty string, got 3'],
    ['name:', 'name in /x/y.yaml must be a non-empty string, got null'],
    ['batching: 8', 'batching in /x/y.yaml must be a mapping (max_batch_size, max_num_tokens, scheduler_policy, enable_chunked_context), got 8'],
    ['- a\n- b', '/x/y.yaml must be a YAML mapping of keys (model, batching, ...), got ["a","b"]'],
  ];
  for (const [text, message] of cases) t.throws(() => parse(text), { message }, text);
  t.throws(() => parse('batching: { max_batch_size: 8, max_batch_size: 9 }'), /\/x\/y\.yaml is not valid YAML: .*[Mm]ap keys must be unique/);
  t.throws(() => parse('batching: [\n'), /\/x\/y\.yaml is not valid YAML: .*line/);
});

t.test('all problems of a file at once', async (t) => {
  const error = t.throws(() => parse('batching: { max_batch_size: abc }\nserving: { http_port: -1 }')) as Error;
  t.equal(error.message.split('\n').length, 2);
});

t.test('unknown keys: an error with a did-you-mean over the keys of that section', async (t) => {
  t.throws(() => parse('batching: { max_batch_sise: 8 }'), {
    message: 'unknown key "batching.max_batch_sise" in /x/y.yaml; did you mean "batching.max_batch_size"? (known in batching: max_batch_size, max_num_tokens, scheduler_policy, enable_chunked_context)',
  });
  t.throws(() => parse('batching: { max_batch: 8 }'), /did you mean "batching\.max_batch_size"\?/, 'a shortened key');
  t.throws(() => parse('kv_cache: { enable_reuse_blocks: true }'), /unknown key "kv_cache\.enable_reuse_blocks" .*did you mean "kv_cache\.enable_reuse"\?/);
  t.throws(() => parse('batchng: {}'), /unknown key "batchng" in \/x\/y\.yaml; did you mean "batching"\? \(known: model, name, gpu_device_ids, quantization, participant_ids, parallel/);
  t.throws(() => parse('modle: /m'), /did you mean "model"\?/);
  t.throws(() => parse('batching: { tokens_per_block: 16 }'), /unknown key "batching\.tokens_per_block" .*did you mean "kv_cache\.tokens_per_block"\?/, 'a key in the wrong section');
  t.throws(() => parse('frobnicate: 1'), { message: /^unknown key "frobnicate" in \/x\/y\.yaml \(known: / }, 'nothing close: no guess');
  t.equal(levenshtein('kitten', 'sitting'), 3);
  t.equal(levenshtein('', 'abc'), 3);
  t.equal(closest('serving', ['serving']), 'serving');
  t.equal(closest('zzz', ['model', 'name']), undefined);
});

t.test('--model-repo: one file is the configuration; several need --multi-model', async (t) => {
  t.equal(pickModelFile('/repo', ['llama.yaml', 'README.md']), '/repo/llama.yaml');
  t.equal(pickModelFile('/repo', ['llama.yml']), '/repo/llama.yml');
  t.throws(() => pickModelFile('/repo', ['b.yaml', 'a.yml']), {
    message: '--model-repo /repo has 2 model files (a.yml, b.yaml): serve them all with --multi-model, or one of them with --config <file>',
  });
  t.throws(() => pickModelFile('/repo', ['notes.txt']), { message: '--model-repo /repo has no model files (*.yaml, *.yml) and is not a Triton model repository (no tensorrt_llm/config.pbtxt)' });
});

const cli = (attr: string, flag: string, value: unknown, source: string | undefined): CliValue => ({ attr, flag, env: `TRTLLM_${attr.toUpperCase()}`, value, source });

t.test('flag beats env beats file beats default; frozen; ignored keys reported', async (t) => {
  const file = { ...parse('batching: { max_batch_size: 4, max_num_tokens: 256 }\nkv_cache: { tokens_per_block: 32, free_mem_fraction: 0.5 }\nserving: { http_port: 9000 }'), via: '--config' };
  const config = effectiveConfig([
    cli('maxBatchSize', '--max-batch-size', 8, 'cli'),
    cli('maxNumTokens', '--max-num-tokens', 512, 'env'),
    cli('tokensPerBlock', '--tokens-per-block', undefined, undefined),
    cli('httpPort', '--http-port', 8000, 'default'),
    cli('maxQueueSize', '--max-queue-size', undefined, undefined),
    cli('apiKey', '--api-key', 'secret', 'env'),
    cli('threads', '--threads', 2, 'cli'),
  ], file);
  t.match(config.options, { maxBatchSize: 8, maxNumTokens: 512, tokensPerBlock: 32, httpPort: 9000, maxQueueSize: undefined, apiKey: 'secret', threads: 2 });
  const by = Object.fromEntries(config.settings.map((s) => [s.key, s]));
  t.match(by['batching.max_batch_size'], { value: 8, source: 'flag', origin: '--max-batch-size' });
  t.match(by['batching.max_num_tokens'], { value: 512, source: 'env', origin: 'TRTLLM_MAXNUMTOKENS' });
  t.match(by['kv_cache.tokens_per_block'], { value: 32, source: 'file', origin: FILE });
  t.match(by['serving.http_port'], { value: 9000, source: 'file' }, 'a file beats a commander default');
  t.match(by['serving.max_queue_size'], { value: undefined, source: 'default', unset: '0 = unbounded' });
  t.match(by['--api-key'], { value: '(set)', source: 'env' }, 'secrets are not printed');
  t.match(by['--threads'], { value: 2, source: 'flag' });
  t.same(ignoredSettings(config).map((s) => s.key), ['kv_cache.free_mem_fraction']);
  t.ok(Object.isFrozen(config) && Object.isFrozen(config.options) && Object.isFrozen(config.settings));
  t.throws(() => { (config.options as { maxBatchSize: number }).maxBatchSize = 1; }, TypeError);
  const text = renderConfigText(config);
  t.match(text, /^configuration file: \/x\/y\.yaml \(--config\)\nkey +value +from\n/);
  t.match(text, /\nkv_cache\.free_mem_fraction +0\.5 +file \/x\/y\.yaml; ignored on the CPU backend/);
  t.match(text, /\nbatching\.max_num_tokens +512 +env TRTLLM_MAXNUMTOKENS\n/);
  t.notMatch(text, /secret/);
  const json = JSON.parse(renderConfigJson(config)) as { settings: Record<string, { value: unknown; source: string }> };
  t.same(json.settings['batching.max_batch_size'], { value: 8, source: 'flag', origin: '--max-batch-size', flag: '--max-batch-size' });
  t.match(json.settings['serving.max_queue_size'], { value: null, source: 'default', unset: '0 = unbounded' });
});

t.test('gpu_device_ids and kv_cache.free_mem_fraction set their options; ignored only where the backend is the CPU', async (t) => {
  const file = { ...parse('gpu_device_ids: [2, 3]\nkv_cache: { free_mem_fraction: 0.5 }\nparticipant_ids: [1]'), via: '--config' };
  const device = (value: string, source = 'default') => cli('device', '--device', value, source);
  const gpuBuild = { backends: ['cpu', 'cuda'], cudaDevices: 4 };
  const onGpu = effectiveConfig([device('auto'), cli('gpuDeviceIds', '--gpu-device-ids', undefined, undefined)], file, gpuBuild);
  t.match(onGpu.options, { gpuDeviceIds: '2,3', kvCacheFreeGpuMemFraction: 0.5 }, 'the file\'s list as the flag would give it');
  t.same(ignoredSettings(onGpu).map((s) => s.key), ['participant_ids'], 'applied on the CUDA backend');
  const byKey = (c: typeof onGpu) => Object.fromEntries(c.settings.map((s) => [s.key, s]));
  t.match(byKey(onGpu)['gpu_device_ids'], { value: [2, 3], source: 'file', flag: '--gpu-device-ids' });
  t.notOk(byKey(onGpu)['--gpu-device-ids'], 'one row per option: the file key, not also the flag');

  const forcedCpu = effectiveConfig([device('cpu', 'cli')], file, gpuBuild);
  t.same(ignoredSettings(forcedCpu).map((s) => [s.key, s.ignored]), [
    ['gpu_device_ids', 'ignored on the CPU backend (ranks run on CPU cores)'],
    ['participant_ids', 'used only by --multi-model --no-spawn (the job ranks of this model)'],
    ['kv_cache.free_mem_fraction', 'ignored on the CPU backend (KV capacity comes from kv_cache.max_tokens)'],
  ], '--device cpu on a GPU build');
  t.same(ignoredSettings(effectiveConfig([device('auto')], file, { backends: ['cpu'], cudaDevices: 0 })).length, 3, 'a CPU-only build');

  const flagOnCpu = effectiveConfig([cli('gpuDeviceIds', '--gpu-device-ids', '0,1', 'cli')]);
  t.match(ignoredSettings(flagOnCpu), [{ key: 'gpu_device_ids', value: '0,1', source: 'flag', origin: '--gpu-device-ids', ignored: /CPU backend/ }], 'a flag is reported too');
  const unset = effectiveConfig([cli('gpuDeviceIds', '--gpu-device-ids', undefined, undefined)]);
  t.same(ignoredSettings(unset), [], 'nothing set: nothing ignored');
  t.match(renderConfigText(unset), /\ngpu_device_ids +local rank \(CUDA backend\) +default/);
});
