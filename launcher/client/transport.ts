// Where `trtllm-launch client` sends its request, by -i: HTTP (generate_stream for --streaming, /infer otherwise,
// Triton's stop through generate) or gRPC (ModelStreamInfer for --streaming, ModelInfer otherwise, the stop as a
// request with `stop` on the same stream, as inflight_batcher_llm_client does). Both hand back the same shapes:
// generate_stream-style flat events, and /infer-style output tensors.
import type { ClientOptions, ModelKind } from './client-options.js';
import { generateBody, inferBody, stopBody } from './client-request.js';
import type { GrpcClient, GrpcRequest, JsonTensor } from './grpc.js';
import { checkReady, getJson, postJson, postStream } from './http.js';
import { serverCodec, serverCodecVia, type TextCodec } from './text-codec.js';

export interface RequestSpec {
  o: ClientOptions;
  kind: ModelKind;
  input: { prompts?: string[]; rows?: number[][] };
  id: string | undefined;
}

export interface ClientTransport {
  codec: TextCodec;                          // the server's preprocessing / postprocessing
  checkReady(): Promise<void>;
  whole(spec: RequestSpec, signal: AbortSignal): Promise<{ outputs?: { name: string; shape: number[]; data: unknown[] }[] }>;
  stream(spec: RequestSpec, signal: AbortSignal): AsyncIterable<Record<string, unknown>>;
  stop(model: string, id: string): Promise<void>;
  vocabSize(model: string): Promise<number | undefined>;
  close(): void;
}

function vocabOf(config: unknown): number | undefined {
  const v = Number((config as { parameters?: { vocab_size?: { string_value?: string } } } | undefined)?.parameters?.vocab_size?.string_value);
  return Number.isSafeInteger(v) && v > 0 ? v : undefined;
}

export function httpTransport(base: string): ClientTransport {
  return {
    codec: serverCodec(base),
    checkReady: () => checkReady(base),
    whole: async (s, signal) => await postJson(`${base}/v2/models/${s.o.modelName}/infer`, inferBody(s.o, s.kind, s.input, s.id), signal) as { outputs?: JsonTensor[] },
    stream: (s, signal) => postStream(`${base}/v2/models/${s.o.modelName}/generate_stream`, generateBody(s.o, s.kind, s.input, true, s.id), signal),
    stop: async (model, id) => { await postJson(`${base}/v2/models/${model}/generate`, stopBody(id)); },
    vocabSize: async (model) => vocabOf(await getJson(`${base}/v2/models/${model}/config`).catch(() => undefined)),
    close: () => {},
  };
}

/** A streamed response's tensors as generate_stream's flat fields: one value stays a scalar. */
function flatEvent(outputs: JsonTensor[]): Record<string, unknown> {
  return Object.fromEntries(outputs.map((t) => [t.name, t.data.length === 1 ? t.data[0] : t.data]));
}

function tensors(s: RequestSpec, stream: boolean): JsonTensor[] {
  const inputs = (inferBody(s.o, s.kind, s.input, s.id).inputs as JsonTensor[]);
  const batch = inputs[0]!.shape[0]!;
  // The streaming switch of each model: tensorrt_llm's `streaming`, the text models' `stream`.
  inputs.push({ name: s.kind === 'tokens' ? 'streaming' : 'stream', datatype: 'BOOL', shape: [batch, 1], data: new Array(batch).fill(stream) });
  return inputs;
}

export function grpcTransport(client: GrpcClient): ClientTransport {
  let send: ((request: GrpcRequest) => void) | undefined;   // the open stream, where a stop request goes
  return {
    codec: serverCodecVia(async (model, inputs) => (await client.infer({ model, inputs })).outputs),
    checkReady: () => client.checkReady(),
    whole: async (s, signal) => ({ outputs: (await client.infer({ model: s.o.modelName, id: s.id, inputs: tensors(s, false) }, signal)).outputs }),
    async* stream(s, signal) {
      const call = client.stream(signal);
      call.send({ model: s.o.modelName, id: s.id, inputs: tensors(s, true) });
      send = call.send;
      try {
        for await (const r of call.responses) {
          if (r.outputs.length > 0) yield flatEvent(r.outputs);
          // The request is complete: half-close, and the server ends the call.
          if (r.final) call.end();
        }
      } finally {
        send = undefined;
      }
    },
    async stop(model, id) {
      const request = { model, id, inputs: [{ name: 'stop', datatype: 'BOOL', shape: [1, 1], data: [true] }] };
      if (send) send(request);
      else await client.infer(request);
    },
    vocabSize: async (model) => vocabOf(await client.modelConfig(model).catch(() => undefined)),
    close: () => client.close(),
  };
}
