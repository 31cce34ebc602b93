// GET /v1/models and the model-name check of every /v1 request.
import { notFound } from './http-errors.js';
import { type Route, sendJson } from './http-server.js';
import type { ServingContext } from './serving-context.js';

const CREATED = Math.floor(Date.now() / 1000);

/** The served name, or one of Triton's text model names (both reach the same executor). */
export function checkModel(ctx: ServingContext, model: string): void {
  if (model === ctx.servedModelName || model === 'ensemble' || model === 'tensorrt_llm_bls') return;
  throw notFound(`The model \`${model}\` does not exist; this server serves \`${ctx.servedModelName}\``, 'model');
}

export function modelsRoutes(ctx: ServingContext): Route[] {
  const entry = (id: string) => ({ id, object: 'model', created: CREATED, owned_by: 'trtllm-launch' });
  return [
    {
      method: 'GET', path: /^\/v1\/models$/, style: 'openai',
      handle: (c) => sendJson(c.res, 200, { object: 'list', data: [entry(ctx.servedModelName)] }),
    },
    {
      method: 'GET', path: /^\/v1\/models\/([^/]+)$/, style: 'openai',
      handle: (c) => {
        checkModel(ctx, c.params[0]!);
        sendJson(c.res, 200, entry(c.params[0]!));
      },
    },
  ];
}
