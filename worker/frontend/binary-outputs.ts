// Outputs of POST /infer as binary data (KServe's binary tensor data extension, which Triton's HTTP clients ask for
// by default): the JSON answer names each such output with parameters.binary_data_size and no data, and the tensors'
// little-endian bytes follow it in the body, the JSON's length in the Inference-Header-Content-Length header. Logits
// then cost 4 bytes a value and no printing — the engine's Float32Array goes out as it is — where JSON takes ~19
// bytes and ~0.2 µs of the event loop per value. Inputs sent so: binary-inputs.ts.
import type { ServerResponse } from 'node:http';

import { describeValue } from '../common/errors.js';
import { encodeRaw } from './grpc/tensor-codec.js';
import { badRequest } from './http-errors.js';
import { jsonPieces } from './logits-json.js';
import type { OutputTensor } from './model-run.js';

/** Which outputs go out as binary data: each output's parameters.binary_data, else the request's
 * parameters.binary_data_output (false when neither says). */
export function binaryOutputChoice(body: Record<string, unknown>): (name: string) => boolean {
  const all = boolParameter(body.parameters, 'binary_data_output', 'parameters') ?? false;
  const each = new Map<string, boolean>();
  if (Array.isArray(body.outputs)) {
    body.outputs.forEach((o: unknown, i) => {
      const own = boolParameter((o as { parameters?: unknown } | null)?.parameters, 'binary_data', `outputs[${i}].parameters`);
      const name = (o as { name?: unknown } | null)?.name;
      if (own !== undefined && typeof name === 'string') each.set(name, own);
    });
  }
  return (name) => each.get(name) ?? all;
}

function boolParameter(parameters: unknown, key: string, where: string): boolean | undefined {
  if (parameters === undefined || parameters === null) return undefined;
  if (typeof parameters !== 'object' || Array.isArray(parameters)) throw badRequest(`${where} must be an object, got ${describeValue(parameters)}`, where);
  const value = (parameters as Record<string, unknown>)[key];
  if (value !== undefined && typeof value !== 'boolean') throw badRequest(`${where}.${key} must be a boolean, got ${describeValue(value)}`, `${where}.${key}`);
  return value as boolean | undefined;
}

/** Sends the infer answer with the chosen outputs as binary data after the JSON (the others stay in it). */
export function sendBinaryAnswer(res: ServerResponse, header: Record<string, unknown>, outputs: readonly OutputTensor[], binary: (name: string) => boolean): void {
  const raw: Buffer[] = [];
  const described = outputs.map((t) => {
    if (!binary(t.name)) return t;
    const bytes = encodeRaw(t.datatype, t.data);
    raw.push(bytes);
    return { name: t.name, datatype: t.datatype, shape: t.shape, parameters: { binary_data_size: bytes.length } };
  });
  // The JSON's length goes in a header, so it is made whole (logits left in it — not asked for as binary — too).
  const json = Buffer.from([...jsonPieces({ ...header, outputs: described })].join(''));
  res.writeHead(200, {
    'content-type': 'application/octet-stream',
    'inference-header-content-length': json.length,
    'content-length': json.length + raw.reduce((n, b) => n + b.length, 0),
  });
  res.write(json);
  for (const bytes of raw) res.write(bytes);
  res.end();
}
