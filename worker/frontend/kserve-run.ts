// Runs a request against one of the served models, whichever endpoint it came through (generate,
// generate_stream, infer): named values in, a stream of per-batch-element output sets out (model-run.ts). A request
// with an id holds it while it runs (live-requests.ts), so Triton's stop request can name it.
import { badRequest } from './http-errors.js';
import { runPostprocessing, runPreprocessing } from './kserve-processing.js';
import { runTextModel } from './kserve-text-model.js';
import { runTokenModel } from './kserve-token-model.js';
import type { LiveRequest, RequestId } from './live-requests.js';
import { requireReady } from './model-catalog.js';
import type { ServedModel } from './model-repository.js';
import type { ElementEvent, ModelRun, RunOptions } from './model-run.js';
import { checkNames, type NamedValues, optBool } from './named-values.js';
import type { ServingContext } from './serving-context.js';

/** A `stop: true` request cancels the running request of this model with its id and produces no outputs itself;
 * its answer says whether it cancelled one. */
function handleStop(ctx: ServingContext, model: ServedModel, values: NamedValues, requestId: RequestId | undefined): ModelRun | undefined {
  if (optBool(values.get('stop')?.data[0], 'stop') !== true) return undefined;
  if (requestId === undefined || requestId === '') {
    throw badRequest('stop: true needs the id of the request to stop (the request body\'s "id")', 'id');
  }
  return { batchSize: 0, events: (async function* () {})(), stop: ctx.liveRequests.stop(model.name, requestId) };
}

/** The run's events, then the id given back (however the consumer stops reading: to the end, early, or by error). */
async function* holdingId(events: AsyncIterable<ElementEvent>, live: LiveRequest): AsyncGenerator<ElementEvent> {
  try {
    yield* events;
  } finally {
    live.release();
  }
}

async function dispatch(ctx: ServingContext, model: ServedModel, values: NamedValues, options: RunOptions): Promise<ModelRun> {
  switch (model.kind) {
    case 'text': return runTextModel(ctx, model, values, options);
    case 'tokens': return runTokenModel(ctx, model, values, options);
    case 'preprocessing': return runPreprocessing(ctx, values, options);
    case 'postprocessing': return runPostprocessing(ctx, values, options);
  }
}

/** Resolves once every element has been checked, tokenized and enqueued: a rejection comes before any output. */
export async function runModel(ctx: ServingContext, model: ServedModel, values: NamedValues, options: RunOptions): Promise<ModelRun> {
  requireReady(ctx, model.name);
  checkNames(values, new Set(model.inputs.map((i) => i.name)), model.name);
  const stopped = handleStop(ctx, model, values, options.requestId);
  if (stopped) return stopped;
  const id = options.requestId;
  // Pre- and postprocessing answer at once: nothing of theirs runs long enough to be stopped.
  const stoppable = model.kind === 'text' || model.kind === 'tokens';
  if (id === undefined || id === '' || !stoppable) return dispatch(ctx, model, values, options);
  // Claimed before tokenizing: a duplicate id is refused before any work, and a stop sent meanwhile finds it.
  const live = ctx.liveRequests.claim(model.name, id);
  try {
    const run = await dispatch(ctx, model, values, { ...options, onEnqueued: (handle) => live.track(handle) });
    live.enqueued();
    return { ...run, events: holdingId(run.events, live) };
  } catch (error) {
    live.release();
    throw error;
  }
}
