// Named inputs, whichever way they arrived: the fields of a generate body or the tensors of a KServe v2 infer
// body. Both become {shape, data (flat)}, and the typed accessors below read them back with errors that name the
// input and the value received — one set of checks for both endpoints.
import { describeValue } from '../common/errors.js';
import { quoteName } from '../common/quote-value.js';
import { badRequest } from './http-errors.js';

export interface NamedValue {
  shape: number[];
  data: unknown[] | Float32Array;   // flattened, row-major (raw FP16 / BF16 / FP32 tensors come typed: tensor-codec.ts)
  datatype?: string;                // a KServe tensor's; absent for a generate-body field (JSON numbers)
}
export type NamedValues = Map<string, NamedValue>;

/** A generate-body field: a scalar is shape [1]; nested arrays give their shape (ragged ones are rejected). */
export function fromJsonField(name: string, value: unknown): NamedValue {
  if (!Array.isArray(value)) return { shape: [1], data: [value] };
  const shape: number[] = [];
  let level: unknown = value;
  while (Array.isArray(level)) {
    shape.push(level.length);
    level = level[0];
  }
  const data = (value as unknown[]).flat(shape.length - 1 as 1) as unknown[];
  const expected = shape.reduce((a, b) => a * b, 1);
  if (data.length !== expected || data.some((x) => Array.isArray(x))) {
    throw badRequest(`${name} must be a rectangular array (shape [${shape.join(', ')}]); got a ragged one`, name);
  }
  return { shape, data };
}

export const DATATYPES: ReadonlySet<string> = new Set([
  'BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16', 'BF16', 'FP32', 'FP64', 'BYTES',
]);

/** One entry of a KServe v2 JSON `inputs` array: the object's form here, the tensor itself in checkTensor. */
export function fromKserveTensor(tensor: unknown, index: number): [string, NamedValue] {
  const where = `inputs[${index}]`;
  if (typeof tensor !== 'object' || tensor === null || Array.isArray(tensor)) {
    throw badRequest(`${where} must be an object with name, datatype, shape and data, got ${describeValue(tensor)}`);
  }
  const t = tensor as Record<string, unknown>;
  if (typeof t.name !== 'string' || t.name === '') throw badRequest(`${where}.name must be a non-empty string, got ${describeValue(t.name)}`);
  const name = t.name;
  if (!Array.isArray(t.data)) {
    checkTensorHeader(name, t.datatype, t.shape);
    throw badRequest(`input ${quoteName(name)}: data must be an array, got ${describeValue(t.data)}`, name);
  }
  return [name, checkTensor(name, t.datatype, t.shape, (t.data as unknown[]).flat(Infinity as 1) as unknown[])];
}

function checkTensorHeader(name: string, datatype: unknown, shape: unknown): asserts shape is number[] {
  if (typeof datatype !== 'string' || !DATATYPES.has(datatype)) {
    throw badRequest(`input ${quoteName(name)}: datatype must be one of ${[...DATATYPES].join(', ')}, got ${describeValue(datatype)}`, name);
  }
  if (!Array.isArray(shape) || shape.some((d) => !Number.isSafeInteger(d) || (d as number) < 0)) {
    throw badRequest(`input ${quoteName(name)}: shape must be an array of non-negative integers, got ${describeValue(shape)}`, name);
  }
}

/**
 * A decoded input tensor, whatever the wire (JSON, gRPC typed contents, gRPC raw bytes): the datatype is a KServe
 * one, the shape holds as many elements as the flat data, and every element is a value of the datatype.
 */
export function checkTensor(name: string, datatype: unknown, shape: unknown, data: unknown[] | Float32Array): NamedValue {
  checkTensorHeader(name, datatype, shape);
  const expected = shape.reduce((a, b) => a * b, 1);
  if (data.length !== expected) {
    throw badRequest(`input ${quoteName(name)}: shape [${shape.join(', ')}] needs ${expected} elements, data has ${data.length}`, name);
  }
  const dt = datatype as string;
  if (data instanceof Float32Array) {  // (raw floats: only the finiteness to check, in a typed loop)
    if (!dt.startsWith('FP') && dt !== 'BF16') throw badRequest(`input ${quoteName(name)}: ${dt} data decoded as floats`, name);
    for (let i = 0; i < data.length; i += 1) {
      const x = data[i]!;
      if (x - x !== 0) throw badRequest(`input ${quoteName(name)}: element ${i} is ${describeValue(x)}, not a ${dt} value`, name);
    }
    return { shape, data, datatype: dt };
  }
  const ok = dt === 'BYTES' ? (x: unknown) => typeof x === 'string'
    : dt === 'BOOL' ? (x: unknown) => typeof x === 'boolean'
      : dt.startsWith('FP') || dt === 'BF16' ? (x: unknown) => typeof x === 'number' && Number.isFinite(x)
        : (x: unknown) => Number.isSafeInteger(x) && (!dt.startsWith('U') || (x as number) >= 0);
  const bad = data.findIndex((x) => !ok(x));
  if (bad >= 0) throw badRequest(`input ${quoteName(name)}: element ${bad} is ${describeValue(data[bad])}, not a ${dt} value`, name);
  return { shape, data, datatype: dt };
}

/** Rejects names the model does not declare, listing those it does. */
export function checkNames(values: NamedValues, known: ReadonlySet<string>, model: string): void {
  for (const name of values.keys()) {
    if (!known.has(name)) {
      throw badRequest(`unexpected input ${quoteName(name)} for model ${quoteName(model)}; known inputs: ${[...known].join(', ')}`, name);
    }
  }
}

/** Element i of a per-request input: a single value applies to every batch element, else one per element. */
export function elementAt(values: NamedValues, name: string, i: number, batch: number): unknown {
  const v = values.get(name);
  if (v === undefined) return undefined;
  if (v.data.length === 1) return v.data[0];
  if (v.data.length === batch) return v.data[i];
  throw badRequest(`${name} must hold 1 value or one per batch element (${batch}), got ${v.data.length}`, name);
}

export function optInt(value: unknown, name: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Number.isSafeInteger(value) || (value as number) < min || (value as number) > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `in [${min}, ${max}]`;
    throw badRequest(`${name} must be an integer ${range}, got ${describeValue(value)}`, name);
  }
  return value as number;
}

export function optNumber(value: unknown, name: string, ok: (n: number) => boolean, range: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || !ok(value)) {
    throw badRequest(`${name} must be a finite number ${range}, got ${describeValue(value)}`, name);
  }
  return value;
}

export function optBool(value: unknown, name: string): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw badRequest(`${name} must be a boolean, got ${describeValue(value)}`, name);
  return value;
}

export function optString(value: unknown, name: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw badRequest(`${name} must be a string, got ${describeValue(value)}`, name);
  return value;
}
