// An OpenAI request's "model" naming a LoRA adapter, pure: the catalogs resolve it to its model's executor and the
// adapter (its task id), the base model's names to the base, an unknown name to the 404 it always was, now listing
// the adapters; /v1/models lists each adapter after its model with its directory (root) and base (parent), vLLM's
// shape. Through a real server: kserve-lora-e2e.test.ts.
import t from 'tap';

import { HttpError } from '../../../worker/frontend/http-errors.js';
import { multiModelCatalog, singleModelCatalog } from '../../../worker/frontend/model-catalog.js';
import { modelObject } from '../../../worker/frontend/openai-models.js';
import type { ServingContext } from '../../../worker/frontend/serving-context.js';
import type { ServedAdapter } from '../../../worker/options/lora-options.js';

const SQL: ServedAdapter = { name: 'sql', taskId: 1, dir: '/a/sql' };
const CHAT: ServedAdapter = { name: 'chat', taskId: 2, dir: '/a/chat' };

// What the catalogs read of a context: its name, its adapters and whether it is ready.
const context = (servedModelName: string, adapters: ServedAdapter[] = []) =>
  ({ servedModelName, adapters, isReady: () => true }) as unknown as ServingContext;

function notFoundMessage(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    if (error instanceof HttpError && error.status === 404 && error.param === 'model') return error.message;
    throw error;
  }
  return undefined;
}

t.test('one model: its names run the base, an adapter\'s name runs the adapter', async (t) => {
  const ctx = context('llama', [SQL, CHAT]);
  const catalog = singleModelCatalog(ctx);
  for (const base of ['llama', 'ensemble', 'tensorrt_llm_bls']) t.same(catalog.openAi(base), { ctx }, `${base}: the base model`);
  t.same(catalog.openAi('sql'), { ctx, adapter: SQL });
  t.same(catalog.openAi('chat'), { ctx, adapter: CHAT });
  t.equal(notFoundMessage(() => catalog.openAi('nope')),
    'The model `nope` does not exist; this server serves `llama` and its LoRA adapters `sql`, `chat`');
  t.equal(notFoundMessage(() => singleModelCatalog(context('llama')).openAi('nope')),
    'The model `nope` does not exist; this server serves `llama`', 'without adapters: the message as before');
  t.same(catalog.openAiModels(), [{ id: 'llama' }, { id: 'sql', root: '/a/sql', parent: 'llama' }, { id: 'chat', root: '/a/chat', parent: 'llama' }]);
});

t.test('/v1/models objects: an adapter says its directory and its base', async (t) => {
  t.match(modelObject({ id: 'llama' }), { id: 'llama', object: 'model', owned_by: 'trtllm-launch' });
  t.notOk('parent' in modelObject({ id: 'llama' }), 'a model has no parent');
  t.match(modelObject({ id: 'sql', root: '/a/sql', parent: 'llama' }), { id: 'sql', object: 'model', owned_by: 'trtllm-launch', root: '/a/sql', parent: 'llama' });
  t.type(modelObject({ id: 'sql' }).created, 'number');
});

t.test('several models: each adapter belongs to its model; names are one namespace', async (t) => {
  const a = context('a', [SQL]);
  const b = context('b', [CHAT]);
  const catalog = multiModelCatalog([
    { name: 'a', ctx: a, reason: () => undefined, adapters: [SQL] },
    { name: 'b', ctx: b, reason: () => undefined, adapters: [CHAT] },
  ]);
  t.same(catalog.openAi('sql'), { ctx: a, adapter: SQL });
  t.same(catalog.openAi('chat'), { ctx: b, adapter: CHAT });
  t.same(catalog.openAi('b'), { ctx: b });
  t.equal(notFoundMessage(() => catalog.openAi('x')), 'The model `x` does not exist; this server serves `a`, `b` and the LoRA adapters `sql`, `chat`');
  t.same(catalog.openAiModels().map((m) => [m.id, m.parent]), [['a', undefined], ['sql', 'a'], ['b', undefined], ['chat', 'b']]);
  t.throws(() => multiModelCatalog([
    { name: 'a', ctx: a, reason: () => undefined, adapters: [{ ...SQL, name: 'b' }] },
    { name: 'b', ctx: b, reason: () => undefined },
  ]), /LoRA adapter name 'b' of model 'a' is used twice/);
  const down = multiModelCatalog([{ name: 'a', ctx: undefined, reason: () => 'its worker group failed', adapters: [SQL] }]);
  t.throws(() => down.openAi('sql'), { status: 503, message: 'model \'sql\' is not available: its worker group failed' }, 'an adapter of a model that is down: 503 as the model');
});
