// A KServe v2 inference request, whichever wire brought it (HTTP /infer's JSON, gRPC ModelInfer and
// ModelStreamInfer): decoded named tensors in, named tensors out. The wire modules only decode and encode; the model
// lookup, the run through the executor and the output layout live here once. Response parameters (KServe v2's
// `parameters` of a response) carry what Triton's tensors cannot: a stop's "cancelled_requests", and the
// "finish_reason": "cancelled" of a request a stop cancelled.
import type { FinishReason } from '../binding/addon-types.js';
import { quoteName } from '../common/quote-value.js';
import { badRequest } from './http-errors.js';
import { collectFinal, stackOutputs } from './kserve-encode.js';
import { runModel } from './kserve-run.js';
import type { StopOutcome } from './live-requests.js';
import { type OutputTensor, watchFinish } from './model-run.js';
import { MODEL_VERSION } from './metrics.js';
import type { ModelCatalog } from './model-catalog.js';
import type { NamedValue, NamedValues } from './named-values.js';

export interface InferRequest {
  modelName: string;
  modelVersion?: string | undefined;
  id?: string | undefined;                    // echoed in the response; names the request for Triton's stop
  inputs: NamedValues;                        // each already checked against its datatype and shape
  outputs?: ReadonlySet<string> | undefined;  // the outputs asked for; all of them when absent
}

/** A response's parameters: cancelled_requests (a stop's answer), finish_reason "cancelled" (a stopped request). */
export type ResponseParameters = Record<string, string | number>;

export interface InferResponse {
  modelName: string;
  modelVersion: string;
  id?: string | undefined;
  outputs: OutputTensor[];                    // [batch, ...] tensors
  parameters?: ResponseParameters | undefined;
}

/** One response of a decoupled (streaming) model: one batch element's outputs for one iteration. */
export interface StreamedResponse {
  batchIndex: number;
  outputs: OutputTensor[];                    // [1, ...] tensors
  last: boolean;                              // no response of this request follows
  finishReason?: FinishReason | undefined;    // on an element's final response: how it ended
}

/** Gathers decoded inputs by name; a name given twice is the client's mistake, not the last one winning. */
export function namedInputs(tensors: Iterable<readonly [string, NamedValue]>): NamedValues {
  const values: NamedValues = new Map();
  for (const [name, value] of tensors) {
    if (values.has(name)) throw badRequest(`input ${quoteName(name)} is given twice`, name);
    values.set(name, value);
  }
  return values;
}

/** A stop request's answer: how many requests it cancelled (0: none ran under its id, or it had finished). */
function stopParameters(outcome: StopOutcome): ResponseParameters {
  return { cancelled_requests: outcome.cancelled };
}

function runFor(catalog: ModelCatalog, request: InferRequest, signal: AbortSignal, streamEndpoint: boolean, settled?: () => Promise<unknown>) {
  const { ctx, model } = catalog.resolve(request.modelName, request.modelVersion);
  // Triton's models stream only when the request's `stream` / `streaming` input says so (their default is false).
  const run = runModel(ctx, model, request.inputs, {
    signal, streamEndpoint, streamByDefault: false, ...(request.id === undefined ? {} : { requestId: request.id }),
    ...(settled ? { settled } : {}),
  });
  return { model, run };
}

/** The whole result (HTTP /infer, gRPC ModelInfer): every element's final outputs stacked into [batch, ...].
 * `settled`: when the caller's answer is written (the logits budget is held until then; logits-budget.ts). */
export async function inferWhole(catalog: ModelCatalog, request: InferRequest, signal: AbortSignal, settled?: () => Promise<unknown>): Promise<InferResponse> {
  const { model, run: started } = runFor(catalog, request, signal, false, settled);
  const header = { modelName: model.name, modelVersion: MODEL_VERSION, ...(request.id === undefined ? {} : { id: request.id }) };
  const run = await started;
  if (run.stop) return { ...header, outputs: [], parameters: stopParameters(await run.stop) };
  const watched = watchFinish(run.events);
  const elements = await collectFinal(watched.events, run.batchSize);
  return {
    ...header,
    outputs: elements.length === 0 ? [] : stackOutputs(elements, request.outputs),
    ...(watched.reasons.includes('cancelled') ? { parameters: { finish_reason: 'cancelled' } } : {}),
  };
}

/**
 * Triton's decoupled mode (gRPC ModelStreamInfer): with `stream` / `streaming` true, one response per batch element
 * per iteration (else one per element), each element's tensors with a batch dimension of 1 (batch_index says which
 * element). Everything that can be rejected (an unknown model, the request's inputs, its prompts' lengths) rejects
 * the returned promise, before the first response: it resolves once every element is tokenized and enqueued.
 */
export async function inferStreamed(
  catalog: ModelCatalog, request: InferRequest, signal: AbortSignal, settled?: () => Promise<unknown>,
): Promise<{ modelName: string; responses: AsyncIterable<StreamedResponse>; stop?: Promise<ResponseParameters> }> {
  const { model, run: started } = runFor(catalog, request, signal, true, settled);
  const run = await started;
  async function* responses(): AsyncGenerator<StreamedResponse> {
    let finished = 0;
    for await (const e of run.events) {
      if (e.final) finished += 1;
      // The last element's final event is the request's last response: no lookahead (which would hold every
      // response back by one iteration) is needed to flag it.
      yield {
        batchIndex: e.batchIndex, outputs: stackOutputs([e.outputs], request.outputs), last: finished === run.batchSize,
        finishReason: e.final ? e.finishReason : undefined,
      };
    }
  }
  return { modelName: model.name, responses: responses(), ...(run.stop ? { stop: run.stop.then(stopParameters) } : {}) };
}
