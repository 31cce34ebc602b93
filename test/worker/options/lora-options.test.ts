// The LoRA options, pure but for the directory check: --lora-modules' entries from a flag's text, a file's three
// forms and several flags gathered; their task ids (1, 2, ... in the order given); how the LoRA options go together
// (loraProblem); the adapters' directories; and the executor's native config from the flat options.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';

import { nativeLoraConfig, takeLoraOptions } from '../../../worker/executor/lora-config.js';
import {
  loraEnabled, loraModuleDirsProblem, loraModulesKind, loraModulesRelativeTo, loraProblem, servedAdapters,
} from '../../../worker/options/lora-options.js';
import { tempDir } from '../../helpers/temp-dir.js';

const ENTRY_RULE = 'must be name=dir entries (a PEFT adapter directory under a name without spaces, commas or slashes), separated by commas or given as separate arguments';
const FILE_RULE = 'must be a list of "name=dir" strings, a list of {name, path} mappings, or a mapping of name to path';

t.test('a flag\'s text: name=dir entries, separated by commas; names unique', async (t) => {
  t.same(loraModulesKind.fromText('sql=/a/sql'), { ok: true, value: ['sql=/a/sql'] });
  t.same(loraModulesKind.fromText(' sql = /a/sql , chat=rel/chat,'), { ok: true, value: ['sql=/a/sql', 'chat=rel/chat'] }, 'trimmed; an empty entry skipped');
  t.same(loraModulesKind.fromText('x=/dir=with=equals'), { ok: true, value: ['x=/dir=with=equals'] }, 'the name ends at the first =');
  for (const bad of ['', 'sql', '=/a', 'sql=', 'a b=/x', 'a/b=/x', 'sql=/a,chat']) {
    t.same(loraModulesKind.fromText(bad), { ok: false, rule: ENTRY_RULE }, JSON.stringify(bad));
  }
  t.same(loraModulesKind.fromText('a=/x,a=/y'), { ok: false, rule: 'must name each adapter once ("a" is given twice)' });
  t.same(loraModulesKind.append!(['a=/x'], ['b=/y']), { ok: true, value: ['a=/x', 'b=/y'] }, 'several flags gather in order');
  t.same(loraModulesKind.append!(['a=/x'], ['a=/y']), { ok: false, rule: 'must name each adapter once ("a" is given twice)' });
});

t.test('a file\'s three forms, and its directories relative to the file', async (t) => {
  const want = { ok: true, value: ['sql=ckpt/sql', 'chat=/abs/chat'] };
  t.same(loraModulesKind.fromFile(['sql=ckpt/sql', 'chat=/abs/chat']), want, 'a list of name=dir strings');
  t.same(loraModulesKind.fromFile([{ name: 'sql', path: 'ckpt/sql' }, { name: 'chat', path: '/abs/chat' }]), want, 'a list of {name, path}');
  t.same(loraModulesKind.fromFile({ sql: 'ckpt/sql', chat: '/abs/chat' }), want, 'a mapping of name to path');
  t.same(loraModulesKind.fromFile(['sql=ckpt/sql', { name: 'chat', path: '/abs/chat' }]), want, 'the two list forms mixed');
  for (const bad of ['sql=ckpt/sql', [], {}, ['sql'], [{ name: 'sql' }], [{ name: 'sql', path: 'p', rank: 8 }], { 'a/b': 'p' }, { sql: 3 }, [3], null]) {
    t.same(loraModulesKind.fromFile(bad), { ok: false, rule: FILE_RULE }, JSON.stringify(bad));
  }
  t.same(loraModulesKind.fromFile([{ name: 'a', path: '/x' }, 'a=/y']), { ok: false, rule: 'must name each adapter once ("a" is given twice)' });
  t.same(loraModulesRelativeTo(['sql=ckpt/sql', 'chat=/abs/chat'], '/models'), ['sql=/models/ckpt/sql', 'chat=/abs/chat']);
});

t.test('task ids 1, 2, ... in the order given, directories absolute', async (t) => {
  t.same(servedAdapters(['sql=/a/sql', 'chat=/b/chat']), [{ name: 'sql', taskId: 1, dir: '/a/sql' }, { name: 'chat', taskId: 2, dir: '/b/chat' }]);
  t.same(servedAdapters(['x=rel']), [{ name: 'x', taskId: 1, dir: join(process.cwd(), 'rel') }]);
  t.same(servedAdapters(undefined), []);
});

