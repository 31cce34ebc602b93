// Runs a request against one of the served models, whichever endpoint it came through (generate,
// generate_stream, infer): named values in, a stream of per-batch-element output sets out (model-run.ts).
import { badRequest } from './http-errors.js';
import { runPostprocessing, runPreprocessing } from './kserve-processing.js';
import { runTextModel } from './kserve-text-model.js';
import { runTokenModel } from './kserve-token-model.js';
import { requireReady } from './model-catalog.js';
import type { ServedModel } from './model-repository.js';
import type { ModelRun, RunOptions } from './model-run.js';
import { checkNames, type NamedValues, optBool } from './named-values.js';
import type { ServingContext } from './serving-context.js';

/** A `stop: true` request cancels the running requests with its id and produces nothing itself. */
function handleStop(ctx: ServingContext, values: NamedValues, requestId: string | undefined): ModelRun | undefined {
  if (optBool(values.get('stop')?.data[0], 'stop') !== true) return undefined;
  if (requestId === undefined || requestId === '') {
    throw badRequest('stop: true needs the id of the request to stop (the request body\'s "id")', 'id');
  }
  ctx.registry.stop(requestId);
  return { batchSize: 0, events: (async function* () {})() };
}

/** Resolves once every element has been checked, tokenized and enqueued: a rejection comes before any output. */
export async function runModel(ctx: ServingContext, model: ServedModel, values: NamedValues, options: RunOptions): Promise<ModelRun> {
  requireReady(ctx, model.name);
  checkNames(values, new Set(model.inputs.map((i) => i.name)), model.name);
  const stopped = handleStop(ctx, values, options.requestId);
  if (stopped) return stopped;
  switch (model.kind) {
    case 'text': return runTextModel(ctx, model, values, options);
    case 'tokens': return runTokenModel(ctx, model, values, options);
    case 'preprocessing': return runPreprocessing(ctx, values, options);
    case 'postprocessing': return runPostprocessing(ctx, values, options);
  }
}
