// POST /v2/models/{name}[/versions/{v}]/generate and /generate_stream: Triton's generate extension. The body's
// fields are the model's inputs; the answer is the seeds' flat JSON (model_name, model_version, sequence_*,
// text_output, ...), or one SSE event per iteration (and per batch element) on generate_stream. A request a stop
// cancelled says so: "finish_reason": "cancelled" (TensorRT-LLM's name for it) in its last event or its body; the
// stop's own answer says how many requests it cancelled: "cancelled_requests" (live-requests.ts).
import { describeValue } from '../common/errors.js';
import { badRequest } from './http-errors.js';
import { type Route, sendJson } from './http-server.js';
import { collectFinal, generateBatchBody, generateEvent, generateHeader } from './kserve-encode.js';
import { runModel } from './kserve-run.js';
import type { RequestId } from './live-requests.js';
import { answerSettled, holdsLogits, sendAnswer, writeAnswerEvent } from './logits-json.js';
import type { ModelCatalog } from './model-catalog.js';
import { watchFinish } from './model-run.js';
import { fromJsonField, type NamedValues } from './named-values.js';
import { endEventStream, startEventStream, writeEvent } from './sse.js';

/** The body's "id" (Triton's request id, used by stop requests; a string or an integer, kept as sent: 123 and "123"
 * are different ids) and its inputs. */
export function generateInputs(body: Record<string, unknown>): { id: RequestId | undefined; values: NamedValues } {
  const values: NamedValues = new Map();
  let id: RequestId | undefined;
  for (const [key, value] of Object.entries(body)) {
    if (key === 'id') {
      if (typeof value !== 'string' && !Number.isSafeInteger(value)) throw badRequest(`id must be a string or an integer, got ${describeValue(value)}`, 'id');
      id = value as RequestId;
      continue;
    }
    if (key === 'parameters') continue;  // Triton's request parameters; none change what we do
    values.set(key, fromJsonField(key, value));
  }
  return { id, values };
}

/** A stop request's answer: Triton's empty response, and how many requests it cancelled (0: none was running
 * under its id, or it had finished). */
function stopBody(model: string, id: RequestId | undefined, cancelled: number): Record<string, unknown> {
  return { ...generateHeader(model, id), cancelled_requests: cancelled };
}

/** Marks a whole answer whose elements a stop cancelled: "finish_reason": "cancelled" (a batch: one entry per
 * element, null for those that ended otherwise). An answer nobody cancelled is left as Triton shapes it. */
function withCancelled(body: Record<string, unknown>, reasons: readonly (string | undefined)[], batch: number): Record<string, unknown> {
  const cancelled = Array.from({ length: batch }, (_, i) => reasons[i] === 'cancelled');
  if (!cancelled.some(Boolean)) return body;
  return { ...body, finish_reason: batch === 1 ? 'cancelled' : cancelled.map((c) => (c ? 'cancelled' : null)) };
}

export function generateRoutes(catalog: ModelCatalog): Route[] {
  const path = (suffix: string) => new RegExp(`^/v2/models/([^/]+)(?:/versions/([^/]+))?/${suffix}$`);
  return [
    {
      method: 'POST', path: path('generate'), style: 'kserve',
      handle: async (c) => {
        const { ctx, model } = catalog.resolve(c.params[0]!, c.params[1]);
        const { id, values } = generateInputs(await c.json());
        const run = await runModel(ctx, model, values, {
          signal: c.signal, settled: () => answerSettled(c.res), streamEndpoint: false, ...(id === undefined ? {} : { requestId: id }),
        });
        if (run.stop) {
          const outcome = await run.stop;
          if (!c.signal.aborted) sendJson(c.res, 200, stopBody(model.name, id, outcome.cancelled));
          return;
        }
        const watched = watchFinish(run.events);
        const elements = await collectFinal(watched.events, run.batchSize);
        if (c.signal.aborted) return;
        const body = elements.length === 1 ? generateEvent(model.name, id, elements[0]!) : generateBatchBody(model.name, id, elements);
        await sendAnswer(c.res, 200, withCancelled(body, watched.reasons, elements.length));
      },
    },
    {
      method: 'POST', path: path('generate_stream'), style: 'kserve',
      handle: async (c) => {
        const { ctx, model } = catalog.resolve(c.params[0]!, c.params[1]);
        const { id, values } = generateInputs(await c.json());
        // Everything that can be rejected is rejected here, before the 200 and the first event.
        const run = await runModel(ctx, model, values, {
          signal: c.signal, settled: () => answerSettled(c.res), streamEndpoint: true, ...(id === undefined ? {} : { requestId: id }),
        });
        const outcome = run.stop ? await run.stop : undefined;
        startEventStream(c.res);
        if (outcome) writeEvent(c.res, stopBody(model.name, id, outcome.cancelled));
        for await (const event of run.events) {
          const data = generateEvent(model.name, id, event.outputs);
          if (event.final && event.finishReason === 'cancelled') data.finish_reason = 'cancelled';
          // Events with logits are written a slice at a time (logits-json.ts); the others at once, as always.
          if (!(holdsLogits(data) ? await writeAnswerEvent(c.res, data) : writeEvent(c.res, data))) break;
        }
        endEventStream(c.res);
      },
    },
  ];
}