t.test('the LoRA options together', async (t) => {
  t.equal(loraEnabled({}), false);
  t.equal(loraEnabled({ enableLora: true }), true);
  t.equal(loraEnabled({ loraModules: ['a=/x'] }), true, 'implied by --lora-modules');
  t.equal(loraProblem({}), undefined);
  t.equal(loraProblem({ loraModules: ['a=/x'], maxLoras: 2, loraCacheOptimalAdapterSize: 8, loraCacheMaxAdapterSize: 8 }), undefined);
  t.equal(loraProblem({ loraModules: ['a=/x'], enableLora: false }),
    '--lora-modules a=/x serves LoRA adapters, which --enable-lora false turns off: drop one of them');
  t.equal(loraProblem({ maxLoras: 4 }),
    '--max-loras 4 sizes the LoRA adapter cache, but LoRA is off: add --enable-lora or --lora-modules, or drop it');
  t.equal(loraProblem({ enableLora: false, loraCacheHostMemoryBytes: 10 }),
    '--lora-cache-host-memory-bytes 10 sizes the LoRA adapter cache, but LoRA is off: add --enable-lora or --lora-modules, or drop it');
  t.equal(loraProblem({ enableLora: true, loraCacheOptimalAdapterSize: 16, loraCacheMaxAdapterSize: 8 }),
    '--lora-cache-optimal-adapter-size 16 exceeds --lora-cache-max-adapter-size 8: the rank the slots are sized for must be one the cache accepts; lower the first or raise the second');
  t.equal(loraProblem({ loraModules: ['a=/x', 'llama=/y'], model: '/m/llama' }),
    '--lora-modules llama=/y: the name "llama" is the base model\'s (an OpenAI request naming it runs the base); give the adapter another name',
    'the checkpoint directory\'s name is the base model\'s OpenAI id');
  t.equal(loraProblem({ loraModules: ['llama=/y'], model: '/m/llama', servedModelName: 'base' }), undefined, 'unless --served-model-name renames it');
  t.match(loraProblem({ loraModules: ['ensemble=/y'] }), /the name "ensemble" is the base model's/);
});

t.test('the adapters\' directories: there, with adapter_config.json', async (t) => {
  const dir = tempDir('lora-options-');
  const good = join(dir, 'good');
  mkdirSync(good);
  writeFileSync(join(good, 'adapter_config.json'), '{}');
  mkdirSync(join(dir, 'empty'));
  writeFileSync(join(dir, 'file'), '');
  t.equal(loraModuleDirsProblem(undefined), undefined);
  t.equal(loraModuleDirsProblem([`a=${good}`]), undefined);
  t.equal(loraModuleDirsProblem([`a=${good}`, `b=${dir}/none`]),
    `--lora-modules b=${dir}/none: ${dir}/none does not exist; give a Hugging Face PEFT adapter directory (adapter_config.json and adapter_model.safetensors, as peft's save_pretrained writes them)`);
  t.match(loraModuleDirsProblem([`c=${dir}/file`]), `--lora-modules c=${dir}/file: ${dir}/file is not a directory;`);
  t.equal(loraModuleDirsProblem([`d=${dir}/empty`]),
    `--lora-modules d=${dir}/empty: ${dir}/empty has no adapter_config.json; give a Hugging Face PEFT adapter directory (as peft's save_pretrained writes it)`);
});

t.test('the executor\'s native config from the flat options', async (t) => {
  t.equal(nativeLoraConfig({}), undefined, 'off: none');
  t.same(nativeLoraConfig({ enableLora: true }), { enabled: true, preloaded: [] }, 'the engine\'s defaults for the rest');
  t.same(nativeLoraConfig({
    loraModules: ['sql=/a/sql', 'chat=/b/chat'], maxLoras: 4, loraCacheOptimalAdapterSize: 16, loraCacheMaxAdapterSize: 32,
    loraCacheGpuMemoryFraction: 0.1, loraCacheHostMemoryBytes: 1000,
  }), {
    enabled: true, preloaded: [{ taskId: 1, dir: '/a/sql' }, { taskId: 2, dir: '/b/chat' }], maxLoras: 4, optimalAdapterSize: 16,
    maxAdapterSize: 32, gpuMemoryFraction: 0.1, hostMemoryBytes: 1000,
  });
  const { lora, rest } = takeLoraOptions({ maxBatchSize: 4, enableLora: true, maxLoras: 2 });
  t.same(rest, { maxBatchSize: 4 }, 'the LoRA options leave the rest');
  t.same(lora, { enabled: true, preloaded: [], maxLoras: 2 });
});
