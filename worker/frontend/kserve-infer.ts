// POST /v2/models/{name}[/versions/{v}]/infer: KServe v2 JSON tensors in and out, with Triton's tensor names.
import { describeValue } from '../binding/errors.js';
import { badRequest } from './http-errors.js';
import { type Route, sendJson } from './http-server.js';
import { collectFinal, stackOutputs } from './kserve-encode.js';
import { runModel } from './kserve-run.js';
import { MODEL_VERSION } from './metrics.js';
import type { ModelCatalog } from './model-catalog.js';
import { fromKserveTensor, type NamedValues } from './named-values.js';

export function inferInputs(body: Record<string, unknown>): { id: string | undefined; values: NamedValues; outputs?: Set<string> } {
  const { id, inputs, outputs } = body;
  if (id !== undefined && typeof id !== 'string') throw badRequest(`id must be a string, got ${describeValue(id)}`, 'id');
  if (!Array.isArray(inputs)) throw badRequest(`inputs must be an array of tensors, got ${describeValue(inputs)}`, 'inputs');
  const values: NamedValues = new Map();
  inputs.forEach((tensor, i) => {
    const [name, value] = fromKserveTensor(tensor, i);
    if (values.has(name)) throw badRequest(`input '${name}' is given twice`, name);
    values.set(name, value);
  });
  let wanted: Set<string> | undefined;
  if (outputs !== undefined) {
    if (!Array.isArray(outputs)) throw badRequest(`outputs must be an array of {"name": ...}, got ${describeValue(outputs)}`, 'outputs');
    wanted = new Set(outputs.map((o, i) => {
      const name = (o as { name?: unknown } | null)?.name;
      if (typeof name !== 'string') throw badRequest(`outputs[${i}].name must be a string, got ${describeValue(name)}`, 'outputs');
      return name;
    }));
  }
  return { id, values, ...(wanted ? { outputs: wanted } : {}) };
}

export function inferRoutes(catalog: ModelCatalog): Route[] {
  return [{
    method: 'POST', path: /^\/v2\/models\/([^/]+)(?:\/versions\/([^/]+))?\/infer$/, style: 'kserve',
    handle: async (c) => {
      const { ctx, model } = catalog.resolve(c.params[0]!, c.params[1]);
      const { id, values, outputs } = inferInputs(await c.json());
      const run = runModel(ctx, model, values, { signal: c.signal, streamEndpoint: false, ...(id === undefined ? {} : { requestId: id }) });
      const elements = await collectFinal(run.events, run.batchSize);
      if (c.signal.aborted) return;
      sendJson(c.res, 200, {
        model_name: model.name,
        model_version: MODEL_VERSION,
        ...(id === undefined ? {} : { id }),
        outputs: elements.length === 0 ? [] : stackOutputs(elements, outputs),
      });
    },
  }];
}
