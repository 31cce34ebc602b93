// Pure validation of a generation request against the served model's limits, before native code sees it.
// Every rejection names the field, the value received and the allowed range.
import type { NativeRequest, OutputParams, SamplingParams } from '../binding/addon-types.js';
import { describeValue, TrtllmError } from '../common/errors.js';
import { MAX_DRAFT_TOKENS } from '../frontend/draft-tokens.js';
import { INT32_MAX } from '../options/value-kinds.js';

export interface RequestLimits {
  vocabSize: number;
  maxSeqLen: number;        // prompt + output tokens
  maxNumTokens: number;     // tokens one iteration can hold (the prompt must fit unless chunked context is on)
  maxBeamWidth: number;
  chunkedContext: boolean;
  maxLogitsElements?: number; // context/generation logits values one request may ask for; 0 or absent: no cap
  hiddenSize?: number;        // the width of a promptTuning table's rows; absent: not checked here (the engine does)
}

const REQUEST_KEYS = new Set([
  'inputTokenIds', 'maxTokens', 'streaming', 'endId', 'padId', 'stopWords', 'badWords', 'clientId', 'sampling',
  'output', 'embeddingBias', 'numReturnSequences', 'maxAttentionWindow', 'numDraftTokens', 'guidedDecoding', 'lora',
  'promptTuning',
]);
const LORA_KEYS = new Set(['taskId', 'weights', 'weightsShape', 'config', 'configShape']);
const GUIDE_TYPES = new Set(['json', 'json_schema', 'regex', 'ebnf_grammar']);
const SAMPLING_KEYS = new Set<keyof SamplingParams>([
  'beamWidth', 'temperature', 'topK', 'topP', 'seed', 'repetitionPenalty', 'presencePenalty', 'frequencyPenalty',
  'minTokens', 'lengthPenalty', 'earlyStopping', 'beamSearchDiversityRate',
]);
const OUTPUT_KEYS = new Set<keyof OutputParams>([
  'returnLogProbs', 'returnContextLogits', 'returnGenerationLogits', 'excludeInputFromOutput',
]);

function fail(message: string): never {
  throw new TrtllmError(message, 'invalid_argument');
}

function checkKeys(object: object, allowed: Set<string>, where: string): void {
  for (const key of Object.keys(object)) {
    if (!allowed.has(key)) {
      fail(`unknown parameter '${where}${key}'; known: ${[...allowed].map((k) => where + k).join(', ')}`);
    }
  }
}

function isInt(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value);
}

function intIn(value: unknown, field: string, min: number, max: number, rangeText: string): number {
  if (!isInt(value) || value < min || value > max) fail(`${field} must be an integer ${rangeText}, got ${describeValue(value)}`);
  return value;
}

function finiteNumber(value: unknown, field: string, ok: (n: number) => boolean, rangeText: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || !ok(value)) {
    fail(`${field} must be a finite number ${rangeText}, got ${describeValue(value)}`);
  }
  return value;
}

function optionalBool(object: Record<string, unknown>, key: string, where: string): void {
  if (object[key] !== undefined && typeof object[key] !== 'boolean') {
    fail(`${where}${key} must be a boolean, got ${describeValue(object[key])}`);
  }
}

function tokenList(value: unknown, field: string, vocabSize: number, limitText = 'vocab_size'): number[] {
  if (!Array.isArray(value)) fail(`${field} must be an array of token ids, got ${describeValue(value)}`);
  value.forEach((id, i) => intIn(id, `${field}[${i}]`, 0, vocabSize - 1, `in [0, ${vocabSize}) (${limitText})`));
  return value as number[];
}

function wordLists(value: unknown, field: string, vocabSize: number): void {
  if (value === undefined) return;
  if (!Array.isArray(value)) fail(`${field} must be an array of token-id arrays, got ${describeValue(value)}`);
  value.forEach((word, i) => {
    const ids = tokenList(word, `${field}[${i}]`, vocabSize);
    if (ids.length === 0) fail(`${field}[${i}] is empty; every stop/bad word needs at least one token`);
  });
}

