// GET /v1/models and the model-name check of every /v1 request.
import { type Route, sendJson } from './http-server.js';
import type { ModelCatalog } from './model-catalog.js';

const CREATED = Math.floor(Date.now() / 1000);

export function modelsRoutes(catalog: ModelCatalog): Route[] {
  const entry = (id: string) => ({ id, object: 'model', created: CREATED, owned_by: 'trtllm-launch' });
  return [
    {
      method: 'GET', path: /^\/v1\/models$/, style: 'openai',
      handle: (c) => sendJson(c.res, 200, { object: 'list', data: catalog.openAiModels().map(entry) }),
    },
    {
      method: 'GET', path: /^\/v1\/models\/([^/]+)$/, style: 'openai',
      handle: (c) => {
        catalog.openAi(c.params[0]!);
        sendJson(c.res, 200, entry(c.params[0]!));
      },
    },
  ];
}
