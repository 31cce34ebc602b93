// Tensor data on the gRPC wire, both ways and in both forms the protocol has: typed lists (InferTensorContents,
// one field per datatype family) and raw bytes (raw_input_contents / raw_output_contents: little-endian,
// row-major; each BYTES element a 4-byte little-endian length, then its bytes). Pure; shared by the server, the
// client tool and the bench, so both ends read and write one format.
import { quoteName } from '../../common/quote-value.js';
import { badRequest } from '../http-errors.js';
import type { InferTensorContents } from './wire-types.js';

type Field = keyof InferTensorContents;

/** Which InferTensorContents field carries each datatype (FP16 and BF16 have none: raw only). */
export const CONTENTS_FIELD: Readonly<Record<string, Field>> = {
  BOOL: 'bool_contents', INT8: 'int_contents', INT16: 'int_contents', INT32: 'int_contents', INT64: 'int64_contents',
  UINT8: 'uint_contents', UINT16: 'uint_contents', UINT32: 'uint_contents', UINT64: 'uint64_contents',
  FP32: 'fp32_contents', FP64: 'fp64_contents', BYTES: 'bytes_contents',
};

const ELEMENT_BYTES: Readonly<Record<string, number>> = {
  BOOL: 1, INT8: 1, UINT8: 1, INT16: 2, UINT16: 2, FP16: 2, BF16: 2, INT32: 4, UINT32: 4, FP32: 4, INT64: 8, UINT64: 8, FP64: 8,
};

