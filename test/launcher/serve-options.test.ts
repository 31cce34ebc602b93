// The launcher's derivations of the option table, pure: commander options (flags, env, defaults, parsers), the
// ranks' argv read back by the rank command into the same values, and one rule per kind whether a value came from a
// flag or from a configuration file.
import { Command } from 'commander';
import t from 'tap';

import { parseConfigText } from '../../launcher/config/parse-config-file.js';
import { CONFIG_KEYS } from '../../launcher/config/schema.js';
import { rankArguments } from '../../launcher/option-argv.js';
import { addServeOptions } from '../../launcher/serve-options.js';
import { SERVE_OPTIONS, type ServeCliOptions } from '../../worker/options/serve-option-table.js';
import { FULL } from '../helpers/serve-cli-options.js';

// Commander reads TRTLLM_* from process.env: none from the caller's environment, only the test's own.
const callers = Object.keys(process.env).filter((name) => name.startsWith('TRTLLM_') && name !== 'TRTLLM_ADDON_PATH');
for (const name of callers) delete process.env[name];

function parse(argv: string[], env: Record<string, string> = {}): ServeCliOptions {
  Object.assign(process.env, env);
  try {
    const command = addServeOptions(new Command('rank')).exitOverride().configureOutput({ writeErr: () => {} });
    command.parse(argv, { from: 'user' });
    return command.opts<ServeCliOptions>();
  } finally {
    for (const name of Object.keys(env)) delete process.env[name];
  }
}

t.test('every serve option is a commander option with its env fallback and default', async (t) => {
  const command = addServeOptions(new Command('serve'));
  t.equal(command.options.length, SERVE_OPTIONS.length);
  for (const d of SERVE_OPTIONS) {
    const option = command.options.find((o) => o.long === d.flag);
    t.ok(option, d.flag);
    t.equal(option!.attributeName(), d.name, `${d.flag} sets ${d.name}`);
    t.equal(option!.envVar, d.env, `${d.flag} falls back to ${d.env}`);
  }
  const defaults = parse([]);
  t.match(defaults, { launcher: 'auto', startupTimeout: 300, device: 'auto', loadFormat: 'auto', host: '0.0.0.0', httpPort: 8000, grpcPort: 8001, metricsPort: 8002, logLevel: 'info', maxBodyBytes: 8 * 1024 * 1024, drainTimeout: 30, oversubscribe: false });
  t.match(defaults.model, /examples\/models\/brown-llama-17m$/, 'the bundled model');
  t.same(parse(['--enable-chunked-context']).enableChunkedContext, true, 'a toggle alone is on');
  t.same(parse([], { TRTLLM_ENABLE_KV_CACHE_REUSE: 'false' }).enableKvCacheReuse, false, 'TRTLLM_X=false means false');
  t.same(parse([], { TRTLLM_MAX_BATCH_SIZE: '6' }).maxBatchSize, 6);
  t.throws(() => parse(['--max-batch-size', '0']), /--max-batch-size must be an integer >= 1, got "0"/);
  t.throws(() => parse(['--kv-cache-free-gpu-mem-fraction', '1.5']), /--kv-cache-free-gpu-mem-fraction must be a number in \(0, 1\], got "1.5"/);
});

t.test('--max-attention-window-size: an integer >= 1 held in 32 bits, from the flag, the env or the file', async (t) => {
  t.equal(parse([]).maxAttentionWindowSize, undefined, 'unset: the model\'s own windows');
  t.equal(parse(['--max-attention-window-size', '4096']).maxAttentionWindowSize, 4096);
  t.equal(parse(['--max-attention-window-size=1']).maxAttentionWindowSize, 1);
  t.equal(parse([], { TRTLLM_MAX_ATTENTION_WINDOW_SIZE: '2048' }).maxAttentionWindowSize, 2048, 'TRTLLM_MAX_ATTENTION_WINDOW_SIZE');
  t.equal(parse(['--max-attention-window-size', '64'], { TRTLLM_MAX_ATTENTION_WINDOW_SIZE: '2048' }).maxAttentionWindowSize, 64, 'the flag beats the env');
  for (const bad of ['0', '-1', '1.5', 'abc', 'true', '', '2147483648']) {
    t.throws(() => parse([`--max-attention-window-size=${bad}`]),
      { message: `--max-attention-window-size must be an integer in [1, 2147483647], got "${bad}"` }, `flag ${JSON.stringify(bad)}`);
  }
  t.throws(() => parse([], { TRTLLM_MAX_ATTENTION_WINDOW_SIZE: 'abc' }), /--max-attention-window-size must be an integer in \[1, 2147483647\], got "abc"/, 'env');
  t.equal(parseConfigText('kv_cache: { max_attention_window_size: 4096 }', '/f.yaml').values.get('kv_cache.max_attention_window_size'), 4096);
  for (const [yaml, shown] of [['0', '0'], ['-1', '-1'], ['1.5', '1.5'], ['abc', '"abc"'], ['"64"', '"64"'], ['true', 'true'], ['2147483648', '2147483648']]) {
    t.throws(() => parseConfigText(`kv_cache: { max_attention_window_size: ${yaml} }`, '/f.yaml'),
      { message: `kv_cache.max_attention_window_size in /f.yaml must be an integer in [1, 2147483647], got ${shown}` }, `file ${yaml}`);
  }
  t.same(rankArguments({ ...FULL, maxAttentionWindowSize: 300 }).join(' ').match(/--max-attention-window-size \d+/)?.[0], '--max-attention-window-size 300', 'forwarded to ranks');
  t.notOk(rankArguments({ ...FULL, maxAttentionWindowSize: undefined }).includes('--max-attention-window-size'), 'unset: not forwarded');
});

