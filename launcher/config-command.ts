// `trtllm-launch config print [serve options] [--json]`: the configuration a serve with the same options, env and
// file would run with, and where each value came from — to answer "why is max_batch_size 8?" without starting one.
import { type Command, InvalidArgumentError, Option } from 'commander';

import { loadAddon } from '../worker/binding/load-addon.js';
import type { Backends } from '../worker/options/device-ids.js';
import { renderConfigJson, renderConfigText } from './config/render-config.js';
import { resolveServeConfig } from './config/resolve-serve-config.js';
import { addConfigSourceOptions, addServeOptions } from './serve-options.js';

/** The backends of this installation's addon, which decide what --device auto means; none known when it is not built
 * (a login node that only renders job scripts): then only the CPU backend is assumed. */
function installedBackends(): Backends | undefined {
  try {
    return loadAddon().buildInfo();
  } catch {
    return undefined;
  }
}

export function registerConfig(program: Command): void {
  const config = program.command('config').description('inspect the effective configuration');
  const print = addConfigSourceOptions(addServeOptions(config.command('print')
    .description('print the effective configuration and where each value came from (flag, env, file or default)')))
    .addOption(new Option('--json', 'machine-readable output'));
  print.action(async () => {
    try {
      const effective = await resolveServeConfig(print, installedBackends());
      const json = (print.opts() as { json?: boolean }).json === true;
      process.stdout.write(`${json ? renderConfigJson(effective) : renderConfigText(effective)}\n`);
    } catch (error) {
      if (error instanceof InvalidArgumentError) print.error(`error: ${error.message}`, { exitCode: 2 });
      throw error;
    }
  });
}
