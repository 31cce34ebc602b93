// GET /v1/models (each model, then its LoRA adapters) and GET /v1/models/{id}.
import { type Route, sendJson } from './http-server.js';
import type { ModelCatalog, OpenAiModel } from './model-catalog.js';

const CREATED = Math.floor(Date.now() / 1000);

/** A model object as OpenAI lists it; a LoRA adapter also says its directory (root) and base model (parent), as
 * vLLM's listing does. */
export function modelObject(m: OpenAiModel): Record<string, unknown> {
  return { id: m.id, object: 'model', created: CREATED, owned_by: 'trtllm-launch', ...(m.parent === undefined ? {} : { root: m.root, parent: m.parent }) };
}

export function modelsRoutes(catalog: ModelCatalog): Route[] {
  return [
    {
      method: 'GET', path: /^\/v1\/models$/, style: 'openai',
      handle: (c) => sendJson(c.res, 200, { object: 'list', data: catalog.openAiModels().map(modelObject) }),
    },
    {
      method: 'GET', path: /^\/v1\/models\/([^/]+)$/, style: 'openai',
      handle: (c) => {
        const id = c.params[0]!;
        catalog.openAi(id);  // 404 naming what is served
        sendJson(c.res, 200, modelObject(catalog.openAiModels().find((m) => m.id === id) ?? { id }));
      },
    },
  ];
}
