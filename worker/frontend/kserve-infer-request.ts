// A KServe v2 inference request, whichever wire brought it (HTTP /infer's JSON, gRPC ModelInfer and
// ModelStreamInfer): decoded named tensors in, named tensors out. The wire modules only decode and encode; the model
// lookup, the run through the executor and the output layout live here once.
import { badRequest } from './http-errors.js';
import { collectFinal, stackOutputs } from './kserve-encode.js';
import { runModel } from './kserve-run.js';
import type { OutputTensor } from './model-run.js';
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

export interface InferResponse {
  modelName: string;
  modelVersion: string;
  id?: string | undefined;
  outputs: OutputTensor[];                    // [batch, ...] tensors
}

/** One response of a decoupled (streaming) model: one batch element's outputs for one iteration. */
export interface StreamedResponse {
  batchIndex: number;
  outputs: OutputTensor[];                    // [1, ...] tensors
  last: boolean;                              // no response of this request follows
}

/** Gathers decoded inputs by name; a name given twice is the client's mistake, not the last one winning. */
export function namedInputs(tensors: Iterable<readonly [string, NamedValue]>): NamedValues {
  const values: NamedValues = new Map();
  for (const [name, value] of tensors) {
    if (values.has(name)) throw badRequest(`input '${name}' is given twice`, name);
    values.set(name, value);
  }
  return values;
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
  const { model, run } = runFor(catalog, request, signal, false, settled);
  const elements = await collectFinal(run.events, run.batchSize);
  return {
    modelName: model.name,
    modelVersion: MODEL_VERSION,
    ...(request.id === undefined ? {} : { id: request.id }),
    outputs: elements.length === 0 ? [] : stackOutputs(elements, request.outputs),
  };
}

/**
 * Triton's decoupled mode (gRPC ModelStreamInfer): with `stream` / `streaming` true, one response per batch element
 * per iteration (else one per element), each element's tensors with a batch dimension of 1 (batch_index says which
 * element). Everything that can be rejected is rejected when this is called, before the first response.
 */
export function inferStreamed(catalog: ModelCatalog, request: InferRequest, signal: AbortSignal): { modelName: string; responses: AsyncIterable<StreamedResponse> } {
  const { model, run } = runFor(catalog, request, signal, true);
  async function* responses(): AsyncGenerator<StreamedResponse> {
    let finished = 0;
    for await (const e of run.events) {
      if (e.final) finished += 1;
      // The last element's final event is the request's last response: no lookahead (which would hold every
      // response back by one iteration) is needed to flag it.
      yield { batchIndex: e.batchIndex, outputs: stackOutputs([e.outputs], request.outputs), last: finished === run.batchSize };
    }
  }
  return { modelName: model.name, responses: responses() };
}
