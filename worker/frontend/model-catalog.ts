// Which executor answers a model name. One model (leader mode): Triton's five names all reach it. Several models
// (orchestrator mode): each is served under its own name with the text interface of `ensemble` (generate, infer,
// OpenAI), and Triton's five names reach the first model of the repository, so the seeds' commands keep working.
// Per-model readiness comes from each model's context; the server is ready when every model is (Triton's strict
// readiness), and /v2/repository/index says which one is not and why.
import { quoteName } from '../common/quote-value.js';
import type { ServedAdapter } from '../options/lora-options.js';
import { HttpError, notFound } from './http-errors.js';
import { MODEL_VERSION } from './metrics.js';
import { findModel, MODEL_NAMES, SERVED_MODELS, type ServedModel } from './model-repository.js';
import type { ServingContext } from './serving-context.js';

export interface CatalogEntry { ctx: ServingContext; model: ServedModel }
/** What an OpenAI `model` field names: a model's executor, and the LoRA adapter to run when it names one. */
export interface OpenAiTarget { ctx: ServingContext; adapter?: ServedAdapter | undefined }
/** One entry of /v1/models: a model, or a LoRA adapter with its directory (root) and its base model (parent). */
export interface OpenAiModel { id: string; root?: string; parent?: string }
export interface ModelState { name: string; version: string; state: 'READY' | 'UNAVAILABLE'; reason: string }

export interface ModelCatalog {
  /** The executor and interface behind a KServe model name; 404 naming what is served. */
  resolve(name: string, version?: string): CatalogEntry;
  /** The executor (and LoRA adapter) behind an OpenAI `model` field; 404 naming what is served. */
  openAi(model: string): OpenAiTarget;
  /** OpenAI models, served order: each model, then its LoRA adapters. */
  openAiModels(): OpenAiModel[];
  serverReady(): boolean;
  /** Every served model name with its state (KServe's repository index). */
  index(): ModelState[];
  contexts(): ServingContext[];
  /** Orchestrator mode: answers that gather every model's (/kv_cache_events) say which model each part came from. */
  readonly multiModel: boolean;
}

