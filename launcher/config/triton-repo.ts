// `--model-repo <dir>` (launch_triton_server.py's `--model_repo`) naming a Triton TensorRT-LLM model repository —
// the seeds' triton_model_repo, with tensorrt_llm/config.pbtxt — read into the same checked values as a YAML model
// file: its parameters (gpt_model_path, batch_scheduler_policy, kv_cache_free_gpu_mem_fraction, ...), its
// max_batch_size and its decoupled policy, each checked as the matching flag would be, every problem reported at once
// naming the file and the parameter. The BLS model's tensorrt_llm_model_name and tensorrt_llm_draft_model_name
// (the seeds' draft-target flow) choose the target model and a draft model, whose gpt_model_path becomes the draft
// checkpoint. Parameters with nothing to set here, and values fill_template.py left as ${...} (unset, as Triton's
// backend reads them), come back as notes, never silently dropped.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

import { InvalidArgumentError } from 'commander';

import { showValue, type FileValues } from './parse-config-file.js';
import { messages, parsePbtxt, type PbMessage, scalarOf } from './pbtxt.js';
import { configKey } from './schema.js';

export const TRITON_CONFIG = join('tensorrt_llm', 'config.pbtxt');

type Form = 'text' | 'number' | 'bool' | 'ids' | 'json' | 'path';

// tensorrt_llm/config.pbtxt parameters → the model file's keys, and how the text reads as that key's value.
const PARAMETERS: Readonly<Record<string, { key: string; form: Form }>> = {
  gpt_model_path: { key: 'model', form: 'path' },
  batch_scheduler_policy: { key: 'batching.scheduler_policy', form: 'text' },
  enable_chunked_context: { key: 'batching.enable_chunked_context', form: 'bool' },
  max_num_tokens: { key: 'batching.max_num_tokens', form: 'number' },
  max_tokens_in_paged_kv_cache: { key: 'kv_cache.max_tokens', form: 'number' },
  kv_cache_free_gpu_mem_fraction: { key: 'kv_cache.free_mem_fraction', form: 'number' },
  enable_kv_cache_reuse: { key: 'kv_cache.enable_reuse', form: 'bool' },
  max_attention_window_size: { key: 'kv_cache.max_attention_window_size', form: 'number' },
  event_buffer_max_size: { key: 'kv_cache.event_buffer_max_size', form: 'number' },
  max_beam_width: { key: 'decoding.max_beam_width', form: 'number' },
  medusa_choices: { key: 'decoding.medusa_choices', form: 'json' },
  eagle_choices: { key: 'decoding.eagle_choices', form: 'json' },
  gpu_device_ids: { key: 'gpu_device_ids', form: 'ids' },
  lora_cache_optimal_adapter_size: { key: 'lora.cache_optimal_adapter_size', form: 'number' },
  lora_cache_max_adapter_size: { key: 'lora.cache_max_adapter_size', form: 'number' },
  lora_cache_gpu_memory_fraction: { key: 'lora.cache_gpu_memory_fraction', form: 'number' },
  lora_cache_host_memory_bytes: { key: 'lora.cache_host_memory_bytes', form: 'number' },
  exclude_input_in_output: { key: 'serving.exclude_input_in_output', form: 'bool' },
  participant_ids: { key: 'participant_ids', form: 'ids' },
};

// Parameters of Triton's TensorRT-LLM backend that set nothing here, and why.
const NOT_USED: Readonly<Record<string, string>> = {
  gpt_model_type: 'the executor always batches in flight',
  batching_strategy: 'the executor always batches in flight',
  enable_trt_overlap: 'there is no TensorRT engine to overlap',
  normalize_log_probs: 'output_log_probs are always the sampled tokens\' log probabilities',
  decoding_mode: 'each request\'s sampling parameters choose how it is decoded',
  max_num_sequences: 'max_batch_size bounds the sequences in flight',
  max_queue_delay_microseconds: 'requests join the next iteration as they arrive',
  iter_stats_max_iterations: 'iteration stats feed the metrics port',
  request_stats_max_iterations: 'iteration stats feed the metrics port',
  cancellation_check_period_ms: 'cancellations are applied at the next iteration',
  stats_check_period_ms: 'the metrics port reads the stats as they come',
  executor_worker_path: 'the ranks are trtllm-launch processes under mpirun / srun',
  encoder_model_path: 'encoder-decoder models are not served',
  engine_dir: 'the checkpoint comes from gpt_model_path',
  tokenizer_dir: 'the tokenizer is the checkpoint\'s own tokenizer.json (gpt_model_path)',
  tokenizer_type: 'the tokenizer is the checkpoint\'s own tokenizer.json (gpt_model_path)',
};

