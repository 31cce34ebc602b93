// Registers `trtllm-launch bench <token-norm-dist|dataset|multi-turn>`: benchmark_core_model's flags with dashes
// (-i, --request-rate, --num-requests, --input-mean, ...), options before or after the source; multi-turn adds
// --num-conversations, --num-turns and the shared system prompt's length and sharing.
import { type Command, InvalidArgumentError, Option } from 'commander';

import { reportToolErrors } from '../client/client-command.js';
import { serveOption } from '../serve-options.js';
import { parseChoiceOption, parseIntOption, parseNumberOption } from '../parse-options.js';
import { type BenchOptions, parseSource, runBench } from './bench-run.js';

// A rate of 0 would never send anything: --request-rate must be strictly positive.
function positiveNumber(name: string): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a number > 0, got "${value}"`);
    return n;
  };
}

export function registerBench(program: Command): void {
  const int = (name: string, min: number) => parseIntOption(name, min);
  const num = (name: string, min: number) => parseNumberOption(name, min);
  program
    .command('bench')
    .description('benchmark a server (or --offline the executor) with benchmark_core_model\'s traffic and table')
    .argument('<source>', 'token-norm-dist (random token ids), dataset (--dataset file.json) or multi-turn (conversations of random token ids)')
    .option('-u, --url <url>', 'server address, host:port (default localhost:8000 for http, localhost:8001 for grpc)')
    .option('-i, --protocol <protocol>', 'http (generate_stream) or grpc (ModelStreamInfer)', 'http')
    .option('--offline', 'enqueue straight into an executor in this process (no HTTP); see --model', false)
    .addOption(serveOption('model', (h) => `--offline: ${h}`))
    .addOption(serveOption('threads', (h) => `--offline: ${h}`))
    .addOption(serveOption('maxBatchSize', (h) => `--offline: ${h}`))
    .addOption(serveOption('device', (h) => `--offline: ${h}`))
    .addOption(serveOption('loadFormat', (h) => `--offline: ${h}`))
    .option('--guided-json-schema <file>', '--offline: every request constrained to this JSON Schema (guided decoding); each output is checked against it')
    .option('--guided-vocab <file>', '--offline: the token bytes guided decoding uses, for a checkpoint without a tokenizer (dummy weights); written by bench/grammar-mask.js --write-vocab')
    .option('--num-requests <n>', 'requests to measure (multi-turn: --num-conversations x --num-turns instead)', int('--num-requests', 1), 100)
    .option('--request-rate <r>', 'requests per second (multi-turn: conversation starts per second; default: all at once)', positiveNumber('--request-rate'))
    .addOption(new Option('--arrivals <kind>', 'gaps between requests at --request-rate').argParser(parseChoiceOption('--arrivals', ['exponential', 'constant'] as const)).default('exponential'))
    .option('--concurrency <n>', 'most requests in flight (default: no limit)', int('--concurrency', 1))
    .option('--warmup-requests <n>', 'unmeasured requests sent first', int('--warmup-requests', 0), 2)
    .option('--input-mean <n>', 'token-norm-dist: mean prompt length; multi-turn: mean user message length (each turn)', num('--input-mean', 1), 128)
    .option('--input-stdev <n>', 'token-norm-dist: prompt length standard deviation; multi-turn: user message length\'s', num('--input-stdev', 0), 0)
    .option('--output-mean <n>', 'mean output length (dataset: for entries without an output)', num('--output-mean', 1), 20)
    .option('--output-stdev <n>', 'token-norm-dist, multi-turn: output length standard deviation', num('--output-stdev', 0), 0)
    .option('--num-conversations <n>', 'multi-turn: conversations, concurrent with each other', int('--num-conversations', 1), 8)
    .option('--num-turns <n>', 'multi-turn: turns per conversation, each sent once the previous answer is in', int('--num-turns', 1), 4)
    .option('--system-prompt-len <n>', 'multi-turn: tokens of the system prompt that starts each conversation (0: none)', int('--system-prompt-len', 0), 0)
    .option('--conversations-per-system-prompt <n>', 'multi-turn: consecutive conversations sharing one system prompt (default: all)',
      int('--conversations-per-system-prompt', 1))
    .option('--dataset <file>', 'dataset: JSON list of prompts, or of {"input", "output"} objects')
    .option('--tokenizer-dir <dir>', 'dataset over HTTP: tokenize locally (default: the server\'s preprocessing)')
    .option('--vocab-size <n>', 'token-norm-dist, multi-turn: token ids in [0, n) (default: the server\'s config)', int('--vocab-size', 1))
    .option('--seed <n>', 'seed of the random prompts, lengths, conversations and arrivals', int('--seed', 0), 0)
    .option('--end-id <id>', 'end token id; -1 (default) generates exactly the asked lengths', int('--end-id', -1), -1)
    .option('--json', 'print the summary as JSON (progress and notes go to stderr)', false)
    .option('--check-perf-json <file>', 'baselines to compare with; exit 1 when a figure regressed past its tolerance')
    .option('--perf-tolerance <x>', 'default relative tolerance for --check-perf-json', num('--perf-tolerance', 0), 0.1)
    .option('--no-progress', 'no progress bar')
    .action(async (sourceArg: string, options: BenchOptions) => {
      await reportToolErrors('bench', async () => {
        const source = parseSource(sourceArg);
        const toStderr = (text: string) => process.stderr.write(`${text}\n`);
        const toStdout = (text: string) => process.stdout.write(`${text}\n`);
        const tty = process.stderr.isTTY;
        const result = await runBench(source, options, {
          out: toStdout,
          info: options.json ? toStderr : toStdout,
          // A bar redrawn in place on a terminal; in a log, only the start and the end.
          progress: (text) => {
            if (tty) process.stderr.write(`\r${text}`);
            if (tty && /(\d+)\/\1$/.test(text)) process.stderr.write('\n');
          },
        });
        return result.exitCode;
      });
    });
}