export function singleModelCatalog(ctx: ServingContext): ModelCatalog {
  return {
    resolve: (name, version) => ({ ctx, model: findModel(name, version) }),
    openAi: (model) => {
      if (model === ctx.servedModelName || model === 'ensemble' || model === 'tensorrt_llm_bls') return { ctx };
      const adapter = ctx.adapters.find((a) => a.name === model);
      if (adapter) return { ctx, adapter };
      throw notFound(`The model ${quoteName(model, '`')} does not exist; this server serves \`${ctx.servedModelName}\`${adapterList(ctx.adapters)}`, 'model');
    },
    openAiModels: () => modelEntries(ctx.servedModelName, ctx.adapters),
    serverReady: () => ctx.isReady(),
    index: () => MODEL_NAMES.map((name) => state(name, ctx)),
    contexts: () => [ctx],
    multiModel: false,
  };
}

/** The adapters as a not-found message lists them ('' without any). */
function adapterList(adapters: readonly ServedAdapter[]): string {
  return adapters.length === 0 ? '' : ` and its LoRA adapters ${adapters.map((a) => `\`${a.name}\``).join(', ')}`;
}

/** A model's /v1/models entries: itself, then each adapter with its base model as parent (vLLM's listing). */
function modelEntries(name: string, adapters: readonly ServedAdapter[]): OpenAiModel[] {
  return [{ id: name }, ...adapters.map((a) => ({ id: a.name, root: a.dir, parent: name }))];
}

function state(name: string, ctx: ServingContext): ModelState {
  const ready = ctx.isReady();
  return { name, version: MODEL_VERSION, state: ready ? 'READY' : 'UNAVAILABLE', reason: ready ? '' : ctx.unavailableReason?.() ?? 'not ready' };
}

const ENSEMBLE = SERVED_MODELS.find((m) => m.name === 'ensemble')!;

/** A model of a repository: its context once its worker group is up (absent when it never came up). */
export interface CatalogModel {
  name: string;
  ctx: ServingContext | undefined;
  adapters?: readonly ServedAdapter[];   // its preloaded LoRA adapters (known whether or not its group came up)
  reason(): string | undefined;  // why it cannot serve, when it cannot
}

export function multiModelCatalog(models: readonly CatalogModel[]): ModelCatalog {
  if (models.length === 0) throw new Error('a multi-model catalog needs at least one model');
  const byName = new Map<string, CatalogModel>();
  for (const m of models) {
    if (byName.has(m.name) || MODEL_NAMES.includes(m.name)) {
      throw new Error(`model name '${m.name}' is used twice (Triton's names ${MODEL_NAMES.join(', ')} are taken by the first model)`);
    }
    byName.set(m.name, m);
  }
  // An adapter's name is an OpenAI model id of the whole server (the launcher refuses a clash before anything starts).
  const adapterOf = new Map<string, { m: CatalogModel; adapter: ServedAdapter }>();
  for (const m of models) {
    for (const adapter of m.adapters ?? []) {
      if (byName.has(adapter.name) || adapterOf.has(adapter.name)) throw new Error(`LoRA adapter name '${adapter.name}' of model '${m.name}' is used twice`);
      adapterOf.set(adapter.name, { m, adapter });
    }
  }
  const first = models[0]!;
  const served = [...byName.keys(), ...MODEL_NAMES];
  const unknown = (name: string) => `unknown model ${quoteName(name)}; this server serves ${served.join(', ')}`;
  const usable = (m: CatalogModel, name: string): ServingContext => {
    if (m.ctx) return m.ctx;
    throw new HttpError(503, `model ${quoteName(name)} is not available: ${m.reason() ?? 'its worker group is not up'}`);
  };
  const ready = (m: CatalogModel) => m.ctx !== undefined && m.ctx.isReady();
  const stateOf = (name: string, m: CatalogModel): ModelState => (ready(m)
    ? { name, version: MODEL_VERSION, state: 'READY', reason: '' }
    : { name, version: MODEL_VERSION, state: 'UNAVAILABLE', reason: m.reason() ?? 'not ready' });
  return {
    resolve: (name, version) => {
      const m = byName.get(name);
      if (!m) {
        if (MODEL_NAMES.includes(name)) return { ctx: usable(first, name), model: findModel(name, version) };
        throw notFound(unknown(name));
      }
      if (version !== undefined && version !== '' && version !== MODEL_VERSION) {
        throw notFound(`model ${quoteName(name)} has no version ${quoteName(version)}; available: ${MODEL_VERSION}`);
      }
      return { ctx: usable(m, name), model: { ...ENSEMBLE, name } };
    },
    openAi: (model) => {
      const m = byName.get(model) ?? (model === 'ensemble' || model === 'tensorrt_llm_bls' ? first : undefined);
      if (m) return { ctx: usable(m, model) };
      const lora = adapterOf.get(model);
      if (lora) return { ctx: usable(lora.m, model), adapter: lora.adapter };
      const adapters = adapterOf.size === 0 ? '' : ` and the LoRA adapters ${[...adapterOf.keys()].map((n) => `\`${n}\``).join(', ')}`;
      throw notFound(`The model ${quoteName(model, '`')} does not exist; this server serves ${[...byName.keys()].map((n) => `\`${n}\``).join(', ')}${adapters}`, 'model');
    },
    openAiModels: () => [...byName.values()].flatMap((m) => modelEntries(m.name, m.adapters ?? [])),
    serverReady: () => models.every(ready),
    index: () => [...[...byName].map(([name, m]) => stateOf(name, m)), ...MODEL_NAMES.map((name) => stateOf(name, first))],
    contexts: () => models.flatMap((m) => (m.ctx ? [m.ctx] : [])),
    multiModel: true,
  };
}

/** 503 naming the drain while the server drains, or the model when its executor cannot take requests (its worker
 * group died, it is still loading). */
export function requireReady(ctx: ServingContext, name: string): void {
  const draining = ctx.drainRefusal?.();
  if (draining !== undefined) throw new HttpError(503, draining);
  if (ctx.isReady()) return;
  const reason = ctx.unavailableReason?.();
  throw new HttpError(503, reason ? `model ${quoteName(name)} is not available: ${reason}` : 'the server is not ready (loading, warming up or shutting down)');
}