t.test('a rank reads back exactly what the launcher forwards; the key stays out of argv', async (t) => {
  const argv = rankArguments(FULL);
  t.equal(argv[0], '--model', 'the model first (the dry run\'s line reads "rank --tp N --pp N --model ...")');
  t.notOk(argv.includes('--api-key') || argv.includes('sekret'), 'the API key travels in the environment');
  for (const flag of ['--world-size', '--launcher', '--hostfile', '--dry-run', '--tp', '--pp', '--log-dir']) t.notOk(argv.includes(flag), `${flag}: the launcher's`);
  const back = parse(argv);
  for (const d of SERVE_OPTIONS.filter((o) => o.rank === 'argv')) t.same(back[d.name], FULL[d.name], `${d.flag} round-trips`);
  t.same(parse(rankArguments({ ...FULL, authHealth: false, servedModelName: '-odd' })).servedModelName, '-odd', 'a value like a flag is glued to it');
  t.notOk(rankArguments({ ...FULL, authHealth: false }).includes('--auth-health'), 'a switch that is off is left out');
});

t.test('a file key and its flag refuse a bad value in the same words', async (t) => {
  const cases: [string, string, string][] = [
    ['--max-batch-size', 'batching: { max_batch_size: 0 }', 'must be an integer >= 1'],
    ['--http-port', 'serving: { http_port: 70000 }', 'must be a port number in [0, 65535]'],
    ['--kv-cache-free-gpu-mem-fraction', 'kv_cache: { free_mem_fraction: 2 }', 'must be a number in (0, 1]'],
    ['--scheduler-policy', 'batching: { scheduler_policy: fifo }', 'must be one of max_utilization, guaranteed_no_evict'],
    ['--enable-kv-cache-reuse', 'kv_cache: { enable_reuse: maybe }', 'must be true or false'],
    ['--max-attention-window-size', 'kv_cache: { max_attention_window_size: 0 }', 'must be an integer in [1, 2147483647]'],
  ];
  for (const [flag, yaml, rule] of cases) {
    t.throws(() => parse([flag, 'bogus']), { message: new RegExp(`${flag} ${rule.replace(/[()[\]]/g, '\\$&')}, got "bogus"`) }, flag);
    t.throws(() => parseConfigText(yaml, '/f.yaml'), { message: new RegExp(`in /f\\.yaml ${rule.replace(/[()[\]]/g, '\\$&')}, got`) }, yaml);
  }
  for (const key of CONFIG_KEYS.filter((k) => k.option)) {
    t.ok(SERVE_OPTIONS.some((d) => d.name === key.option && d.file?.key === key.key), `${key.key} is ${key.option}'s file key`);
  }
  t.same(parseConfigText('gpu_device_ids: [0, 1]', '/f.yaml').values.get('gpu_device_ids'), [0, 1]);
});

t.test('--eagle-choices: --medusa-choices\' paths, from the flag, the env or the file; a bad value named', async (t) => {
  t.equal(parse([]).eagleChoices, undefined, 'unset: a chain of guesses');
  t.equal(parse(['--eagle-choices', '[[0], [1], [0, 0]]']).eagleChoices, '[[0],[1],[0,0]]');
  t.equal(parse([], { TRTLLM_EAGLE_CHOICES: '[[0]]' }).eagleChoices, '[[0]]', 'TRTLLM_EAGLE_CHOICES');
  t.equal(parseConfigText('decoding: { eagle_choices: [[0], [0, 0]] }', '/f.yaml').values.get('decoding.eagle_choices'), '[[0],[0,0]]');
  for (const bad of ['[[10]]', '[]', 'nope']) {
    t.throws(() => parse(['--eagle-choices', bad]),
      { message: `--eagle-choices must be a list of paths of ranks, each a non-empty list of integers in [0, 10), e.g. [[0], [0, 0], [1]]; at most 63 paths, got "${bad}"` }, bad);
  }
  t.throws(() => parseConfigText('decoding: { eagle_choices: [[0.5]] }', '/f.yaml'), { message: /^decoding\.eagle_choices in \/f\.yaml must be a list of paths of ranks/ });
});

