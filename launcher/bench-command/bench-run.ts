// `trtllm-launch bench <source>`: builds the traffic, runs it against a server (or --offline an in-process
// executor), and reports benchmark_core_model's table plus the latency spreads (and, for multi-turn traffic, the
// per-turn figures), or --json for machines.
// --check-perf-json turns the run into a regression gate (exit 1 when a figure is past its tolerance).
import { readFileSync } from 'node:fs';

import { checkProtocol, defaultUrl } from '../client/client-options.js';
import { ToolError } from '../client/tool-error.js';
import { arrivalOffsetsMs, type ArrivalKind } from './arrivals.js';
import { checkPerf, formatChecks, type PerfCheck } from './check-perf.js';
import { multiTurnConversations } from './conversations.js';
import { seededRandom } from './random.js';
import { runConversations, runRequests } from './runner.js';
import { type BenchRequest, datasetRequests, parseDataset, tokenNormDist } from './sources.js';
import { type BenchSummary, type RequestRecord, summarize, summarizeTurns, type TurnSummary } from './summary.js';
import { progressBar, report } from './table.js';
import { type BenchTarget, grpcTarget, httpTarget, offlineTarget } from './targets.js';

export type BenchSource = 'token-norm-dist' | 'dataset' | 'multi-turn';

export interface BenchOptions {
  url?: string | undefined;       // default: localhost:8000 for http, localhost:8001 for grpc
  protocol: string;
  offline: boolean;
  model: string;
  threads?: number;
  maxBatchSize?: number;
  device?: 'auto' | 'cpu' | 'cuda';
  loadFormat?: 'auto' | 'dummy';
  guidedJsonSchema?: string;   // --offline: a file
  guidedVocab?: string;        // --offline: a file
  numRequests: number;
  requestRate?: number;
  arrivals: ArrivalKind;
  concurrency?: number;
  warmupRequests: number;
  inputMean: number;
  inputStdev: number;
  outputMean: number;
  outputStdev: number;
  dataset?: string;
  tokenizerDir?: string;
  vocabSize?: number;
  numConversations: number;                // multi-turn
  numTurns: number;
  systemPromptLen: number;
  conversationsPerSystemPrompt?: number;   // default: all conversations share one system prompt
  seed: number;
  endId: number;
  json: boolean;
  checkPerfJson?: string;
  perfTolerance: number;
  progress: boolean;
}

export interface BenchOutput {
  out(text: string): void;      // results
  info(text: string): void;     // progress and notes (stderr under --json)
  progress?(text: string): void;
}

export interface BenchResult {
  summary: BenchSummary;
  turns?: TurnSummary;           // multi-turn
  checks: PerfCheck[];
  exitCode: number;
}

/** benchmark_core_model spells the source with underscores; both spellings are accepted. */
export function parseSource(value: string): BenchSource {
  const s = value.replaceAll('_', '-');
  if (s === 'token-norm-dist' || s === 'dataset' || s === 'multi-turn') return s;
  throw new ToolError(`the source must be token-norm-dist, dataset or multi-turn, got "${value}"`);
}

