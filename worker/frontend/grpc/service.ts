// The handlers of inference.GRPCInferenceService. Each RPC finds its executor through the model catalog the HTTP
// routes use (one model, or the orchestrator's several) and runs the request through the
// same code as HTTP (kserve-infer-request.ts); this file only decodes, encodes, maps errors and manages calls.
// Triton's stop (a request with `stop` true and a running request's id) answers OK with the response parameter
// cancelled_requests; the request it cancelled ends with finish_reason "cancelled" among its final response's
// parameters (its call still ends OK: the partial result is the answer, as in Triton).
import { setMaxListeners } from 'node:events';

import type {
  Metadata, sendUnaryData, ServerDuplexStream, ServerUnaryCall, UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';

import { authorized } from '../http-server.js';
import { modelConfigFor, serverMetadata } from '../kserve-health.js';
import { inferStreamed, inferWhole, type ResponseParameters } from '../kserve-infer-request.js';
import { MODEL_VERSION } from '../metrics.js';
import type { ModelCatalog } from '../model-catalog.js';
import { modelMetadata } from '../model-repository.js';
import { decodeInferRequest, UndecodableMessage } from './decode-request.js';
import { encodeInferResponse, finalFlag } from './encode-response.js';
import type { OpenCalls } from './open-calls.js';
import { modelStatistics } from './statistics.js';
import { type GrpcFailure, grpcFailure, serviceError } from './status.js';
import type { ModelInferRequest, ModelStreamInferResponse, Parameters } from './wire-types.js';

export interface GrpcServing {
  /** Which executor answers a model name: the same catalog as the HTTP routes'. */
  catalog: ModelCatalog;
}

export interface GrpcServiceOptions {
  apiKey?: string | undefined;
  authHealth: boolean;                      // liveness/readiness need the key too (default: open, for probes)
  onError?: (error: unknown) => void;       // INTERNAL failures only: bugs, not bad requests
}

/** Response parameters on the wire: numbers as int64_param, strings as string_param. */
function wireParameters(parameters: ResponseParameters | undefined): Parameters {
  const out: Parameters = {};
  for (const [name, value] of Object.entries(parameters ?? {})) {
    out[name] = typeof value === 'number' ? { int64_param: value } : { string_param: value };
  }
  return out;
}

const UNAUTHENTICATED: GrpcFailure = {
  code: status.UNAUTHENTICATED, internal: false,
  details: 'missing or wrong API key: send the metadata "authorization: Bearer <key>"',
};

/** `calls`: every call is counted there, so a drain waits for the last one (open-calls.ts). */
export function inferenceHandlers(serving: GrpcServing, options: GrpcServiceOptions, calls: OpenCalls): UntypedServiceImplementation {
  const allowed = (metadata: Metadata, open: boolean) => {
    if (!options.apiKey || open) return true;
    const header = metadata.get('authorization')[0];
    return authorized(typeof header === 'string' ? header : header?.toString(), options.apiKey);
  };
  const fail = (error: unknown): GrpcFailure => {
    const failure = grpcFailure(error);
    if (failure.internal) options.onError?.(error);
    return failure;
  };

  /** A unary RPC: the answer, or the failure as the call's status. */
  function unary<Req, Res>(open: boolean, answer: (request: Req, call: ServerUnaryCall<Req, Res>) => Promise<Res> | Res) {
    return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => {
      if (!allowed(call.metadata, open)) return callback(serviceError(UNAUTHENTICATED));
      if (call.request instanceof UndecodableMessage) {
        return callback(serviceError({ code: status.INVALID_ARGUMENT, details: call.request.message, internal: false }));
      }
      const leave = calls.enter();
      Promise.resolve().then(() => answer(call.request, call)).then(
        (response) => callback(null, response),
        (error: unknown) => callback(serviceError(fail(error))),
      ).finally(leave);
    };
  }

  const named = (request: { name?: string; version?: string }) => serving.catalog.resolve(request.name ?? '', request.version ?? '');
  const health = !options.authHealth;

  return {
    ServerLive: unary(health, () => ({ live: true })),
    ServerReady: unary(health, () => ({ ready: serving.catalog.serverReady() })),
    ModelReady: unary(health, (r: { name?: string; version?: string }) => ({ ready: named(r).ctx.isReady() })),
    ServerMetadata: unary(false, () => serverMetadata()),
    ModelMetadata: unary(false, (r: { name?: string; version?: string }) => modelMetadata(named(r).model)),
    ModelConfig: unary(false, (r: { name?: string; version?: string }) => {
      const { model, ctx } = named(r);
      const config = modelConfigFor(ctx, model) as { input: { dims: string[] }[]; output: { dims: string[] }[] };
      // The JSON config spells dims as strings (int64 in JSON); on the wire they are numbers.
      const dims = <T extends { dims: string[] }>(t: T) => ({ ...t, dims: t.dims.map(Number) });
      return { config: { ...config, input: config.input.map(dims), output: config.output.map(dims) } };
    }),
    ModelStatistics: unary(false, (r: { name?: string; version?: string }) => modelStatistics(serving.catalog, r.name ?? '', r.version ?? '')),
    ModelInfer: unary(false, async (m: ModelInferRequest, call) => {
      const aborter = new AbortController();
      let answered = false;
      // grpc-js also reports 'cancelled' when a finished call's stream closes: only a call still running is cancelled.
      call.once('cancelled', () => { if (!answered) aborter.abort(); });
      try {
        const { request, rawOutputs } = decodeInferRequest(m);
        const response = await inferWhole(serving.catalog, request, aborter.signal);
        return encodeInferResponse(response, response.outputs, rawOutputs, response.parameters && wireParameters(response.parameters));
      } finally {
        answered = true;
      }
    }),
    ModelStreamInfer: (call: ServerDuplexStream<ModelInferRequest, ModelStreamInferResponse>) => {
      if (!allowed(call.metadata, false)) {
        call.emit('error', serviceError(UNAUTHENTICATED));
        return;
      }
      const refusal = calls.drainRefusal;
      if (refusal !== undefined) {
        call.emit('error', serviceError({ code: status.UNAVAILABLE, details: refusal, internal: false }));
        return;
      }
      streamCall(serving, call, fail, calls);
    },
  };
}

/**
 * One ModelStreamInfer call: any number of requests, served concurrently, each answered by its responses on the
 * same stream. The call ends once the client has half-closed and every request has had its last response — or,
 * once the server drains, as soon as its requests are answered, with UNAVAILABLE naming the drain; a client that
 * cancels the call cancels all of its requests (their KV blocks are freed at once).
 */
function streamCall(
  serving: GrpcServing, call: ServerDuplexStream<ModelInferRequest, ModelStreamInferResponse>, fail: (e: unknown) => GrpcFailure,
  calls: OpenCalls,
): void {
  const aborter = new AbortController();
  // Every request in flight on the call (perf_analyzer keeps --concurrency of them on one stream) listens to it.
  setMaxListeners(0, aborter.signal);
  let pending = 0;
  let halfClosed = false;
  // Resolves once grpc-js has handed the message to HTTP/2 (or at once when the call is over): what the logits
  // budget waits for before it lets another request's logits in (logits-budget.ts).
  const write = (message: ModelStreamInferResponse) => new Promise<void>((resolve) => {
    if (call.cancelled || call.writableEnded) resolve();
    else call.write(message, () => resolve());
  });
  let drainRefusal: string | undefined;
  const endIfDone = () => {
    if (pending > 0 || call.writableEnded) return;
    if (halfClosed) call.end();
    else if (drainRefusal !== undefined) call.emit('error', serviceError({ code: status.UNAVAILABLE, details: drainRefusal, internal: false }));
  };
  const leave = calls.enter((refusal) => {
    drainRefusal = refusal;
    endIfDone();
  });
  // 'finish': the status has been handed to the transport; 'cancelled': the client is gone.
  call.once('finish', leave);
  call.once('cancelled', leave);
  // (grpc-js also reports 'cancelled' once a finished call's stream closes; then nothing is left to cancel)
  const cancel = () => { if (pending > 0) aborter.abort(); };
  call.on('cancelled', cancel);
  call.on('error', cancel);
  call.on('end', () => {
    halfClosed = true;
    endIfDone();
  });
  call.on('data', (m: ModelInferRequest) => {
    pending += 1;
    void serveStreamed(serving, m, aborter.signal, write, fail).finally(() => {
      pending -= 1;
      endIfDone();
    });
  });
}

const CANCELLED: Parameters = wireParameters({ finish_reason: 'cancelled' });

async function serveStreamed(
  serving: GrpcServing, m: ModelInferRequest, signal: AbortSignal, send: (r: ModelStreamInferResponse) => Promise<void>,
  fail: (e: unknown) => GrpcFailure,
): Promise<void> {
  let header = { modelName: m.model_name ?? '', modelVersion: MODEL_VERSION, id: m.id ?? '' };
  // The request's answer is settled once its last message has been sent (or its client is gone).
  let lastSent: Promise<void> = Promise.resolve();
  let answered!: () => void;
  const settled = new Promise<void>((resolve) => { answered = resolve; });
  const onAbort = () => answered();
  signal.addEventListener('abort', onAbort, { once: true });  // (removed below: the stream's signal outlives requests)
  const write = (r: ModelStreamInferResponse) => { lastSent = send(r); };
  try {
    const { request, rawOutputs, emptyFinal } = decodeInferRequest(m);
    const { modelName, responses, stop } = await inferStreamed(serving.catalog, request, signal, () => settled);
    header = { ...header, modelName };
    // A stop's answer is a bare final response, which Triton sends only to clients that asked for bare responses
    // (triton_enable_empty_final_response): others (inflight_batcher_llm_client) would read it as a result.
    if (stop) {
      const parameters = await stop;
      if (emptyFinal) write({ infer_response: encodeInferResponse(header, [], rawOutputs, { ...finalFlag(true), ...wireParameters(parameters) }) });
      return;
    }
    let sent = false;
    let flagged = false;
    let cancelled = false;
    for await (const r of responses) {
      const final = r.last && !emptyFinal;
      cancelled ||= r.finishReason === 'cancelled';
      const marks = r.finishReason === 'cancelled' || (final && cancelled) ? CANCELLED : {};
      write({ infer_response: encodeInferResponse(header, r.outputs, rawOutputs, { ...finalFlag(final), ...marks }) });
      sent = true;
      flagged ||= final;
    }
    if (!flagged && (emptyFinal || sent)) {
      write({ infer_response: encodeInferResponse(header, [], rawOutputs, { ...finalFlag(true), ...(cancelled ? CANCELLED : {}) }) });
    }
  } catch (error) {
    // Triton's decoupled errors: the request fails in-band and the stream carries on with the others.
    write({ error_message: fail(error).details, infer_response: encodeInferResponse(header, [], true) });
  } finally {
    void lastSent.then(() => {
      signal.removeEventListener('abort', onAbort);
      answered();
    });
  }
}
