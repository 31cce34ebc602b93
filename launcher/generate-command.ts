// `trtllm-launch generate`: one in-process generation on a checkpoint, streamed to stdout. Useful to check a
// model loads and decodes before serving it; the cluster launch (`serve`) builds on the same executor.
import type { Command } from 'commander';

import type { SchedulerPolicy } from '../worker/binding/addon-types.js';
import { TrtllmError } from '../worker/common/errors.js';
import { Executor } from '../worker/executor/executor.js';
import { loadTokenizer } from '../worker/tokenizer.js';
import { parseIntOption, parseNumberOption } from './parse-options.js';
import { serveOption } from './serve-options.js';

interface GenerateOptions {
  model: string;
  prompt: string;
  maxTokens: number;
  temperature: number;
  topK: number;
  topP: number;
  seed?: number;
  threads?: number;
  schedulerPolicy?: SchedulerPolicy;
}

function progressPrinter(label: string): (done: number, total: number) => void {
  let last = -1;
  return (done, total) => {
    const percent = total > 0 ? Math.floor((100 * done) / total) : 100;
    if (percent === last) return;
    last = percent;
    process.stderr.write(`\r${label}: ${percent}% (${(done / 1e6).toFixed(1)} / ${(total / 1e6).toFixed(1)} MB)`);
    if (done >= total) process.stderr.write('\n');
  };
}

async function runGenerate(options: GenerateOptions): Promise<number> {
  const tokenizer = loadTokenizer(options.model);
  const started = performance.now();
  const executor = await Executor.load(options.model, {
    numThreads: options.threads,
    ...(options.schedulerPolicy === undefined ? {} : { schedulerPolicy: options.schedulerPolicy }),
    onProgress: progressPrinter('Loading weights'),
  });
  const config = executor.modelConfig;
  process.stderr.write(
    `Loaded ${config.architectureName} (${config.numLayers} layers, hidden ${config.hiddenSize}, vocab ${config.vocabSize}) `
    + `from ${options.model} in ${((performance.now() - started) / 1000).toFixed(2)} s\n`,
  );
  try {
    const inputTokenIds = tokenizer.encode(options.prompt);
    const handle = executor.enqueue({
      inputTokenIds,
      maxTokens: options.maxTokens,
      streaming: true,
      endId: tokenizer.eosTokenId ?? config.eosTokenIds[0] ?? -1,
      sampling: {
        temperature: options.temperature, topK: options.topK, topP: options.topP,
        ...(options.seed === undefined ? {} : { seed: options.seed }),
      },
      output: { excludeInputFromOutput: true },
    });
    const generated: number[] = [];
    let printed = '';
    process.stdout.write(options.prompt);
    let reason = 'not_finished';
    const t0 = performance.now();
    for await (const response of handle) {
      generated.push(...(response.outputTokenIds?.[0] ?? []));
      // Decode the whole output each time: a multi-byte character may span tokens.
      const text = tokenizer.decode(generated);
      if (text.startsWith(printed)) process.stdout.write(text.slice(printed.length));
      printed = text;
      reason = response.finishReasons?.[0] ?? reason;
    }
    const seconds = (performance.now() - t0) / 1000;
    process.stdout.write('\n');
    process.stderr.write(
      `[${generated.length} tokens in ${seconds.toFixed(2)} s, ${(generated.length / seconds).toFixed(1)} tokens/s, finish reason: ${reason}]\n`,
    );
    return 0;
  } finally {
    await executor.shutdown();
  }
}

export function registerGenerate(program: Command): void {
  program
    .command('generate')
    .description('load a checkpoint in this process and generate a continuation of --prompt')
    .addOption(serveOption('model'))
    .option('--prompt <text>', 'text to continue', 'What is machine learning?')
    .option('--max-tokens <n>', 'tokens to generate', parseIntOption('--max-tokens', 1), 32)
    .option('--temperature <t>', 'sampling temperature (0: greedy)', parseNumberOption('--temperature', 0), 0)
    .option('--top-k <k>', 'top-k (0: off)', parseIntOption('--top-k', 0), 0)
    .option('--top-p <p>', 'top-p in (0, 1]', parseNumberOption('--top-p', 0), 1)
    .option('--seed <n>', 'random seed', parseIntOption('--seed', 0))
    .addOption(serveOption('threads'))
    .addOption(serveOption('schedulerPolicy'))
    .action(async (options: GenerateOptions) => {
      try {
        process.exitCode = await runGenerate(options);
      } catch (error) {
        if (error instanceof TrtllmError) {
          process.stderr.write(`trtllm-launch generate: ${error.message} [${error.code}]\n`);
          process.exitCode = 2;
          return;
        }
        throw error;
      }
    });
}
