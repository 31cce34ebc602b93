// KServe v2 gRPC for the client and bench tools, through the server's own .proto and tensor codec: requests go out
// as raw_input_contents (as Triton's clients send them), responses come back as plain {name, shape, data} tensors,
// and failures are worded for the user like http.ts's (the address, the status, the server's message).
import { type Client, credentials, type ServiceError, status } from '@grpc/grpc-js';

import { inferenceService } from '../../worker/frontend/grpc/proto.js';
import { decodeContents, decodeRaw, encodeRaw } from '../../worker/frontend/grpc/tensor-codec.js';
import type { ModelInferRequest, ModelInferResponse, ModelStreamInferResponse, Parameters } from '../../worker/frontend/grpc/wire-types.js';
import { ToolError } from './tool-error.js';

export interface JsonTensor { name: string; datatype: string; shape: number[]; data: unknown[] }

export interface GrpcRequest {
  model: string;
  id?: string | undefined;
  inputs: JsonTensor[];
  parameters?: Parameters;
}

export interface GrpcResult {
  id: string;
  outputs: JsonTensor[];
  final: boolean | undefined;     // triton_final_response, on streamed responses
}

/** host:port for grpc-js; accepts Triton's spelling (-u localhost:8001) and grpc://host:port. */
export function grpcAddress(url: string): string {
  const rest = url.trim().replace(/^grpc:\/\//i, '').replace(/\/+$/, '');
  if (rest === '' || rest.includes('/')) throw new ToolError(`--url for -i grpc must be host:port (or grpc://host:port), got "${url}"`);
  return /:\d+$/.test(rest) ? rest : `${rest}:8001`;
}

function toWire(r: GrpcRequest): Partial<ModelInferRequest> {
  return {
    model_name: r.model,
    id: r.id ?? '',
    inputs: r.inputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })),
    raw_input_contents: r.inputs.map((t) => encodeRaw(t.datatype, t.data)),
    ...(r.parameters ? { parameters: r.parameters } : {}),
  };
}

export function fromWire(m: ModelInferResponse): GrpcResult {
  const raw = m.raw_output_contents ?? [];
  const outputs = (m.outputs ?? []).map((t, i) => ({
    name: t.name, datatype: t.datatype, shape: (t.shape ?? []).map(Number),
    // (as plain arrays: the client prints and compares outputs, which are small)
    data: raw.length > 0 ? Array.from(decodeRaw(t.datatype, raw[i]!, t.name, `raw_output_contents[${i}]`)) : decodeContents(t.datatype, t.contents, t.name),
  }));
  const final = m.parameters?.triton_final_response?.bool_param;
  return { id: m.id ?? '', outputs, final };
}

/** grpc-js's words for a connection that failed, without its prefix, timestamp and resolver notes. */
function transportReason(details: string): string {
  return details.replace(/^No connection established\. Last error: /, '').replace(/ \(\d{4}-[^)]*\)/, '').replace(/\.? Resolution note:.*$/, '');
}

export class GrpcClient {
  private readonly client: Client & Record<string, any>;

  constructor(readonly address: string) {
    const Service = inferenceService();
    this.client = new Service(address, credentials.createInsecure(), { 'grpc.max_receive_message_length': -1 }) as Client & Record<string, any>;
  }

  private failure(method: string, error: ServiceError): ToolError {
    if (error.code === status.UNAVAILABLE && /ECONNREFUSED|No connection established|connect/i.test(error.details)) {
      const why = transportReason(error.details);
      return new ToolError(`cannot reach ${this.address} (${why}); is the server running with its gRPC port there, and --url right?`);
    }
    return new ToolError(`${this.address} ${method} answered ${status[error.code]}: ${error.details}`);
  }

  private unary<T>(method: string, request: unknown, signal?: AbortSignal): Promise<T> {
    return new Promise((resolve, reject) => {
      const call = this.client[method](request, { deadline: Date.now() + 600_000 }, (error: ServiceError | null, response: T) => {
        if (error) reject(error.code === status.CANCELLED && signal?.aborted ? Object.assign(new Error('aborted'), { name: 'AbortError' }) : this.failure(method, error));
        else resolve(response);
      });
      signal?.addEventListener('abort', () => call.cancel(), { once: true });
    });
  }

  /** Whether the server still answers at all (ServerLive, whatever it says); the transport's reason when not. */
  liveness(): Promise<string | undefined> {
    return new Promise((resolve) => {
      this.client.ServerLive({}, { deadline: Date.now() + 60_000 }, (error: ServiceError | null) => {
        resolve(error && (error.code === status.UNAVAILABLE || error.code === status.DEADLINE_EXCEEDED) ? transportReason(error.details) : undefined);
      });
    });
  }

  /** Waits for ServerReady, or throws naming the address. */
  async checkReady(): Promise<void> {
    const { ready } = await this.unary<{ ready: boolean }>('ServerReady', {});
    if (!ready) throw new ToolError(`${this.address} ServerReady answered false: the server is not ready (loading, warming up or draining)`);
  }

  async modelConfig(model: string): Promise<{ parameters?: Record<string, { string_value?: string }> }> {
    return (await this.unary<{ config: { parameters?: Record<string, { string_value?: string }> } }>('ModelConfig', { name: model })).config;
  }

  async infer(request: GrpcRequest, signal?: AbortSignal): Promise<GrpcResult> {
    return fromWire(await this.unary<ModelInferResponse>('ModelInfer', toWire(request), signal));
  }

  /** A ModelStreamInfer call: send requests on it, read every response (an in-band error throws). */
  stream(signal?: AbortSignal): { send(request: GrpcRequest): void; end(): void; responses: AsyncGenerator<GrpcResult> } {
    const call = this.client.ModelStreamInfer();
    signal?.addEventListener('abort', () => call.cancel(), { once: true });
    const failure = (e: ServiceError) => this.failure('ModelStreamInfer', e);
    async function* responses(): AsyncGenerator<GrpcResult> {
      try {
        for await (const m of call as AsyncIterable<ModelStreamInferResponse>) {
          if (m.error_message) throw new ToolError(`ModelStreamInfer request ${JSON.stringify(m.infer_response?.id ?? '')} failed: ${m.error_message}`);
          yield fromWire(m.infer_response!);
        }
      } catch (error) {
        if ((error as ServiceError).code === status.CANCELLED && signal?.aborted) return;
        throw error instanceof ToolError ? error : failure(error as ServiceError);
      } finally {
        call.cancel();
      }
    }
    return { send: (r) => call.write(toWire(r)), end: () => call.end(), responses: responses() };
  }

  close(): void {
    this.client.close();
  }
}
