// `trtllm-launch bench <source>`: builds the traffic, runs it against a server (or --offline an in-process
// executor), and reports benchmark_core_model's table plus the latency spreads, or --json for machines.
// --check-perf-json turns the run into a regression gate (exit 1 when a figure is past its tolerance).
import { readFileSync } from 'node:fs';

import { checkProtocol, defaultUrl } from '../client/client-options.js';
import { ToolError } from '../client/tool-error.js';
import { arrivalOffsetsMs, type ArrivalKind } from './arrivals.js';
import { checkPerf, formatChecks, type PerfCheck } from './check-perf.js';
import { seededRandom } from './random.js';
import { runRequests } from './runner.js';
import { type BenchRequest, datasetRequests, parseDataset, tokenNormDist } from './sources.js';
import { type BenchSummary, summarize } from './summary.js';
import { progressBar, report } from './table.js';
import { type BenchTarget, grpcTarget, httpTarget, offlineTarget } from './targets.js';

export type BenchSource = 'token-norm-dist' | 'dataset';

export interface BenchOptions {
  url?: string | undefined;       // default: localhost:8000 for http, localhost:8001 for grpc
  protocol: string;
  offline: boolean;
  model: string;
  threads?: number;
  maxBatchSize?: number;
  device?: 'auto' | 'cpu' | 'cuda';
  loadFormat?: 'auto' | 'dummy';
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
  checks: PerfCheck[];
  exitCode: number;
}

/** benchmark_core_model spells the source with underscores; both spellings are accepted. */
export function parseSource(value: string): BenchSource {
  const s = value.replaceAll('_', '-');
  if (s === 'token-norm-dist' || s === 'dataset') return s;
  throw new ToolError(`the source must be token-norm-dist or dataset, got "${value}"`);
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

async function buildRequests(source: BenchSource, o: BenchOptions, target: BenchTarget): Promise<BenchRequest[]> {
  if (source === 'dataset') {
    if (o.dataset === undefined) throw new ToolError('the dataset source needs --dataset <file.json>');
    const entries = parseDataset(readJsonFile(o.dataset, '--dataset'), o.dataset);
    return datasetRequests(entries, target.codec, o.numRequests, Math.max(1, Math.round(o.outputMean)));
  }
  const vocabSize = o.vocabSize ?? target.vocabSize;
  if (vocabSize === undefined) {
    throw new ToolError('the server does not say its vocabulary size (tensorrt_llm config parameters.vocab_size); pass --vocab-size <n>');
  }
  return tokenNormDist({ ...o, vocabSize });
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
    })
    : o.protocol === 'grpc'
      ? await grpcTarget(o.url ?? defaultUrl('grpc'), o.endId, o.tokenizerDir)
      : await httpTarget(o.url ?? defaultUrl('http'), o.endId, o.tokenizerDir);
  try {
    const requests = await buildRequests(source, o, target);
    const arrivalsMs = arrivalOffsetsMs(requests.length, o.requestRate, o.arrivals, seededRandom(o.seed + 1));
    if (o.warmupRequests > 0) io.info('[INFO] Warm up for benchmarking.');
    io.info(`[INFO] Start benchmarking on ${requests.length} prompts${o.offline ? ' (offline: in-process executor)' : ''}.`);
    const records = await runRequests(target, requests, {
      arrivalsMs, concurrency: o.concurrency, warmup: o.warmupRequests,
      ...(o.progress && io.progress ? { onProgress: (done: number, total: number) => io.progress!(progressBar(done, total)) } : {}),
    });
    const summary = summarize(records);
    const checks = perfSpec === undefined ? [] : checkPerf(summary, perfSpec, o.checkPerfJson!, o.perfTolerance);
    if (o.json) io.out(JSON.stringify({ source, offline: o.offline, ...summary, ...(checks.length > 0 ? { perf_checks: checks } : {}) }, null, 2));
    else io.out(report(summary));
    for (const line of formatChecks(checks)) io.info(line);
    const regressed = checks.filter((c) => !c.ok);
    if (regressed.length > 0) io.info(`[ERROR] performance regressed: ${regressed.map((c) => c.metric).join(', ')}`);
    // Nothing measured is no result: a run in which every request failed must not pass as one (exit 0) in a script.
    const allFailed = summary.total_requests > 0 && summary.successful_requests === 0;
    if (allFailed) io.info(`[ERROR] every request failed (${summary.failed_requests} of ${summary.total_requests}) against ${target.where}: ${records.find((r) => !r.ok)?.error ?? ''}`);
    return { summary, checks, exitCode: regressed.length > 0 || allFailed ? 1 : 0 };
  } finally {
    await target.close();
  }
}
