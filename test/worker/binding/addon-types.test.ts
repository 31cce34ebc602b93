// The typed binding file and the addon's real exports must name the same functions and methods.
import t from 'tap';

import { ADDON_EXECUTOR_METHODS, ADDON_EXPORTS } from '../../../worker/binding/addon-types.js';
import { TrtllmError } from '../../../worker/common/errors.js';
import { loadAddon } from '../../../worker/binding/load-addon.js';
import { Executor } from '../../../worker/executor/executor.js';
import { fixtureDir } from '../../helpers/fixtures.js';

t.test('addon exports exactly what addon-types.ts declares', async (t) => {
  const addon = loadAddon() as unknown as Record<string, unknown>;
  t.same(Object.keys(addon).sort(), [...ADDON_EXPORTS].sort());
  for (const name of ADDON_EXPORTS) t.equal(typeof addon[name], 'function', `${name} is a function`);
});

t.test('AddonExecutor has exactly the declared methods', async (t) => {
  const executor = await Executor.load(fixtureDir('tiny-llama'), { numThreads: 1 });
  const native = (executor as unknown as { native: object }).native;
  const methods = Object.getOwnPropertyNames(Object.getPrototypeOf(native)).filter((n) => n !== 'constructor');
  t.same(methods.sort(), [...ADDON_EXECUTOR_METHODS].sort());
  await executor.shutdown();
});

t.test('native errors are TrtllmError instances with a stable code', async (t) => {
  const addon = loadAddon();
  try {
    addon.readModelConfig('/nonexistent/model');
    t.fail('expected an error');
  } catch (error) {
    t.ok(error instanceof TrtllmError, 'instance of TrtllmError');
    t.equal((error as TrtllmError).code, 'not_found');
    t.match((error as Error).message, /nonexistent\/model/);
  }
});

t.test('buildInfo reports the CPU backend', async (t) => {
  const info = loadAddon().buildInfo();
  t.ok(info.backends.includes('cpu'));
  t.equal(info.napiVersion, 8);
  // The CUDA backend: listed with its build, or absent with the reason (this machine: no cuBLAS / no nvcc).
  t.type(info.cuda, 'string');
  t.ok(info.cuda.length > 0);
  if (!info.backends.includes('cuda')) t.equal(info.cudaDevices, 0);
});
