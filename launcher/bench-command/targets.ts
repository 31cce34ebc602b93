// Where the bench sends its requests: a running server over HTTP (tensorrt_llm's generate_stream, token ids in,
// as benchmark_core_model drives the core model) or gRPC (-i grpc: one ModelStreamInfer call per request, as
// benchmark_core_model -i grpc does), or --offline an executor in this process (no HTTP, no JSON: the figure
// comparable to trtllm-bench). All stream, so time to first token and inter-token gaps are measured the same way.
import { readFileSync } from 'node:fs';

import { Executor } from '../../worker/executor/executor.js';
import { guidedVocabulary, type GuidedVocabulary } from '../../worker/token-bytes.js';
import { GrpcClient, grpcAddress } from '../client/grpc.js';
import { checkReady, getJson, liveness, normalizeUrl, postStream } from '../client/http.js';
import { localCodec, serverCodec, serverCodecVia, type TextCodec } from '../client/text-codec.js';
import { guidedOutputCheck } from './guided-outputs.js';
import type { BenchRequest } from './sources.js';

export interface BenchTarget {
  /** Where requests go, as errors name it: the server's URL or gRPC address (or "the in-process executor"). */
  where: string;
  /**
   * Sends one request; onTokens(n) as each response with n new tokens arrives; resolves with the generated token ids
   * (multi-turn traffic puts them in the conversation's next prompt).
   */
  send(request: BenchRequest, onTokens: (n: number) => void): Promise<number[]>;
  /** After a failed request: undefined while the server still answers at all, else what happened to it. */
  liveness(): Promise<string | undefined>;
  vocabSize: number | undefined;
  codec: TextCodec;
  close(): Promise<void>;
  /** Lines to report after the run (the guided outputs' check). */
  notes?(): string[];
}

function tokenIds(v: unknown): number[] {
  return Array.isArray(v) ? (v.flat(Infinity) as number[]) : [];
}

export async function httpTarget(url: string, endId: number, tokenizerDir: string | undefined): Promise<BenchTarget> {
  const base = normalizeUrl(url);
  await checkReady(base);
  const config = await getJson(`${base}/v2/models/tensorrt_llm/config`) as { parameters?: { vocab_size?: { string_value?: string } } };
  const vocab = Number(config.parameters?.vocab_size?.string_value);
  return {
    where: base,
    liveness: () => liveness(base),
    vocabSize: Number.isSafeInteger(vocab) && vocab > 0 ? vocab : undefined,
    codec: tokenizerDir ? localCodec(tokenizerDir) : serverCodec(base),
    async send(request, onTokens) {
      const output: number[] = [];
      const body = { input_ids: request.inputIds, request_output_len: request.outputLen, streaming: true, end_id: endId };
      for await (const event of postStream(`${base}/v2/models/tensorrt_llm/generate_stream`, body)) {
        const ids = tokenIds(event.output_ids);
        if (ids.length > 0) onTokens(ids.length);
        output.push(...ids);
      }
      return output;
    },
    close: async () => {},
  };
}

export async function grpcTarget(url: string, endId: number, tokenizerDir: string | undefined): Promise<BenchTarget> {
  const client = new GrpcClient(grpcAddress(url));
  try {
    await client.checkReady();
    const vocab = Number((await client.modelConfig('tensorrt_llm')).parameters?.vocab_size?.string_value);
    return {
      where: `${client.address} (gRPC)`,
      liveness: () => client.liveness(),
      vocabSize: Number.isSafeInteger(vocab) && vocab > 0 ? vocab : undefined,
      codec: tokenizerDir ? localCodec(tokenizerDir) : serverCodecVia(async (model, inputs) => (await client.infer({ model, inputs })).outputs),
      async send(request, onTokens) {
        const output: number[] = [];
        const call = client.stream();
        const one = (name: string, datatype: string, data: number[] | boolean[]) => ({ name, datatype, shape: [1, data.length], data });
        call.send({ model: 'tensorrt_llm', inputs: [
          one('input_ids', 'INT32', request.inputIds), one('input_lengths', 'INT32', [request.inputIds.length]),
          one('request_output_len', 'INT32', [request.outputLen]), one('end_id', 'INT32', [endId]), one('streaming', 'BOOL', [true]),
        ] });
        for await (const r of call.responses) {
          const ids = (r.outputs.find((t) => t.name === 'output_ids')?.data ?? []) as number[];
          if (ids.length > 0) onTokens(ids.length);
          output.push(...ids);
          if (r.final) call.end();
        }
        return output;
      },
      close: async () => client.close(),
    };
  } catch (error) {
    client.close();
    throw error;
  }
}

export interface OfflineOptions {
  model: string;
  endId: number;
  threads?: number;
  maxBatchSize?: number;
  device?: 'auto' | 'cpu' | 'cuda';
  loadFormat?: 'auto' | 'dummy';
  guidedJsonSchema?: string;   // every request constrained to this schema (its text)
  guidedVocab?: string;        // token bytes for guided decoding (int32 count, int32 offsets[count + 1], bytes)
}

/** The vocabulary file bench/grammar-mask.ts --write-vocab writes, as the executor's guided-decoding config. */
export function readGuidedVocab(path: string): GuidedVocabulary {
  const b = readFileSync(path);
  const count = b.readInt32LE(0);
  const tokenOffsets = new Int32Array(count + 1);
  for (let i = 0; i <= count; i += 1) tokenOffsets[i] = b.readInt32LE(4 + 4 * i);
  const start = 4 + 4 * (count + 1);
  return { tokenBytes: new Uint8Array(b.subarray(start, start + tokenOffsets[count]!)), tokenOffsets };
}

export async function offlineTarget(o: OfflineOptions): Promise<BenchTarget> {
  const vocab = o.guidedVocab === undefined ? undefined : readGuidedVocab(o.guidedVocab);
  const executor = await Executor.load(o.model, {
    ...(o.threads === undefined ? {} : { numThreads: o.threads }),
    ...(o.maxBatchSize === undefined ? {} : { maxBatchSize: o.maxBatchSize }),
    ...(o.device === undefined ? {} : { device: o.device }), ...(o.loadFormat === undefined ? {} : { loadFormat: o.loadFormat }),
    ...(vocab === undefined ? {} : { guidedDecoding: vocab }),
  });
  const guided = o.guidedJsonSchema === undefined ? {} : { guidedDecoding: { guideType: 'json_schema' as const, guide: o.guidedJsonSchema } };
  // The outputs are decoded with the bytes the guide was matched against: the file's, else the model's tokenizer's.
  const bytes = vocab ?? (o.guidedJsonSchema === undefined ? undefined : guidedVocabulary(o.model, executor.modelConfig.vocabSize));
  const check = o.guidedJsonSchema === undefined || bytes === undefined ? undefined : await guidedOutputCheck(o.guidedJsonSchema, bytes);
  return {
    where: 'the in-process executor',
    liveness: async () => undefined,   // it lives as long as this process
    vocabSize: executor.modelConfig.vocabSize,
    codec: localCodec(o.model),
    async send(request, onTokens) {
      const output: number[] = [];
      const handle = executor.enqueue({
        inputTokenIds: request.inputIds, maxTokens: request.outputLen, streaming: true, endId: o.endId,
        output: { excludeInputFromOutput: true }, ...guided,
      });
      for await (const response of handle) {
        const ids = response.outputTokenIds?.[0] ?? [];
        if (ids.length > 0) onTokens(ids.length);
        output.push(...ids);
      }
      check?.add(output);
      return output;
    },
    close: () => executor.shutdown(),
    notes: () => (check === undefined ? [] : [check.summary()]),
  };
}