function embeddingBias(value: unknown, vocabSize: number): void {
  if (value === undefined) return;
  if (!Array.isArray(value) && !(value instanceof Float32Array)) {
    fail(`embeddingBias must be an array of numbers or a Float32Array, got ${describeValue(value)}`);
  }
  if (value.length === 0) return;
  if (value.length !== vocabSize) {
    fail(`embeddingBias has ${value.length} values but must have vocab_size ${vocabSize} (or none)`);
  }
  for (let i = 0; i < value.length; i += 1) {
    const v: unknown = value[i];
    if (typeof v !== 'number' || !Number.isFinite(v)) fail(`embeddingBias[${i}] must be a finite number, got ${describeValue(v)}`);
  }
}

// Logits outputs are held in memory until the response: the same cap as the native max_logits_elements.
function logitsCap(r: Record<string, unknown>, promptLen: number, maxTokens: number, beams: number, limits: RequestLimits): void {
  const cap = limits.maxLogitsElements ?? 0;
  if (cap <= 0 || typeof r.output !== 'object' || r.output === null) return;
  const o = r.output as OutputParams;
  if (o.returnContextLogits === true && promptLen * limits.vocabSize > cap) {
    fail(`output.returnContextLogits: prompt length ${promptLen} x vocab_size ${limits.vocabSize} = ${promptLen * limits.vocabSize} values exceeds max_logits_elements ${cap}`);
  }
  const gen = beams * maxTokens * limits.vocabSize;
  if (o.returnGenerationLogits === true && gen > cap) {
    fail(`output.returnGenerationLogits: beam_width ${beams} x maxTokens ${maxTokens} x vocab_size ${limits.vocabSize} = ${gen} values exceeds max_logits_elements ${cap}`);
  }
}

function validateSampling(sampling: unknown, limits: RequestLimits, maxTokens: number): void {
  if (sampling === undefined) return;
  if (typeof sampling !== 'object' || sampling === null || Array.isArray(sampling)) {
    fail(`sampling must be an object, got ${describeValue(sampling)}`);
  }
  checkKeys(sampling, SAMPLING_KEYS as Set<string>, 'sampling.');
  const s = sampling as Record<string, unknown>;
  if (s.beamWidth !== undefined) {
    intIn(s.beamWidth, 'sampling.beamWidth', 1, limits.maxBeamWidth, `in [1, ${limits.maxBeamWidth}] (max_beam_width)`);
  }
  if (s.temperature !== undefined) finiteNumber(s.temperature, 'sampling.temperature', (n) => n >= 0, '>= 0');
  if (s.topK !== undefined) intIn(s.topK, 'sampling.topK', 0, Number.MAX_SAFE_INTEGER, '>= 0');
  if (s.topP !== undefined) finiteNumber(s.topP, 'sampling.topP', (n) => n > 0 && n <= 1, 'in (0, 1]');
  if (s.seed !== undefined) intIn(s.seed, 'sampling.seed', 0, Number.MAX_SAFE_INTEGER, '>= 0');
  if (s.repetitionPenalty !== undefined) {
    finiteNumber(s.repetitionPenalty, 'sampling.repetitionPenalty', (n) => n > 0, '> 0');
  }
  if (s.presencePenalty !== undefined) finiteNumber(s.presencePenalty, 'sampling.presencePenalty', () => true, '');
  if (s.frequencyPenalty !== undefined) finiteNumber(s.frequencyPenalty, 'sampling.frequencyPenalty', () => true, '');
  if (s.minTokens !== undefined) intIn(s.minTokens, 'sampling.minTokens', 0, maxTokens, `in [0, maxTokens ${maxTokens}]`);
  if (s.lengthPenalty !== undefined) finiteNumber(s.lengthPenalty, 'sampling.lengthPenalty', () => true, '');
  if (s.earlyStopping !== undefined) intIn(s.earlyStopping, 'sampling.earlyStopping', -1, 1, 'in [-1, 1]');
  if (s.beamSearchDiversityRate !== undefined) {
    finiteNumber(s.beamSearchDiversityRate, 'sampling.beamSearchDiversityRate', (n) => n >= 0, '>= 0');
  }
}

