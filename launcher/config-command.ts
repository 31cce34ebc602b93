// `trtllm-launch config print [serve options] [--json]`: the configuration a serve with the same options, env and
// file would run with, and where each value came from — to answer "why is max_batch_size 8?" without starting one.
import { type Command, InvalidArgumentError, Option } from 'commander';

import { renderConfigJson, renderConfigText } from './config/render-config.js';
import { resolveServeConfig } from './config/resolve-serve-config.js';
import { addConfigSourceOptions, addServeOptions } from './serve-options.js';

export function registerConfig(program: Command): void {
  const config = program.command('config').description('inspect the effective configuration');
  const print = addConfigSourceOptions(addServeOptions(config.command('print')
    .description('print the effective configuration and where each value came from (flag, env, file or default)')))
    .addOption(new Option('--json', 'machine-readable output'));
  print.action(async () => {
    try {
      const effective = await resolveServeConfig(print);
      const json = (print.opts() as { json?: boolean }).json === true;
      process.stdout.write(`${json ? renderConfigJson(effective) : renderConfigText(effective)}\n`);
    } catch (error) {
      if (error instanceof InvalidArgumentError) print.error(`error: ${error.message}`, { exitCode: 2 });
      throw error;
    }
  });
}
