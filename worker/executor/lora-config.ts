// The LoRA options as the executor's native config (pure): LoRA on when asked for or implied by preloaded adapters,
// the preloaded ones with their task ids (1, 2, ... in the order given) and absolute directories, and the cache
// sizes the engine has defaults for (sent only when set).
import type { NativeLoraConfig } from '../binding/addon-types.js';
import { type LoraSettings, loraEnabled, servedAdapters } from '../options/lora-options.js';

/** The LoRA options an executor is loaded with, as the option table names them (flat, one per option). */
export type LoraOptions = Omit<LoraSettings, 'model' | 'servedModelName'>;

const LORA_KEYS = [
  'loraModules', 'enableLora', 'maxLoras', 'loraCacheOptimalAdapterSize', 'loraCacheMaxAdapterSize',
  'loraCacheGpuMemoryFraction', 'loraCacheHostMemoryBytes',
] as const satisfies readonly (keyof LoraOptions)[];

// Every LoRA option is folded in (one left out would be dropped silently on its way to the engine).
const everyKey: [Exclude<keyof LoraOptions, (typeof LORA_KEYS)[number]>] extends [never] ? true : never = true;
void everyKey;

/** The native config, undefined when LoRA is off. */
export function nativeLoraConfig(o: LoraOptions): NativeLoraConfig | undefined {
  if (!loraEnabled(o)) return undefined;
  const config: NativeLoraConfig = { enabled: true, preloaded: servedAdapters(o.loraModules).map(({ taskId, dir }) => ({ taskId, dir })) };
  if (o.maxLoras !== undefined) config.maxLoras = o.maxLoras;
  if (o.loraCacheMaxAdapterSize !== undefined) config.maxAdapterSize = o.loraCacheMaxAdapterSize;
  if (o.loraCacheOptimalAdapterSize !== undefined) config.optimalAdapterSize = o.loraCacheOptimalAdapterSize;
  if (o.loraCacheGpuMemoryFraction !== undefined) config.gpuMemoryFraction = o.loraCacheGpuMemoryFraction;
  if (o.loraCacheHostMemoryBytes !== undefined) config.hostMemoryBytes = o.loraCacheHostMemoryBytes;
  return config;
}

/** The options without their LoRA ones, and those as the native config. */
export function takeLoraOptions<T extends LoraOptions>(options: T): { lora: NativeLoraConfig | undefined; rest: Omit<T, keyof LoraOptions> } {
  const rest: Record<string, unknown> = { ...options };
  for (const key of LORA_KEYS) delete rest[key];
  return { lora: nativeLoraConfig(options), rest: rest as Omit<T, keyof LoraOptions> };
}
