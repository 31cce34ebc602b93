// Registers `trtllm-launch client`: the flags of Triton's inflight_batcher_llm_client.py and
// end_to_end_grpc_client.py (-u, -i, --text/-p, -o/--request-output-len, --streaming, --stop-after-ms, ...).
import { type Command, Option } from 'commander';

import { TrtllmError } from '../../worker/common/errors.js';
import { parseIntOption, parseNumberOption } from '../parse-options.js';
import { type ClientOptions, parseTokenList } from './client-options.js';
import { runClient } from './client-run.js';
import { ToolError } from './tool-error.js';

export const DEFAULT_PROMPT = 'Born in north-east France, Soyer trained as a';

/** Runs a tool's action; user-fixable failures print one line and exit 2 (a ToolError may say 1), anything else is
 * a bug and throws. */
export async function reportToolErrors(tool: string, run: () => Promise<number>): Promise<void> {
  try {
    process.exitCode = await run();
  } catch (error) {
    if (error instanceof ToolError || error instanceof TrtllmError) {
      process.stderr.write(`trtllm-launch ${tool}: ${error.message}\n`);
      process.exitCode = error instanceof ToolError ? error.exitCode : 2;
      return;
    }
    throw error;
  }
}

export function registerClient(program: Command): void {
  const int = (name: string, min: number) => parseIntOption(name, min);
  const num = (name: string, min: number) => parseNumberOption(name, min);
  program
    .command('client')
    .description('send one request (or a batch) to a running server and print the result as Triton\'s clients do')
    .option('-u, --url <url>', 'server address, host:port (default localhost:8000 for http, localhost:8001 for grpc)')
    .option('-i, --protocol <protocol>', 'http or grpc (KServe v2 over gRPC, Triton\'s port 8001)', 'http')
    .option('--model-name <name>', 'tensorrt_llm (token ids), ensemble or tensorrt_llm_bls (text)', 'tensorrt_llm')
    .option('-p, --text <prompt>', 'prompt text (tokenized by the server unless --tokenizer-dir)', DEFAULT_PROMPT)
    .option('--input-tokens <ids>', 'prompt token ids, "1,2,3" (tensorrt_llm only)', parseTokenList)
    .option('--batch-inputs [json]', 'send a batch: a JSON list of prompts (this value, or --text\'s); results by batch_index')
    .option('--tokenizer-dir <dir>', 'tokenize and detokenize locally with this checkpoint\'s tokenizer')
    .option('-o, --request-output-len <n>', 'tokens to generate', int('--request-output-len', 1), 16)
    .option('--streaming', 'stream the response (generate_stream, or ModelStreamInfer with -i grpc)', false)
    .option('--stop-after-ms <ms>', 'send a stop request for this request after <ms> milliseconds', int('--stop-after-ms', 0))
    .option('--request-id <id>', 'the request\'s id (stop requests name it; default: generated with --stop-after-ms)')
    .option('--return-log-probs', 'return cum_log_probs and output_log_probs', false)
    .option('--return-context-logits', 'return the prompt\'s logits', false)
    .option('--return-generation-logits', 'return the generated tokens\' logits', false)
    .option('--exclude-input-in-output', 'leave the prompt out of the output', false)
    .option('--top-k <k>', 'top-k sampling (0: off)', int('--top-k', 0))
    .option('--top-p <p>', 'top-p sampling in [0, 1] (0: off)', num('--top-p', 0))
    .option('--temperature <t>', 'sampling temperature', num('--temperature', 0))
    .option('--repetition-penalty <x>', 'repetition penalty (> 0)', num('--repetition-penalty', Number.MIN_VALUE))
    .option('--presence-penalty <x>', 'presence penalty', num('--presence-penalty', -Infinity))
    .option('--frequency-penalty <x>', 'frequency penalty', num('--frequency-penalty', -Infinity))
    .option('--length-penalty <x>', 'beam search length penalty', num('--length-penalty', -Infinity))
    .option('--min-length <n>', 'generate at least this many tokens', int('--min-length', 0))
    .option('--random-seed <n>', 'sampling seed', int('--random-seed', 0))
    .option('--beam-width <n>', 'beam search width (the server\'s max_beam_width bounds it)', int('--beam-width', 1))
    .option('--end-id <id>', 'end-of-sequence token id (-1: none)', int('--end-id', -1))
    .option('--pad-id <id>', 'padding token id', int('--pad-id', -1))
    .option('--json', 'constrain the output to JSON (guided_decoding_guide_type "json")')
    .option('--json-schema <file>', 'constrain the output to JSON valid against this JSON Schema file')
    .option('--regex <pattern>', 'constrain the output to match this regular expression')
    .option('--grammar <file>', 'constrain the output to this GBNF grammar file (start rule `root`)')
    .addOption(new Option('--verbose', 'accepted for Triton\'s clients; no effect').hideHelp())
    .action(async (options: ClientOptions) => {
      await reportToolErrors('client', async () => {
        await runClient(options, (line) => process.stdout.write(`${line}\n`));
        return 0;
      });
    });
}