t.test('--lora-modules: several values, several flags, the env, the file; bad ones named', async (t) => {
  t.equal(parse([]).loraModules, undefined, 'unset: no adapters');
  t.same(parse(['--lora-modules', 'sql=/a/sql', 'chat=/b/chat']).loraModules, ['sql=/a/sql', 'chat=/b/chat'], 'several values (vLLM\'s spelling)');
  t.same(parse(['--lora-modules', 'sql=/a/sql', '--max-batch-size', '4', '--lora-modules=chat=/b/chat']).loraModules, ['sql=/a/sql', 'chat=/b/chat'], 'several flags, in order');
  t.same(parse(['--lora-modules', 'sql=/a/sql,chat=/b/chat']).loraModules, ['sql=/a/sql', 'chat=/b/chat'], 'commas');
  t.same(parse([], { TRTLLM_LORA_MODULES: 'sql=/a/sql,chat=/b/chat' }).loraModules, ['sql=/a/sql', 'chat=/b/chat'], 'TRTLLM_LORA_MODULES');
  t.same(parse(['--lora-modules', 'x=/x'], { TRTLLM_LORA_MODULES: 'sql=/a/sql' }).loraModules, ['x=/x'], 'the flag beats the env');
  const rule = 'must be name=dir entries (a PEFT adapter directory under a name without spaces, commas or slashes), separated by commas or given as separate arguments';
  t.throws(() => parse(['--lora-modules', 'sql']), { message: `--lora-modules ${rule}, got "sql"` });
  t.throws(() => parse(['--lora-modules', 'a/b=/x']), { message: `--lora-modules ${rule}, got "a/b=/x"` });
  t.throws(() => parse(['--lora-modules', 'a=/x', 'a=/y']), { message: '--lora-modules must name each adapter once ("a" is given twice), got "a=/y"' });
  t.throws(() => parse([], { TRTLLM_LORA_MODULES: 'a=' }), { message: `--lora-modules ${rule}, got "a="` }, 'env');
  t.same(parseConfigText('lora: { modules: { sql: ad/sql } }', '/f/m.yaml').values.get('lora.modules'), ['sql=/f/ad/sql'], 'a file\'s mapping, relative to it');
  t.throws(() => parseConfigText('lora: { modules: sql }', '/f.yaml'),
    { message: 'lora.modules in /f.yaml must be a list of "name=dir" strings, a list of {name, path} mappings, or a mapping of name to path, got "sql"' });
  t.same(parse(rankArguments({ ...FULL, loraModules: ['a=/x', 'b=-odd'] })).loraModules, ['a=/x', 'b=-odd'], 'forwarded to ranks as one flag');
  t.notOk(rankArguments({ ...FULL, loraModules: undefined }).includes('--lora-modules'), 'unset: not forwarded');
});

t.test('the LoRA switches and cache sizes: Triton\'s lora_cache_* parameters with dashes', async (t) => {
  t.equal(parse(['--enable-lora']).enableLora, true);
  t.equal(parse(['--enable-lora', 'false']).enableLora, false);
  t.equal(parse([], { TRTLLM_ENABLE_LORA: '1' }).enableLora, true);
  const o = parse(['--max-loras', '0', '--lora-cache-optimal-adapter-size', '16', '--lora-cache-max-adapter-size', '64',
    '--lora-cache-gpu-memory-fraction', '0.1', '--lora-cache-host-memory-bytes', '1048576']);
  t.match(o, { maxLoras: 0, loraCacheOptimalAdapterSize: 16, loraCacheMaxAdapterSize: 64, loraCacheGpuMemoryFraction: 0.1, loraCacheHostMemoryBytes: 1048576 });
  t.throws(() => parse(['--max-loras', '-1']), { message: '--max-loras must be an integer in [0, 2147483647], got "-1"' });
  t.throws(() => parse(['--lora-cache-max-adapter-size', '0']), { message: '--lora-cache-max-adapter-size must be an integer in [1, 2147483647], got "0"' });
  t.throws(() => parse(['--lora-cache-gpu-memory-fraction', '2']), { message: '--lora-cache-gpu-memory-fraction must be a number in (0, 1], got "2"' });
  t.throws(() => parse(['--lora-cache-host-memory-bytes', '1.5']), { message: '--lora-cache-host-memory-bytes must be an integer >= 1, got "1.5"' });
  const file = parseConfigText('lora: { enable: true, max_loras: 2, cache_optimal_adapter_size: 8, cache_max_adapter_size: 16, cache_gpu_memory_fraction: 0.2, cache_host_memory_bytes: 4096 }', '/f.yaml');
  t.same([...file.values.entries()], [['lora.enable', true], ['lora.max_loras', 2], ['lora.cache_optimal_adapter_size', 8],
    ['lora.cache_max_adapter_size', 16], ['lora.cache_gpu_memory_fraction', 0.2], ['lora.cache_host_memory_bytes', 4096]]);
  t.throws(() => parseConfigText('lora: { max_loras: -1 }', '/f.yaml'), { message: 'lora.max_loras in /f.yaml must be an integer in [0, 2147483647], got -1' });
});