function readJsonFile(path: string, flag: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ToolError(`${flag} ${path} cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ToolError(`${flag} ${path} is not valid JSON: ${(error as Error).message}`);
  }
}

function vocabSizeOf(o: BenchOptions, target: BenchTarget): number {
  const vocabSize = o.vocabSize ?? target.vocabSize;
  if (vocabSize === undefined) {
    throw new ToolError('the server does not say its vocabulary size (tensorrt_llm config parameters.vocab_size); pass --vocab-size <n>');
  }
  return vocabSize;
}

async function buildRequests(source: BenchSource, o: BenchOptions, target: BenchTarget): Promise<BenchRequest[]> {
  if (source === 'dataset') {
    if (o.dataset === undefined) throw new ToolError('the dataset source needs --dataset <file.json>');
    const entries = parseDataset(readJsonFile(o.dataset, '--dataset'), o.dataset);
    return datasetRequests(entries, target.codec, o.numRequests, Math.max(1, Math.round(o.outputMean)));
  }
  return tokenNormDist({ ...o, vocabSize: vocabSizeOf(o, target) });
}

interface Measured { records: RequestRecord[]; turns?: (records: RequestRecord[]) => TurnSummary }

/** Builds the source's traffic and runs it: requests at their arrival times, or conversations turn by turn. */
async function measure(source: BenchSource, o: BenchOptions, target: BenchTarget, io: BenchOutput): Promise<Measured> {
  const onProgress = o.progress && io.progress ? { onProgress: (done: number, total: number) => io.progress!(progressBar(done, total)) } : {};
  const where = o.offline ? ' (offline: in-process executor)' : '';
  if (source === 'multi-turn') {
    const traffic = { ...o, vocabSize: vocabSizeOf(o, target) };
    const conversations = multiTurnConversations(traffic);
    // Warm-up prompts as long as a first turn, from another seed: they share no prefix with the conversations.
    const warmup = tokenNormDist({ ...traffic, numRequests: o.warmupRequests, inputMean: o.systemPromptLen + o.inputMean, seed: o.seed + 2 });
    // --request-rate paces the conversations' starts; a conversation's later turns follow their answers.
    const arrivalsMs = arrivalOffsetsMs(conversations.length, o.requestRate, o.arrivals, seededRandom(o.seed + 1));
    if (o.warmupRequests > 0) io.info('[INFO] Warm up for benchmarking.');
    io.info(`[INFO] Start benchmarking on ${conversations.length} conversations of ${o.numTurns} turns${where}.`);
    const records = await runConversations(target, conversations, warmup, { arrivalsMs, concurrency: o.concurrency, warmup: o.warmupRequests, ...onProgress });
    return { records, turns: (r) => summarizeTurns(r, o.numConversations, o.numTurns) };
  }
  const requests = await buildRequests(source, o, target);
  const arrivalsMs = arrivalOffsetsMs(requests.length, o.requestRate, o.arrivals, seededRandom(o.seed + 1));
  if (o.warmupRequests > 0) io.info('[INFO] Warm up for benchmarking.');
  io.info(`[INFO] Start benchmarking on ${requests.length} prompts${where}.`);
  return { records: await runRequests(target, requests, { arrivalsMs, concurrency: o.concurrency, warmup: o.warmupRequests, ...onProgress }) };
}

export async function runBench(source: BenchSource, o: BenchOptions, io: BenchOutput): Promise<BenchResult> {
  if (!o.offline) checkProtocol(o.protocol);
  // The perf file is read before the run, so a typo does not cost a whole benchmark.
  const perfSpec = o.checkPerfJson === undefined ? undefined : readJsonFile(o.checkPerfJson, '--check-perf-json');
  const target = o.offline
    ? await offlineTarget({
      model: o.model, endId: o.endId, ...(o.threads === undefined ? {} : { threads: o.threads }),
      ...(o.maxBatchSize === undefined ? {} : { maxBatchSize: o.maxBatchSize }),
      ...(o.device === undefined ? {} : { device: o.device }), ...(o.loadFormat === undefined ? {} : { loadFormat: o.loadFormat }),
      ...(o.guidedJsonSchema === undefined ? {} : { guidedJsonSchema: readFileSync(o.guidedJsonSchema, 'utf8') }),
      ...(o.guidedVocab === undefined ? {} : { guidedVocab: o.guidedVocab }),
    })
    : o.protocol === 'grpc'
      ? await grpcTarget(o.url ?? defaultUrl('grpc'), o.endId, o.tokenizerDir)
      : await httpTarget(o.url ?? defaultUrl('http'), o.endId, o.tokenizerDir);
  try {
    const { records, turns: summarizeTurnsOf } = await measure(source, o, target, io);
    const summary = summarize(records);
    const turns = summarizeTurnsOf?.(records);
    // Multi-turn figures are gated like the others (first_turn_p90_ttft_ms, later_turns_p50_ttft_ms, ...).
    const checks = perfSpec === undefined ? [] : checkPerf({ ...summary, ...turns }, perfSpec, o.checkPerfJson!, o.perfTolerance);
    if (o.json) io.out(JSON.stringify({ source, offline: o.offline, ...summary, ...turns, ...(checks.length > 0 ? { perf_checks: checks } : {}) }, null, 2));
    else io.out(report(summary, turns));
    for (const line of formatChecks(checks)) io.info(line);
    for (const line of target.notes?.() ?? []) io.info(line);
    const regressed = checks.filter((c) => !c.ok);
    if (regressed.length > 0) io.info(`[ERROR] performance regressed: ${regressed.map((c) => c.metric).join(', ')}`);
    // Nothing measured is no result: a run in which every request failed must not pass as one (exit 0) in a script.
    const allFailed = summary.total_requests > 0 && summary.successful_requests === 0;
    if (allFailed) io.info(`[ERROR] every request failed (${summary.failed_requests} of ${summary.total_requests}) against ${target.where}: ${records.find((r) => !r.ok)?.error ?? ''}`);
    return { summary, ...(turns === undefined ? {} : { turns }), checks, exitCode: regressed.length > 0 || allFailed ? 1 : 0 };
  } finally {
    await target.close();
  }
}
