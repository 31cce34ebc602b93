// /infer's binary inputs (KServe's binary tensor data extension, what Triton's HTTP clients send), pure: the body's
// JSON part by the Inference-Header-Content-Length header, each input with parameters.binary_data_size taking its
// bytes in order, decoded and checked like a JSON tensor; sizes that do not add up are 400s saying so.
import t from 'tap';

import { splitBinaryBody } from '../../../worker/frontend/binary-inputs.js';
import { HttpError } from '../../../worker/frontend/http-errors.js';
import { inferInputs } from '../../../worker/frontend/kserve-infer.js';

/** A binary body: the JSON, then the blobs; and the header value. */
function body(json: unknown, ...blobs: Buffer[]): { bytes: Buffer; header: string } {
  const head = Buffer.from(JSON.stringify(json));
  return { bytes: Buffer.concat([head, ...blobs]), header: String(head.length) };
}

function read(json: unknown, ...blobs: Buffer[]) {
  const b = body(json, ...blobs);
  const { json: parsed, data } = splitBinaryBody(b.bytes, b.header);
  return inferInputs(parsed, data);
}

function refusal(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    if (error instanceof HttpError && error.status === 400) return error.message;
    throw error;
  }
  return undefined;
}

const f32 = (...v: number[]) => Buffer.from(new Float32Array(v).buffer);
const bytesElement = (s: string) => Buffer.concat([Buffer.from(new Uint32Array([Buffer.byteLength(s)]).buffer), Buffer.from(s)]);

t.test('binary inputs beside JSON ones, in order', async (t) => {
  const { inputs, id } = read({
    id: 'r1',
    inputs: [
      { name: 'text_input', datatype: 'BYTES', shape: [1, 1], parameters: { binary_data_size: 6 } },
      { name: 'max_tokens', datatype: 'INT32', shape: [1, 1], data: [4] },
      { name: 'lora_weights', datatype: 'FP32', shape: [1, 1, 3], parameters: { binary_data_size: 12 } },
    ],
  }, bytesElement('hi'), f32(0.5, -1, 2));
  t.equal(id, 'r1');
  t.same(inputs.get('text_input'), { shape: [1, 1], data: ['hi'], datatype: 'BYTES' });
  t.same(inputs.get('max_tokens'), { shape: [1, 1], data: [4], datatype: 'INT32' });
  t.same(inputs.get('lora_weights'), { shape: [1, 1, 3], data: [0.5, -1, 2], datatype: 'FP32' });
});

t.test('sizes that do not add up, and binary sizes without binary data', async (t) => {
  const weights = (size: number, shape = [1, 3]) => ({ inputs: [{ name: 'lora_weights', datatype: 'FP32', shape, parameters: { binary_data_size: size } }] });
  t.equal(refusal(() => read(weights(16), f32(1, 2, 3))),
    'input \'lora_weights\': parameters.binary_data_size 16 goes past the body\'s binary data (12 bytes left at inputs[0])');
  t.equal(refusal(() => read(weights(8), f32(1, 2, 3))),
    'input \'lora_weights\': shape [1, 3] needs 3 elements, data has 2', 'the element count against the shape, as for JSON');
  t.equal(refusal(() => read(weights(12), f32(1, 2, 3, 4))),
    'the body has 4 bytes of binary data no input claims (parameters.binary_data_size of the inputs sums to 12)');
  t.equal(refusal(() => read(weights(10), f32(1, 2), Buffer.alloc(2))),
    'input \'lora_weights\': its binary data holds 10 bytes, not a whole number of 4-byte FP32 elements');
  t.equal(refusal(() => read(weights(-1))), 'input \'lora_weights\': parameters.binary_data_size must be an integer >= 0, got -1 (number)');
  t.equal(refusal(() => inferInputs(weights(12))),
    'input \'lora_weights\' says parameters.binary_data_size, but the request has no binary data: send the Inference-Header-Content-Length header with the JSON\'s length, the tensors\' bytes after the JSON');
  t.equal(refusal(() => read({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1], data: [1], parameters: { binary_data_size: 4 } }] }, f32(1))),
    'input \'x\' has both data and parameters.binary_data_size; send one of them');
  t.match(refusal(() => splitBinaryBody(Buffer.from('{}'), '5')), /^the Inference-Header-Content-Length header must be the length of the body's JSON part, an integer in \[0, 2\]/);
  t.match(refusal(() => splitBinaryBody(Buffer.from('{}'), 'x')), /got "x"$/);
  t.match(refusal(() => splitBinaryBody(Buffer.from('{"a'), '3')), /^the request body is not valid JSON/);
});
