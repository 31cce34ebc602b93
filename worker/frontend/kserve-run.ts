// Runs a request against one of the served models, whichever endpoint it came through (generate,
// generate_stream, infer): named values in, a stream of per-batch-element output sets out.
import type { ServedModel } from './model-repository.js';
import { checkNames, type NamedValues, optBool } from './named-values.js';
import { requireReady } from './model-catalog.js';
import type { ServingContext } from './serving-context.js';
import { runTextModel } from './kserve-text-model.js';
import { runTokenModel } from './kserve-token-model.js';
import { runPostprocessing, runPreprocessing } from './kserve-processing.js';
import { badRequest, HttpError } from './http-errors.js';

export interface OutputTensor {
  name: string;
  datatype: 'BYTES' | 'INT32' | 'FP32' | 'BOOL';
  shape: number[];     // of one batch element
  data: unknown[];
  pad?: unknown;       // fills ragged elements when a batch is stacked into one tensor
}

export interface ElementEvent {
  batchIndex: number;
  outputs: OutputTensor[];
  final: boolean;      // the last event of this batch element
}

export interface ModelRun {
  batchSize: number;
  events: AsyncIterable<ElementEvent>;
}

export interface RunOptions {
  signal: AbortSignal;
  requestId?: string;
  streamEndpoint: boolean;   // generate_stream / ModelStreamInfer: a response per iteration is possible
  streamByDefault?: boolean; // what a request without `stream` / `streaming` gets there (default true: generate_stream)
}

/** A `stop: true` request cancels the running requests with its id and produces nothing itself. */
function handleStop(ctx: ServingContext, values: NamedValues, requestId: string | undefined): ModelRun | undefined {
  if (optBool(values.get('stop')?.data[0], 'stop') !== true) return undefined;
  if (requestId === undefined || requestId === '') {
    throw badRequest('stop: true needs the id of the request to stop (the request body\'s "id")', 'id');
  }
  ctx.registry.stop(requestId);
  return { batchSize: 0, events: (async function* () {})() };
}

export function runModel(ctx: ServingContext, model: ServedModel, values: NamedValues, options: RunOptions): ModelRun {
  requireReady(ctx, model.name);
  checkNames(values, new Set(model.inputs.map((i) => i.name)), model.name);
  const stopped = handleStop(ctx, values, options.requestId);
  if (stopped) return stopped;
  switch (model.kind) {
    case 'text': return runTextModel(ctx, model, values, options);
    case 'tokens': return runTokenModel(ctx, model, values, options);
    case 'preprocessing': return runPreprocessing(ctx, values);
    case 'postprocessing': return runPostprocessing(ctx, values);
  }
}

/** Wraps already-computed element results (pre/postprocessing) as a run. */
export function immediateRun(elements: OutputTensor[][]): ModelRun {
  return {
    batchSize: elements.length,
    events: (async function* () {
      for (let i = 0; i < elements.length; i += 1) yield { batchIndex: i, outputs: elements[i]!, final: true };
    })(),
  };
}
