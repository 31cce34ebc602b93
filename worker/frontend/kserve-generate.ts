// POST /v2/models/{name}[/versions/{v}]/generate and /generate_stream: Triton's generate extension. The body's
// fields are the model's inputs; the answer is the seeds' flat JSON (model_name, model_version, sequence_*,
// text_output, ...), or one SSE event per iteration (and per batch element) on generate_stream.
import { describeValue } from '../common/errors.js';
import { badRequest } from './http-errors.js';
import type { Route } from './http-server.js';
import { collectFinal, generateBatchBody, generateEvent } from './kserve-encode.js';
import { runModel } from './kserve-run.js';
import { answerSettled, holdsLogits, sendAnswer, writeAnswerEvent } from './logits-json.js';
import type { ModelCatalog } from './model-catalog.js';
import { fromJsonField, type NamedValues } from './named-values.js';
import { endEventStream, startEventStream, writeEvent } from './sse.js';

/** The body's "id" (Triton's request id, used by stop requests) and its inputs. */
export function generateInputs(body: Record<string, unknown>): { id: string | undefined; values: NamedValues } {
  const values: NamedValues = new Map();
  let id: string | undefined;
  for (const [key, value] of Object.entries(body)) {
    if (key === 'id') {
      if (typeof value !== 'string' && !Number.isSafeInteger(value)) throw badRequest(`id must be a string, got ${describeValue(value)}`, 'id');
      id = String(value);
      continue;
    }
    if (key === 'parameters') continue;  // Triton's request parameters; none change what we do
    values.set(key, fromJsonField(key, value));
  }
  return { id, values };
}

export function generateRoutes(catalog: ModelCatalog): Route[] {
  const path = (suffix: string) => new RegExp(`^/v2/models/([^/]+)(?:/versions/([^/]+))?/${suffix}$`);
  return [
    {
      method: 'POST', path: path('generate'), style: 'kserve',
      handle: async (c) => {
        const { ctx, model } = catalog.resolve(c.params[0]!, c.params[1]);
        const { id, values } = generateInputs(await c.json());
        const run = runModel(ctx, model, values, {
          signal: c.signal, settled: () => answerSettled(c.res), streamEndpoint: false, ...(id === undefined ? {} : { requestId: id }),
        });
        const elements = await collectFinal(run.events, run.batchSize);
        if (c.signal.aborted) return;
        await sendAnswer(c.res, 200, elements.length === 1 ? generateEvent(model.name, id, elements[0]!) : generateBatchBody(model.name, id, elements));
      },
    },
    {
      method: 'POST', path: path('generate_stream'), style: 'kserve',
      handle: async (c) => {
        const { ctx, model } = catalog.resolve(c.params[0]!, c.params[1]);
        const { id, values } = generateInputs(await c.json());
        // Everything that can be rejected is rejected here, before the 200 and the first event.
        const run = runModel(ctx, model, values, {
          signal: c.signal, settled: () => answerSettled(c.res), streamEndpoint: true, ...(id === undefined ? {} : { requestId: id }),
        });
        startEventStream(c.res);
        for await (const event of run.events) {
          const data = generateEvent(model.name, id, event.outputs);
          // Events with logits are written a slice at a time (logits-json.ts); the others at once, as always.
          if (!(holdsLogits(data) ? await writeAnswerEvent(c.res, data) : writeEvent(c.res, data))) break;
        }
        endEventStream(c.res);
      },
    },
  ];
}
