// What `trtllm-launch client` was asked to do, after commander parsed the flags; and the checks commander
// cannot make alone (flags that exclude or need each other), each naming the flags and values involved.
import type { ClientGuide, GuideFlags } from './client-guide.js';
import { ToolError } from './tool-error.js';

export type ModelKind = 'tokens' | 'text';

export interface ClientOptions extends GuideFlags {
  url?: string | undefined;         // default: localhost:8000 for http, localhost:8001 for grpc
  protocol: string;
  modelName: string;
  text: string;
  inputTokens?: number[];
  batchInputs?: string | boolean;
  tokenizerDir?: string;
  requestOutputLen: number;
  streaming: boolean;
  stopAfterMs?: number;
  requestId?: string;
  returnLogProbs: boolean;
  returnContextLogits: boolean;
  returnGenerationLogits: boolean;
  excludeInputInOutput: boolean;
  topK?: number;
  topP?: number;
  temperature?: number;
  repetitionPenalty?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  lengthPenalty?: number;
  minLength?: number;
  randomSeed?: number;
  beamWidth?: number;
  endId?: number;
  padId?: number;
  guide?: ClientGuide | undefined;   // what --json / --json-schema / --regex / --grammar resolve to (runClient sets it)
}

const TEXT_MODELS = new Set(['ensemble', 'tensorrt_llm_bls']);

/** The interface a model name speaks; anything else is not a generation model. */
export function modelKind(name: string): ModelKind {
  if (name === 'tensorrt_llm') return 'tokens';
  if (TEXT_MODELS.has(name)) return 'text';
  throw new ToolError(`--model-name must be tensorrt_llm (token ids), ensemble or tensorrt_llm_bls (text), got "${name}"`);
}

/** -i/--protocol: KServe v2 over HTTP (port 8000) or gRPC (port 8001), as Triton's clients take it. */
export function checkProtocol(protocol: string): void {
  if (protocol === 'http' || protocol === 'grpc') return;
  throw new ToolError(`-i/--protocol must be http or grpc, got "${protocol}"`);
}

/** Triton's ports: HTTP on 8000, gRPC on 8001. */
export function defaultUrl(protocol: string): string {
  return protocol === 'grpc' ? 'localhost:8001' : 'localhost:8000';
}

/** --input-tokens: "1,2,3" or "[1, 2, 3]". */
export function parseTokenList(value: string): number[] {
  const trimmed = value.trim();
  const parts = trimmed.startsWith('[') ? (() => {
    try { return JSON.parse(trimmed) as unknown[]; } catch { return [NaN]; }
  })() : trimmed.split(/[\s,]+/).filter((x) => x !== '').map(Number);
  if (!Array.isArray(parts) || parts.length === 0 || parts.some((x) => !Number.isSafeInteger(x) || (x as number) < 0)) {
    throw new ToolError(`--input-tokens must be a list of non-negative token ids ("1,2,3" or "[1, 2, 3]"), got "${value}"`);
  }
  return parts as number[];
}

/** The prompts: one, or with --batch-inputs a JSON list (its own value, or --text's). */
export function prompts(o: Pick<ClientOptions, 'text' | 'batchInputs'>): string[] {
  if (o.batchInputs === undefined || o.batchInputs === false) return [o.text];
  const source = typeof o.batchInputs === 'string' ? o.batchInputs : o.text;
  const flag = typeof o.batchInputs === 'string' ? '--batch-inputs' : '--text (with --batch-inputs)';
  let list: unknown;
  try {
    list = JSON.parse(source);
  } catch {
    list = undefined;
  }
  if (!Array.isArray(list) || list.length === 0 || list.some((p) => typeof p !== 'string' || p === '')) {
    throw new ToolError(`${flag} must be a JSON list of non-empty prompts, e.g. '["This is a test","The cat is"]', got ${JSON.stringify(source)}`);
  }
  return list as string[];
}

export function checkCombination(o: ClientOptions, kind: ModelKind): void {
  if (o.inputTokens && o.batchInputs) throw new ToolError('--input-tokens is one prompt; it cannot be combined with --batch-inputs');
  if (o.inputTokens && kind === 'text') {
    throw new ToolError(`--input-tokens needs --model-name tensorrt_llm (token ids); ${o.modelName} takes --text`);
  }
}