function validateOutput(output: unknown): void {
  if (output === undefined) return;
  if (typeof output !== 'object' || output === null || Array.isArray(output)) {
    fail(`output must be an object, got ${describeValue(output)}`);
  }
  checkKeys(output, OUTPUT_KEYS as Set<string>, 'output.');
  for (const key of OUTPUT_KEYS) optionalBool(output as Record<string, unknown>, key, 'output.');
}

// The guide itself is checked where it is compiled (the engine names the construct and where it is); here its shape.
function guidedDecoding(value: unknown, beams: number): void {
  if (value === undefined) return;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(`guidedDecoding must be an object, got ${describeValue(value)}`);
  checkKeys(value, new Set(['guideType', 'guide']), 'guidedDecoding.');
  const { guideType, guide } = value as { guideType?: unknown; guide?: unknown };
  if (typeof guideType !== 'string' || !GUIDE_TYPES.has(guideType)) {
    fail(`guidedDecoding.guideType must be one of ${[...GUIDE_TYPES].join(', ')}, got ${describeValue(guideType)}`);
  }
  if (guide !== undefined && typeof guide !== 'string') fail(`guidedDecoding.guide must be a string, got ${describeValue(guide)}`);
  if (guideType !== 'json' && (guide === undefined || guide === '')) fail(`guidedDecoding.guide is required for guideType ${guideType}`);
  if (beams > 1) fail(`guidedDecoding cannot be combined with beam search (sampling.beamWidth ${beams}); use beamWidth 1`);
}

/** A [rows, cols] shape that holds `length` values; cols, when given, is fixed (lora_config's 3). */
function matrixShape(shape: unknown, field: string, length: number, cols?: number): void {
  const ok = Array.isArray(shape) && shape.length === 2 && shape.every((d) => Number.isSafeInteger(d) && (d as number) > 0);
  if (!ok) fail(`${field} must be [rows, cols] of integers >= 1, got ${describeValue(shape)}`);
  const [r, c] = shape as [number, number];
  if (cols !== undefined && c !== cols) fail(`${field} must be [rows, ${cols}], got [${r}, ${c}]`);
  if (r * c !== length) fail(`${field} [${r}, ${c}] holds ${r * c} values, the array ${length}`);
}

// The adapter's contents are the engine's to check against the model (lora-tensors.h names the row and the module);
// here the request's shape: a task id, and weights with config both or neither, each with its shape.
function loraRequest(value: unknown): void {
  if (value === undefined) return;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(`lora must be an object, got ${describeValue(value)}`);
  checkKeys(value, LORA_KEYS, 'lora.');
  const l = value as Record<string, unknown>;
  intIn(l.taskId, 'lora.taskId', 0, Number.MAX_SAFE_INTEGER, '>= 0');
  if ((l.weights === undefined) !== (l.config === undefined)) {
    fail(`lora.weights and lora.config go together (an adapter sent with the request); got only lora.${l.weights === undefined ? 'config' : 'weights'}`);
  }
  if (l.weights === undefined) {
    if (l.weightsShape !== undefined || l.configShape !== undefined) fail('lora.weightsShape and lora.configShape need lora.weights and lora.config');
    return;
  }
  if (!(l.weights instanceof Float32Array)) fail(`lora.weights must be a Float32Array, got ${describeValue(l.weights)}`);
  if (!(l.config instanceof Int32Array)) fail(`lora.config must be an Int32Array, got ${describeValue(l.config)}`);
  matrixShape(l.weightsShape, 'lora.weightsShape', l.weights.length);
  matrixShape(l.configShape, 'lora.configShape', l.config.length, 3);
}

