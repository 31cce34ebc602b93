// `--multi-model`: the repository's model files → the plan every process of the orchestrator job reads (pure).
// Checks what can be checked before anything starts: unique names, world size, device ids (Triton's "0,1;2,3"
// spelling too) that do not overlap and cover every rank, participant ids (no-spawn) that form a partition of the
// job, KV cache events only with prefix reuse, and — on the CPU — more ranks than cores only when --oversubscribe
// says so. A file with parallel.dp N is N groups of one name (replicas behind a router, as `--dp`; Triton's
// instance_group count): its device ids and participant ids cover every replica's ranks, replica r taking the r-th
// run of tp × pp.
import { basename, extname } from 'node:path';

import { InvalidArgumentError } from 'commander';

import { loraProblem, servedAdapters } from '../../worker/options/lora-options.js';
import type { GroupPlan, MultiModelPlan } from '../../worker/orchestrator/plan.js';
import type { ServeOptions } from '../../worker/options/serve-options.js';
import type { ServeCliOptions } from '../serve-options.js';
import { KV_ROUTER_EVENT_BUFFER } from './data-parallel.js';

export interface ModelFile {
  path: string;
  options: Readonly<ServeCliOptions>;        // the file merged under flags and env
  values: ReadonlyMap<string, unknown>;      // the file's own keys (gpu_device_ids, participant_ids)
}

export interface MultiModelInput {
  models: readonly ModelFile[];              // in repository order (file names sorted)
  spawn: boolean;
  failFast: boolean;
  worldSize?: number | undefined;            // --world-size, when given
  oversubscribe: boolean;
  cpu: boolean;                              // the CPU backend: ranks run on cores
  gpuDeviceIds?: string | undefined;         // --gpu-device-ids
  cores: number;
  frontend: ServeOptions;
  serveOptions: (options: Readonly<ServeCliOptions>, parallel: { tp: number; pp: number }) => ServeOptions;
}

const fail = (message: string): never => { throw new InvalidArgumentError(message); };

/** Triton's per-model device lists: "0,1;2,3" gives the first model 0,1 and the second 2,3 (pure). */
export function parseDeviceLists(text: string, models: number): number[][] {
  const lists = text.split(';').map((part) => part.trim());
  if (lists.length !== models) {
    fail(`--gpu-device-ids "${text}" has ${lists.length} list(s) separated by ';' but the repository has ${models} model(s): give one list per model, e.g. "0,1;2,3"`);
  }
  return lists.map((list) => list.split(',').map((id) => {
    const n = Number(id.trim());
    if (!Number.isSafeInteger(n) || n < 0 || id.trim() === '') fail(`--gpu-device-ids "${text}": "${id}" is not a device id (an integer >= 0)`);
    return n;
  }));
}

/** An OpenAI request's "model" names one model or one LoRA adapter of the whole repository. */
function checkAdapterNames(models: readonly { name: string; path: string; adapters: string[] }[]): void {
  const owners = new Map(models.map((m) => [m.name, `the model "${m.name}" (${m.path})`]));
  for (const m of models) {
    for (const adapter of m.adapters) {
      const other = owners.get(adapter);
      if (other) fail(`model "${m.name}" (${m.path}): its LoRA adapter "${adapter}" (lora.modules) has the name of ${other}: an OpenAI request's "model" must name one of them; rename the adapter`);
      owners.set(adapter, `the LoRA adapter "${adapter}" of model "${m.name}" (${m.path})`);
    }
  }
}

function modelName(file: ModelFile): string {
  return file.options.servedModelName ?? basename(file.path, extname(file.path));
}

