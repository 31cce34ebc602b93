// The bench's traffic, from benchmark_core_model's two sources: token-norm-dist (random token ids with
// normally distributed input and output lengths) and dataset (a JSON file of prompts, each with an optional
// output whose token count becomes the request's output length). Pure apart from the tokenizer it is handed.
import type { TextCodec } from '../client/text-codec.js';
import { ToolError } from '../client/tool-error.js';
import { normal, seededRandom } from './random.js';

export interface BenchRequest {
  inputIds: number[];
  outputLen: number;
}

export interface NormDist {
  numRequests: number;
  inputMean: number;
  inputStdev: number;
  outputMean: number;
  outputStdev: number;
  vocabSize: number;
  seed: number;
}

// At least one token either way: a length of 0 is not a request the server accepts.
const length = (random: () => number, mean: number, stdev: number) => Math.max(1, Math.round(normal(random, mean, stdev)));

export function tokenNormDist(d: NormDist): BenchRequest[] {
  const random = seededRandom(d.seed);
  return Array.from({ length: d.numRequests }, () => {
    const inputLen = length(random, d.inputMean, d.inputStdev);
    const outputLen = length(random, d.outputMean, d.outputStdev);
    const inputIds = Array.from({ length: inputLen }, () => Math.floor(random() * d.vocabSize));
    return { inputIds, outputLen };
  });
}

export interface DatasetEntry {
  prompt: string;
  output?: string;
  outputLen?: number;
}

function entryOf(item: unknown, where: string): DatasetEntry {
  if (typeof item === 'string') return { prompt: item };
  if (typeof item !== 'object' || item === null) throw new ToolError(`${where} must be a prompt string or an object, got ${JSON.stringify(item)}`);
  const o = item as Record<string, unknown>;
  // ShareGPT: the first turn is the prompt, the second the reference answer.
  if (Array.isArray(o.conversations)) {
    const turns = o.conversations as { value?: unknown; content?: unknown }[];
    const text = (t: (typeof turns)[number] | undefined) => (typeof t?.value === 'string' ? t.value : typeof t?.content === 'string' ? t.content : undefined);
    const prompt = text(turns[0]);
    if (prompt === undefined) throw new ToolError(`${where}.conversations[0] has no text (value or content)`);
    const output = text(turns[1]);
    return { prompt, ...(output === undefined ? {} : { output }) };
  }
  const prompt = [o.input, o.prompt, o.text_input, o.text].find((x) => typeof x === 'string') as string | undefined;
  if (prompt === undefined) throw new ToolError(`${where} has no prompt: expected "input", "prompt", "text_input" or "text"`);
  const output = [o.output, o.completion, o.response].find((x) => typeof x === 'string') as string | undefined;
  const len = o.output_len ?? o.output_tokens ?? o.max_tokens;
  if (len !== undefined && (!Number.isSafeInteger(len) || (len as number) < 1)) {
    throw new ToolError(`${where}.output_len must be an integer >= 1, got ${JSON.stringify(len)}`);
  }
  return { prompt, ...(output === undefined ? {} : { output }), ...(len === undefined ? {} : { outputLen: len as number }) };
}

/** A dataset file's entries: a JSON list, or an object holding one under "samples" or "data". */
export function parseDataset(json: unknown, file: string): DatasetEntry[] {
  const list = Array.isArray(json) ? json : (json as { samples?: unknown; data?: unknown } | null)?.samples ?? (json as { data?: unknown } | null)?.data;
  if (!Array.isArray(list) || list.length === 0) {
    throw new ToolError(`--dataset ${file} must hold a non-empty JSON list of prompts (or {"samples": [...]})`);
  }
  return list.map((item, i) => entryOf(item, `--dataset ${file}: entry ${i}`));
}

/**
 * The first numRequests entries (cycling when the file has fewer), tokenized. An entry's output length is its
 * output_len, else its output's token count (without the special tokens the tokenizer adds to any text), else
 * defaultOutputLen.
 */
export async function datasetRequests(entries: DatasetEntry[], codec: TextCodec, numRequests: number, defaultOutputLen: number): Promise<BenchRequest[]> {
  const picked = Array.from({ length: numRequests }, (_, i) => entries[i % entries.length]!);
  const [special] = await codec.encode(['']);
  const prompts = await codec.encode(picked.map((e) => e.prompt));
  const withOutput = picked.filter((e) => e.outputLen === undefined && e.output !== undefined);
  const outputs = withOutput.length > 0 ? await codec.encode(withOutput.map((e) => e.output!)) : [];
  let k = 0;
  return picked.map((e, i) => {
    let outputLen = e.outputLen ?? defaultOutputLen;
    if (e.outputLen === undefined && e.output !== undefined) outputLen = Math.max(1, outputs[k++]!.length - special!.length);
    return { inputIds: prompts[i]!, outputLen };
  });
}