// IEEE 754 half precision → number (no typed array for it in Node 20).
function halfToNumber(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const fraction = h & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

// bfloat16 → number: the upper half of a float32's bits.
const bf16Bits = new DataView(new ArrayBuffer(4));
function bfloat16ToNumber(b: number): number {
  bf16Bits.setUint32(0, b << 16);
  return bf16Bits.getFloat32(0);
}

// Every half's value, made on first use: a large FP16 tensor is then one table lookup per element.
let halfTable: Float32Array | undefined;
function halves(): Float32Array {
  if (halfTable === undefined) {
    halfTable = new Float32Array(65536);
    for (let h = 0; h < 65536; h += 1) halfTable[h] = halfToNumber(h);
  }
  return halfTable;
}

/**
 * FP16 / BF16 / FP32 raw bytes (little-endian) as a Float32Array, in loops over typed arrays: an adapter's
 * lora_weights can hold tens of millions of elements, which element by element into a JS array took seconds of the
 * event loop (bench/RESULTS.md, "LoRA weights decoded into typed arrays").
 */
function decodeFloats(datatype: 'FP16' | 'BF16' | 'FP32', raw: Buffer): Float32Array {
  const size = datatype === 'FP32' ? 4 : 2;
  const n = raw.length / size;
  const out = new Float32Array(n);
  if (datatype === 'FP32') {
    if (LITTLE_ENDIAN) new Uint8Array(out.buffer).set(raw);
    else for (let i = 0; i < n; i += 1) out[i] = raw.readFloatLE(i * 4);
    return out;
  }
  // The 16-bit words, aligned (a body's slice may start at an odd byte).
  const words = new Uint16Array(n);
  if (LITTLE_ENDIAN) new Uint8Array(words.buffer).set(raw);
  else for (let i = 0; i < n; i += 1) words[i] = raw.readUInt16LE(i * 2);
  if (datatype === 'FP16') {
    const table = halves();
    for (let i = 0; i < n; i += 1) out[i] = table[words[i]!]!;
  } else {
    const bits = new Uint32Array(out.buffer);
    for (let i = 0; i < n; i += 1) bits[i] = words[i]! << 16;
  }
  return out;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** BYTES elements as UTF-8 strings (our models take text); a truncated element is the client's error. */
function readByteElements(raw: Buffer, name: string, where: string): string[] {
  const out: string[] = [];
  let at = 0;
  while (at < raw.length) {
    if (at + 4 > raw.length) throw badRequest(`input ${quoteName(name)}: ${where} ends inside an element's 4-byte length (at byte ${at} of ${raw.length})`, name);
    const len = raw.readUInt32LE(at);
    at += 4;
    if (at + len > raw.length) throw badRequest(`input ${quoteName(name)}: ${where} element ${out.length} claims ${len} bytes, only ${raw.length - at} remain`, name);
    out.push(raw.toString('utf8', at, at + len));
    at += len;
  }
  return out;
}

/** A raw input's elements as JS values (FP16, BF16 and FP32 as a Float32Array); the byte count must fit the
 * datatype (the element count is checked later). */
export function decodeRaw(datatype: string, raw: Buffer, name: string, where: string): unknown[] | Float32Array {
  if (datatype === 'BYTES') return readByteElements(raw, name, where);
  const size = ELEMENT_BYTES[datatype];
  if (size === undefined) return [];  // an unknown datatype is reported by the tensor check, with the list of known ones
  if (raw.length % size !== 0) {
    throw badRequest(`input ${quoteName(name)}: ${where} holds ${raw.length} bytes, not a whole number of ${size}-byte ${datatype} elements`, name);
  }
  if (datatype === 'FP16' || datatype === 'BF16' || datatype === 'FP32') return decodeFloats(datatype, raw);
  const n = raw.length / size;
  const out = new Array<unknown>(n);
  for (let i = 0; i < n; i += 1) {
    const at = i * size;
    switch (datatype) {
      case 'BOOL': out[i] = raw[at] !== 0; break;
      case 'INT8': out[i] = raw.readInt8(at); break;
      case 'UINT8': out[i] = raw[at]; break;
      case 'INT16': out[i] = raw.readInt16LE(at); break;
      case 'UINT16': out[i] = raw.readUInt16LE(at); break;
      case 'FP16': out[i] = halfToNumber(raw.readUInt16LE(at)); break;
      case 'BF16': out[i] = bfloat16ToNumber(raw.readUInt16LE(at)); break;
      case 'INT32': out[i] = raw.readInt32LE(at); break;
      case 'UINT32': out[i] = raw.readUInt32LE(at); break;
      case 'FP32': out[i] = raw.readFloatLE(at); break;
      // Past 2^53 a 64-bit integer is not exact as a number: the tensor check rejects it by name and value.
      case 'INT64': out[i] = Number(raw.readBigInt64LE(at)); break;
      case 'UINT64': out[i] = Number(raw.readBigUInt64LE(at)); break;
      case 'FP64': out[i] = raw.readDoubleLE(at); break;
    }
  }
  return out;
}

/** A typed-contents input's elements: the datatype's own field; data in another field is named, not ignored. */
export function decodeContents(datatype: string, contents: InferTensorContents | null | undefined, name: string): unknown[] {
  const field = CONTENTS_FIELD[datatype];
  const filled = (Object.keys(contents ?? {}) as Field[]).filter((f) => ((contents?.[f] as unknown[] | undefined)?.length ?? 0) > 0);
  const wrong = filled.find((f) => f !== field);
  if (wrong !== undefined) {
    throw badRequest(`input ${quoteName(name)}: a ${datatype} tensor's data goes in ${field ?? 'raw_input_contents'}, got ${wrong}`, name);
  }
  if (field === undefined) return [];
  const values = (contents?.[field] ?? []) as unknown[];
  return field === 'bytes_contents' ? (values as Buffer[]).map((b) => Buffer.from(b).toString('utf8')) : values;
}

function byteElements(data: readonly unknown[]): Buffer {
  const parts = data.map((x) => Buffer.from(String(x), 'utf8'));
  const out = Buffer.allocUnsafe(parts.reduce((n, p) => n + 4 + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.writeUInt32LE(p.length, at);
    p.copy(out, at + 4);
    at += 4 + p.length;
  }
  return out;
}

/** An output (or a client's input) as raw bytes. Logits (a Float32Array) are not copied: the bytes are its own. */
export function encodeRaw(datatype: string, data: readonly unknown[] | Float32Array): Buffer {
  if (data instanceof Float32Array) {
    if (datatype === 'FP32') return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    data = Array.from(data);
  }
  switch (datatype) {
    case 'BYTES': return byteElements(data);
    case 'BOOL': return Buffer.from(Uint8Array.from(data, (x) => (x ? 1 : 0)));
    case 'INT8': return Buffer.from(Int8Array.from(data as number[]).buffer);
    case 'UINT8': return Buffer.from(Uint8Array.from(data as number[]).buffer);
    case 'INT16': return Buffer.from(Int16Array.from(data as number[]).buffer);
    case 'UINT16': return Buffer.from(Uint16Array.from(data as number[]).buffer);
    case 'INT32': return Buffer.from(Int32Array.from(data as number[]).buffer);
    case 'UINT32': return Buffer.from(Uint32Array.from(data as number[]).buffer);
    case 'FP32': return Buffer.from(Float32Array.from(data as number[]).buffer);
    case 'FP64': return Buffer.from(Float64Array.from(data as number[]).buffer);
    case 'INT64': return Buffer.from(BigInt64Array.from(data as number[], (x) => BigInt(x)).buffer);
    case 'UINT64': return Buffer.from(BigUint64Array.from(data as number[], (x) => BigInt(x)).buffer);
    default: throw new Error(`no raw encoding for datatype ${datatype}`);
  }
}

/** An output (or a client's input) as typed contents (protobuf's repeated fields take arrays, not typed arrays). */
export function encodeContents(datatype: string, data: readonly unknown[] | Float32Array): InferTensorContents {
  if (data instanceof Float32Array) data = Array.from(data);
  const field = CONTENTS_FIELD[datatype];
  if (field === undefined) throw new Error(`no typed contents for datatype ${datatype}; send it raw`);
  if (field === 'bytes_contents') return { bytes_contents: data.map((x) => Buffer.from(String(x), 'utf8')) };
  return { [field]: data } as InferTensorContents;
}