export function planMultiModel(input: MultiModelInput): MultiModelPlan {
  const { models } = input;
  if (models.length === 0) fail('--multi-model needs a --model-repo with at least one model file (*.yaml)');
  if (input.spawn && input.worldSize !== undefined && input.worldSize > 1) {
    fail(`--multi-model starts one orchestrator (world size 1) that spawns each model's ranks; --world-size ${input.worldSize} does not apply: set parallel.tp / parallel.pp in each model file (or use --no-spawn to start every rank up front)`);
  }
  const names = new Map<string, string>();
  const devices = input.gpuDeviceIds === undefined ? undefined : parseDeviceLists(input.gpuDeviceIds, models.length);
  const groups: GroupPlan[] = models.flatMap((file, i) => {
    const name = modelName(file);
    const other = names.get(name);
    if (other) fail(`model name "${name}" is used by both ${other} and ${file.path}: set a distinct "name" in one of them`);
    names.set(name, file.path);
    const dp = file.options.dp ?? 1;
    let options = file.options;
    if (dp > 1 && options.router === 'kv') {
      if (options.enableKvCacheReuse !== true) fail(`model "${name}" (${file.path}): router kv needs kv_cache.enable_reuse: true: it routes by what each replica's prefix cache holds, which is off`);
      if ((options.kvCacheEventBufferMaxSize ?? 0) === 0) options = { ...options, kvCacheEventBufferMaxSize: KV_ROUTER_EVENT_BUFFER };
    }
    const events = options.kvCacheEventBufferMaxSize ?? 0;
    if (events > 0 && options.enableKvCacheReuse !== true) {
      fail(`model "${name}" (${file.path}): kv_cache.event_buffer_max_size ${events} needs kv_cache.enable_reuse: true (--kv-cache-event-buffer-max-size needs --enable-kv-cache-reuse): KV cache events report the prefix cache, which is off`);
    }
    const lora = loraProblem({ ...options, servedModelName: name });
    if (lora) fail(`model "${name}" (${file.path}): ${lora}`);
    const tp = options.tp ?? 1;
    const pp = options.pp ?? 1;
    const per = tp * pp;
    const grid = dp > 1 ? `${dp} replicas x tp ${tp} x pp ${pp}` : `tp ${tp} x pp ${pp}`;
    const deviceIds = devices?.[i] ?? ((file.values.get('gpu_device_ids') as number[] | undefined) ?? []);
    if (deviceIds.length > 0 && deviceIds.length < dp * per) {
      fail(`model "${name}" (${file.path}) needs ${dp * per} rank(s) (${grid}) but has ${deviceIds.length} device id(s) [${deviceIds.join(', ')}]: give one device per rank`);
    }
    const ranks = [...((file.values.get('participant_ids') as number[] | undefined) ?? [])].sort((a, b) => a - b);
    if (dp > 1 && ranks.length > 0 && ranks.length !== dp * per) {
      fail(`model "${name}": participant_ids [${ranks.join(', ')}] has ${ranks.length} rank(s), ${grid} needs ${dp * per}`);
    }
    const serve = input.serveOptions(options, { tp, pp });
    return Array.from({ length: dp }, (_, r) => ({
      name, serve, tp, pp,
      ranks: dp > 1 ? ranks.slice(r * per, (r + 1) * per) : ranks,
      deviceIds: dp > 1 ? deviceIds.slice(r * per, (r + 1) * per) : [...deviceIds],
      ...(dp > 1 ? { replica: r, router: options.router ?? 'least-load' } : {}),
    }));
  });

  checkAdapterNames(models.map((file) => ({ name: modelName(file), path: file.path, adapters: servedAdapters(file.options.loraModules).map((a) => a.name) })));

  const owner = new Map<number, string>();
  for (const g of groups) {
    for (const id of g.deviceIds) {
      const taken = owner.get(id);
      if (taken) fail(`device ${id} is given to both model "${taken}" and model "${g.name}": each GPU serves one model`);
      owner.set(id, g.name);
    }
  }

  const total = groups.reduce((n, g) => n + g.tp * g.pp, 0);
  if (!input.spawn) assignParticipants(groups, input.worldSize);
  const processes = 1 + total;
  if (input.cpu && processes > input.cores && !input.oversubscribe) {
    fail(`--multi-model needs ${processes} processes (the orchestrator + ${groups.map((g) => `${g.tp * g.pp} for ${g.name}${g.replica === undefined ? '' : ` replica ${g.replica}`}`).join(', ')}) but this machine has ${input.cores} core(s): pass --oversubscribe to run more ranks than cores`);
  }
  return { spawn: input.spawn, failFast: input.failFast, frontend: input.frontend, groups };
}

/** No-spawn: the job is the orchestrator (rank 0) plus every group; participant ids pin groups to job ranks. */
function assignParticipants(groups: GroupPlan[], worldSize: number | undefined): void {
  const total = 1 + groups.reduce((n, g) => n + g.tp * g.pp, 0);
  if (worldSize !== undefined && worldSize !== total) {
    fail(`--no-spawn: --world-size ${worldSize} must equal 1 (the orchestrator) + the ranks of every model = ${total}`);
  }
  const taken = new Map<number, string>();
  for (const g of groups) {
    if (g.ranks.length === 0) continue;
    if (g.ranks.length !== g.tp * g.pp) fail(`model "${g.name}": participant_ids [${g.ranks.join(', ')}] has ${g.ranks.length} rank(s), tp ${g.tp} x pp ${g.pp} needs ${g.tp * g.pp}`);
    for (const r of g.ranks) {
      if (r < 1 || r >= total) fail(`model "${g.name}": participant id ${r} is outside 1..${total - 1} (rank 0 is the orchestrator; the job has ${total} ranks)`);
      const other = taken.get(r);
      if (other) fail(`participant id ${r} is given to both model "${other}" and model "${g.name}"`);
      taken.set(r, g.name);
    }
  }
  let next = 1;
  for (const g of groups) {
    if (g.ranks.length > 0) continue;
    while (g.ranks.length < g.tp * g.pp) {
      while (taken.has(next)) next += 1;
      g.ranks.push(next);
      taken.set(next, g.name);
    }
  }
}