const BLS_CONFIG = join('tensorrt_llm_bls', 'config.pbtxt');

/** Whether `dir` is a Triton model repository with a tensorrt_llm model (or a BLS model naming its target). */
export function isTritonRepo(dir: string): boolean {
  return existsSync(join(dir, TRITON_CONFIG)) || existsSync(join(dir, BLS_CONFIG));
}
const isPlaceholder = (v: unknown) => typeof v === 'string' && /^\$\{.*\}$/.test(v.trim());

/** The filled-in parameters of one of the repository's model configs (none when it has no such config), trimmed. */
function filledParameters(dir: string, config: string): ReadonlyMap<string, string> {
  const path = resolve(dir, config);
  if (!existsSync(path)) return new Map();
  return new Map(parameters(parsePbtxt(readText(path), path))
    .filter(([, text]) => !isPlaceholder(text) && text.trim() !== '').map(([key, text]) => [key, text.trim()]));
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new InvalidArgumentError(`${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
}

/** `parameters { key: "k" value { string_value: "v" } }` of one config, in file order. */
function parameters(config: PbMessage): [string, string][] {
  return messages(config, 'parameters').flatMap((p) => {
    const key = scalarOf(p, 'key');
    const value = messages(p, 'value')[0];
    const text = value ? scalarOf(value, 'string_value') : undefined;
    return typeof key === 'string' && text !== undefined ? [[key, String(text)] as [string, string]] : [];
  });
}

function valueOf(text: string, form: Form, base: string): unknown {
  const t = text.trim();
  switch (form) {
    case 'text': return t;
    case 'path': return resolve(base, t);
    case 'number': return t !== '' && Number.isFinite(Number(t)) ? Number(t) : text;
    case 'bool': return /^(true|1)$/i.test(t) ? true : /^(false|0)$/i.test(t) ? false : text;
    case 'ids': return /^\d+(\s*,\s*\d+)*$/.test(t) ? t.split(',').map((s) => Number(s.trim())) : text;
    case 'json':
      try {
        return JSON.parse(t) as unknown;
      } catch {
        return text;
      }
  }
}

// A TensorRT-LLM engine directory: engines cannot run here; the checkpoint they were built from can.
function engineFiles(dir: string): string[] {
  try {
    return readdirSync(dir).filter((f) => f.endsWith('.engine'));
  } catch {
    return [];
  }
}

/** The repository's tensorrt_llm configuration as a model file's values, with notes for what sets nothing. */
export function readTritonRepo(dir: string): FileValues {
  // The target: tensorrt_llm, or the model the BLS names (a repository may call it otherwise).
  const bls = filledParameters(dir, BLS_CONFIG);
  const named = bls.get('tensorrt_llm_model_name');
  const target = named ?? 'tensorrt_llm';
  const shown = join(target, 'config.pbtxt');
  const path = resolve(dir, shown);
  if (!existsSync(path)) {
    throw new InvalidArgumentError(named !== undefined
      ? `parameter tensorrt_llm_model_name in ${resolve(dir, BLS_CONFIG)} names "${target}", but ${path} does not exist`
      : `${dir} has ${BLS_CONFIG} but no ${shown}: add the tensorrt_llm model, or name it with the BLS's tensorrt_llm_model_name`);
  }
  const config = parsePbtxt(readText(path), path);
  const values = new Map<string, unknown>();
  const errors: string[] = [];
  const notes: string[] = [];
  const take = (what: string, key: string, value: unknown) => {
    const checked = configKey(key)!.check(value);
    if (!checked.ok) errors.push(`${what} in ${path} ${checked.rule}, got ${showValue(value)}`);
    else values.set(key, checked.value);
  };
  const unfilled: string[] = [];
  const maxBatch = scalarOf(config, 'max_batch_size');
  if (isPlaceholder(maxBatch)) unfilled.push('max_batch_size');
  else if (maxBatch !== undefined && maxBatch !== 0) take('max_batch_size', 'batching.max_batch_size', maxBatch);
  const policy = messages(config, 'model_transaction_policy')[0];
  const decoupled = policy ? scalarOf(policy, 'decoupled') : undefined;
  if (isPlaceholder(decoupled)) unfilled.push('decoupled');
  else if (decoupled !== undefined) take('model_transaction_policy.decoupled', 'serving.decoupled', decoupled);
  for (const [name, text] of parameters(config)) {
    if (isPlaceholder(text)) {
      unfilled.push(name);
      continue;
    }
    const known = PARAMETERS[name];
    if (known) take(`parameter ${name}`, known.key, valueOf(text, known.form, dirname(path)));
    else notes.push(`${shown} parameter ${name} = ${showValue(text)} sets nothing here: ${NOT_USED[name] ?? 'trtllm-launch has no such setting'}`);
  }
  if (unfilled.length > 0) notes.push(`${shown}: ${unfilled.join(', ')} left as \${...} (unset, as Triton reads them)`);
  const model = values.get('model') as string | undefined;
  if (model === undefined) {
    errors.push(`parameter gpt_model_path in ${path} must name the model's Hugging Face checkpoint directory${unfilled.includes('gpt_model_path') ? ' (it was left as ${...}: fill it in)' : ' (it is not set)'}`);
  } else if (!statSync(model, { throwIfNoEntry: false })?.isDirectory()) {
    errors.push(`parameter gpt_model_path in ${path} must be an existing checkpoint directory, got "${model}" (no such directory)`);
  } else if (engineFiles(model).length > 0 && !existsSync(join(model, 'model.safetensors')) && !existsSync(join(model, 'model.safetensors.index.json'))) {
    errors.push(`parameter gpt_model_path in ${path} holds TensorRT engines (${engineFiles(model).slice(0, 2).join(', ')}), which do not run here: point it at the Hugging Face checkpoint (config.json, *.safetensors, tokenizer.json) the engines were built from`);
  }
  // The seeds' draft-target flow: the BLS names a draft model of the repository; its checkpoint drafts (--draft-model).
  const draft = bls.get('tensorrt_llm_draft_model_name');
  if (draft !== undefined) {
    const where = `parameter tensorrt_llm_draft_model_name in ${resolve(dir, BLS_CONFIG)}`;
    const draftConfig = resolve(dir, draft, 'config.pbtxt');
    const draftPath = filledParameters(dir, join(draft, 'config.pbtxt')).get('gpt_model_path');
    if (!existsSync(draftConfig)) errors.push(`${where} names "${draft}", but ${draftConfig} does not exist`);
    else if (draftPath === undefined) errors.push(`parameter gpt_model_path in ${draftConfig} (the draft model) must name its Hugging Face checkpoint directory`);
    else {
      const checkpoint = resolve(dirname(draftConfig), draftPath);
      if (!statSync(checkpoint, { throwIfNoEntry: false })?.isDirectory()) {
        errors.push(`parameter gpt_model_path in ${draftConfig} (the draft model) must be an existing checkpoint directory, got "${checkpoint}" (no such directory)`);
      } else {
        take(where, 'decoding.draft_model', checkpoint);
      }
    }
  }
  if (model !== undefined && errors.length === 0 && !existsSync(join(model, 'tokenizer.json'))) {
    const elsewhere = tokenizerDirs(dir).find((d) => existsSync(join(d, 'tokenizer.json')));
    if (elsewhere) {
      errors.push(`parameter gpt_model_path in ${path}: ${model} has no tokenizer.json, which the server reads from the checkpoint itself; the repository's tokenizer_dir ${elsewhere} has one: copy it into ${model}`);
    }
  }
  if (errors.length > 0) throw new InvalidArgumentError(errors.join('\n'));
  return { path, values, notes };
}

/** The tokenizer_dir of the repository's preprocessing and postprocessing models (relative to their config files). */
function tokenizerDirs(dir: string): string[] {
  return ['preprocessing', 'postprocessing'].flatMap((name) => {
    const found = filledParameters(dir, join(name, 'config.pbtxt')).get('tokenizer_dir');
    return found !== undefined ? [resolve(dir, name, found)] : [];
  });
}