// P-tuning: a [rows, hidden] Float32Array (its values' finiteness is the engine's check, which names the row);
// returns the rows, which widen the ids a prompt may hold (virtual tokens vocabSize + i).
function promptTuning(value: unknown, limits: RequestLimits): number {
  if (value === undefined) return 0;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(`promptTuning must be an object, got ${describeValue(value)}`);
  checkKeys(value, new Set(['embeddingTable', 'shape']), 'promptTuning.');
  const p = value as Record<string, unknown>;
  if (!(p.embeddingTable instanceof Float32Array)) fail(`promptTuning.embeddingTable must be a Float32Array, got ${describeValue(p.embeddingTable)}`);
  matrixShape(p.shape, 'promptTuning.shape', p.embeddingTable.length);
  const [rows, hidden] = p.shape as [number, number];
  if (limits.hiddenSize !== undefined && hidden !== limits.hiddenSize) {
    fail(`promptTuning.shape [${rows}, ${hidden}]: rows must have the model's hidden_size ${limits.hiddenSize}`);
  }
  return rows;
}

/** Throws TrtllmError('invalid_argument') on the first problem; returns the request typed. */
export function validateRequest(request: unknown, limits: RequestLimits): NativeRequest {
  if (typeof request !== 'object' || request === null || Array.isArray(request)) {
    fail(`a request must be an object, got ${describeValue(request)}`);
  }
  checkKeys(request, REQUEST_KEYS, '');
  const r = request as Record<string, unknown>;
  const virtualRows = promptTuning(r.promptTuning, limits);
  const ids = virtualRows === 0 ? tokenList(r.inputTokenIds, 'inputTokenIds', limits.vocabSize)
    : tokenList(r.inputTokenIds, 'inputTokenIds', limits.vocabSize + virtualRows, `vocab_size ${limits.vocabSize} + prompt_vocab_size ${virtualRows}`);
  if (ids.length === 0) fail('inputTokenIds is empty; a prompt needs at least one token');
  const maxTokens = intIn(r.maxTokens, 'maxTokens', 1, limits.maxSeqLen, `in [1, ${limits.maxSeqLen}] (max_seq_len)`);
  if (ids.length + maxTokens > limits.maxSeqLen) {
    fail(`prompt length ${ids.length} + maxTokens ${maxTokens} = ${ids.length + maxTokens} exceeds max_seq_len ${limits.maxSeqLen}`);
  }
  if (!limits.chunkedContext && ids.length > limits.maxNumTokens) {
    fail(`prompt length ${ids.length} exceeds max_num_tokens ${limits.maxNumTokens} (enable chunked context to serve longer prompts)`);
  }
  optionalBool(r, 'streaming', '');
  for (const key of ['endId', 'padId'] as const) {
    if (r[key] !== undefined) intIn(r[key], key, -1, limits.vocabSize - 1, `in [-1, ${limits.vocabSize}) (-1: none)`);
  }
  if (r.clientId !== undefined) intIn(r.clientId, 'clientId', 0, Number.MAX_SAFE_INTEGER, '>= 0');
  wordLists(r.stopWords, 'stopWords', limits.vocabSize);
  wordLists(r.badWords, 'badWords', limits.vocabSize);
  validateSampling(r.sampling, limits, maxTokens);
  const beams = (r.sampling as SamplingParams | undefined)?.beamWidth ?? 1;
  if (r.numReturnSequences !== undefined) {
    intIn(r.numReturnSequences, 'numReturnSequences', 0, beams, `in [0, beamWidth ${beams}] (0: beamWidth)`);
  }
  if (r.maxAttentionWindow !== undefined) {
    intIn(r.maxAttentionWindow, 'maxAttentionWindow', 0, INT32_MAX, `in [0, ${INT32_MAX}] (0: the executor's)`);
  }
  if (r.numDraftTokens !== undefined) {
    intIn(r.numDraftTokens, 'numDraftTokens', 0, MAX_DRAFT_TOKENS, `in [0, ${MAX_DRAFT_TOKENS}] (0: no speculation)`);
  }
  embeddingBias(r.embeddingBias, limits.vocabSize);
  guidedDecoding(r.guidedDecoding, beams);
  loraRequest(r.lora);
  logitsCap(r, ids.length, maxTokens, beams, limits);
  validateOutput(r.output);
  return r as unknown as NativeRequest;
}
