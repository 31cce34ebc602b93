// The configuration file's keys: where each lands among the serve options, how it is checked, and — for keys
// accepted for compatibility with GPU deployments but without effect here — why it is ignored, so that
// `config print` and the serve banner can say so instead of dropping it silently.
import type { ServeCliOptions } from '../serve-options.js';
import {
  boolCheck, type Check, choiceCheck, deviceIdsCheck, fractionCheck, intCheck, participantIdsCheck, portCheck, textCheck,
} from './checks.js';

export interface ConfigKey {
  key: string;                        // dotted path in the file: 'batching.max_batch_size'
  option?: keyof ServeCliOptions;     // the serve option it sets; absent: accepted and ignored
  check: Check;
  ignored?: string;                   // why the value has no effect on this build
  unset?: string;                     // what applies when nothing sets it (the executor's default)
}

export const CONFIG_KEYS: readonly ConfigKey[] = [
  { key: 'model', option: 'model', check: textCheck },
  { key: 'name', option: 'servedModelName', check: textCheck, unset: 'the checkpoint directory\'s name' },
  { key: 'parallel.tp', option: 'tp', check: intCheck(1), unset: 'world size / pp' },
  { key: 'parallel.pp', option: 'pp', check: intCheck(1), unset: 'world size / tp, else 1' },
  { key: 'gpu_device_ids', check: deviceIdsCheck, ignored: 'ignored on the CPU backend (ranks run on CPU cores)' },
  { key: 'participant_ids', check: participantIdsCheck, ignored: 'used only by --multi-model --no-spawn (the job ranks of this model)' },
  { key: 'batching.max_batch_size', option: 'maxBatchSize', check: intCheck(1), unset: '64' },
  { key: 'batching.max_num_tokens', option: 'maxNumTokens', check: intCheck(1), unset: '8192' },
  { key: 'batching.scheduler_policy', option: 'schedulerPolicy', check: choiceCheck(['max_utilization', 'guaranteed_no_evict']), unset: 'guaranteed_no_evict' },
  { key: 'batching.enable_chunked_context', option: 'enableChunkedContext', check: boolCheck, unset: 'false' },
  { key: 'kv_cache.tokens_per_block', option: 'tokensPerBlock', check: intCheck(1), unset: '64' },
  { key: 'kv_cache.max_tokens', option: 'maxTokensInPagedKvCache', check: intCheck(1), unset: 'room for max_batch_size x max_seq_len' },
  { key: 'kv_cache.free_mem_fraction', check: fractionCheck, ignored: 'ignored on the CPU backend (KV capacity comes from kv_cache.max_tokens)' },
  { key: 'kv_cache.enable_reuse', option: 'enableKvCacheReuse', check: boolCheck, unset: 'false' },
  { key: 'decoding.max_beam_width', option: 'maxBeamWidth', check: intCheck(1), unset: '1' },
  { key: 'serving.max_queue_size', option: 'maxQueueSize', check: intCheck(0), unset: '0 = unbounded' },
  { key: 'serving.exclude_input_in_output', check: boolCheck, ignored: 'ignored: not applied server-wide yet; requests set exclude_input_in_output themselves' },
  { key: 'serving.decoupled', check: boolCheck, ignored: 'ignored: ensemble and tensorrt_llm always allow streaming (decoupled) responses' },
  { key: 'serving.http_port', option: 'httpPort', check: portCheck },
  { key: 'serving.grpc_port', option: 'grpcPort', check: portCheck },
  { key: 'serving.metrics_port', option: 'metricsPort', check: portCheck },
  { key: 'serving.host', option: 'host', check: textCheck },
];

const BY_KEY = new Map(CONFIG_KEYS.map((k) => [k.key, k]));

export function configKey(key: string): ConfigKey | undefined {
  return BY_KEY.get(key);
}

/** The mappings of the file ('batching', ...) and the names allowed at its top level. */
export const SECTIONS: readonly string[] = [...new Set(CONFIG_KEYS.filter((k) => k.key.includes('.')).map((k) => k.key.split('.')[0]!))];
export const TOP_LEVEL_NAMES: readonly string[] = [...CONFIG_KEYS.filter((k) => !k.key.includes('.')).map((k) => k.key), ...SECTIONS];

export function sectionKeys(section: string): string[] {
  return CONFIG_KEYS.filter((k) => k.key.startsWith(`${section}.`)).map((k) => k.key.slice(section.length + 1));
}
