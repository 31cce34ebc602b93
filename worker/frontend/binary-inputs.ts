// Inputs of POST /infer as binary data (KServe's binary tensor data extension, what Triton's HTTP clients send by
// default): the body is a JSON header — its length in the Inference-Header-Content-Length request header — then the
// inputs' little-endian bytes, in the order of the inputs that say parameters.binary_data_size (and carry no data).
// A big tensor (a request's lora_weights) costs its bytes, not ~19 characters a value of JSON. Decoded as gRPC's
// raw_input_contents are (grpc/tensor-codec.ts), then checked like any tensor. Pure.
import { describeValue } from '../common/errors.js';
import { quoteName } from '../common/quote-value.js';
import { decodeRaw } from './grpc/tensor-codec.js';
import { badRequest } from './http-errors.js';
import { parseJsonObject } from './http-body.js';
import { checkTensor, fromKserveTensor, type NamedValue } from './named-values.js';

export const BINARY_HEADER = 'inference-header-content-length';

/** A binary body's JSON header and the bytes after it. */
export function splitBinaryBody(body: Buffer, headerValue: string): { json: Record<string, unknown>; data: Buffer } {
  const length = Number(headerValue);
  if (!/^\d+$/.test(headerValue.trim()) || length > body.length) {
    throw badRequest(`the Inference-Header-Content-Length header must be the length of the body's JSON part, an integer in [0, ${body.length}] (the body's length), got ${JSON.stringify(headerValue)}`);
  }
  return { json: parseJsonObject(body.subarray(0, length)), data: body.subarray(length) };
}

/** Hands each binary input its bytes, in order; what is left over at the end is the client's mistake, named. */
export class BinaryData {
  private at = 0;
  constructor(private readonly data: Buffer) {}

  /** The input's tensor from its binary_data_size bytes. */
  tensor(t: Record<string, unknown>, index: number): [string, NamedValue] {
    const name = t.name as string;
    const size = (t.parameters as Record<string, unknown>).binary_data_size;
    if (!Number.isSafeInteger(size) || (size as number) < 0) {
      throw badRequest(`input ${quoteName(name)}: parameters.binary_data_size must be an integer >= 0, got ${describeValue(size)}`, name);
    }
    if (t.data !== undefined) throw badRequest(`input ${quoteName(name)} has both data and parameters.binary_data_size; send one of them`, name);
    const end = this.at + (size as number);
    if (end > this.data.length) {
      throw badRequest(`input ${quoteName(name)}: parameters.binary_data_size ${String(size)} goes past the body's binary data (${this.data.length - this.at} bytes left at inputs[${index}])`, name);
    }
    const raw = this.data.subarray(this.at, end);
    this.at = end;
    const datatype = typeof t.datatype === 'string' ? t.datatype : '';
    return [name, checkTensor(name, t.datatype, t.shape, decodeRaw(datatype, raw, name, 'its binary data'))];
  }

  finish(): void {
    if (this.at !== this.data.length) {
      throw badRequest(`the body has ${this.data.length - this.at} bytes of binary data no input claims (parameters.binary_data_size of the inputs sums to ${this.at})`);
    }
  }
}

/** One entry of the `inputs` array: in the JSON (fromKserveTensor) or, with parameters.binary_data_size, after it. */
export function inputTensor(tensor: unknown, index: number, binary: BinaryData | undefined): [string, NamedValue] {
  const t = tensor as Record<string, unknown> | null;
  const parameters = t !== null && typeof t === 'object' ? t.parameters : undefined;
  const sized = typeof parameters === 'object' && parameters !== null && 'binary_data_size' in parameters;
  if (!sized || typeof t!.name !== 'string' || t!.name === '') return fromKserveTensor(tensor, index);
  if (!binary) {
    throw badRequest(`input ${quoteName(t!.name)} says parameters.binary_data_size, but the request has no binary data: send the Inference-Header-Content-Length header with the JSON's length, the tensors' bytes after the JSON`, t!.name);
  }
  return binary.tensor(t!, index);
}
