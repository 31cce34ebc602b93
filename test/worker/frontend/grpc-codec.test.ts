// The gRPC tensor codec's pure parts: raw bytes and typed contents both ways for every datatype we read, the
// byte-exact layouts of the protocol (little-endian, 4-byte length-prefixed BYTES, IEEE half floats), and
// rejections that name the input and what was wrong.
import t from 'tap';

import { HttpError } from '../../../worker/frontend/http-errors.js';
import { decodeInferRequest } from '../../../worker/frontend/grpc/decode-request.js';
import { encodeInferResponse } from '../../../worker/frontend/grpc/encode-response.js';
import { decodeContents, decodeRaw, encodeContents, encodeRaw } from '../../../worker/frontend/grpc/tensor-codec.js';
import { checkTensor } from '../../../worker/frontend/named-values.js';

function throws400(t: { ok(v: unknown, m: string): unknown; fail(m: string): unknown; match(v: unknown, p: RegExp): unknown }, fn: () => unknown, message: RegExp): void {
  try {
    fn();
    t.fail(`expected a 400 matching ${message}`);
  } catch (error) {
    t.ok(error instanceof HttpError && error.status === 400, `400 (${(error as Error).message})`);
    t.match((error as Error).message, message);
  }
}

// IEEE half precision, written out here as the test's own reference.
function half(h: number): number {
  const e = (h >> 10) & 0x1f, f = h & 0x3ff, sign = h & 0x8000 ? -1 : 1;
  if (e === 0x1f) return f ? NaN : sign * Infinity;
  return e === 0 ? sign * f * 2 ** -24 : sign * (1 + f / 1024) * 2 ** (e - 15);
}

t.test('raw floats come as a Float32Array: every FP16 and BF16 pattern exact, from any byte offset', async (t) => {
  const all = new Uint16Array(65536).map((_, i) => i);
  // A body's slice may start at an odd byte: the words are read from there, not from an aligned copy of the body.
  const odd = (b: Buffer) => Buffer.concat([Buffer.from([0xab]), b]).subarray(1);
  const f16 = decodeRaw('FP16', odd(Buffer.from(all.buffer)), 'w', 'raw');
  t.ok(f16 instanceof Float32Array && f16.length === 65536, 'FP16: a Float32Array of every pattern');
  const badHalf = [...all].findIndex((h) => !Object.is(f16[h], Math.fround(half(h))));
  t.equal(badHalf, -1, 'FP16: each pattern is the value of its bits (signed zeros, subnormals, infinities, NaN)');
  const bf16 = decodeRaw('BF16', odd(Buffer.from(all.buffer)), 'w', 'raw');
  const view = new DataView(new ArrayBuffer(4));
  const badBf = [...all].findIndex((b) => { view.setUint32(0, b << 16); return !Object.is(bf16[b], view.getFloat32(0)); });
  t.ok(bf16 instanceof Float32Array && badBf === -1, 'BF16: each pattern is the upper half of its float32');
  const f32 = decodeRaw('FP32', odd(Buffer.from(new Float32Array([1.5, -0, 3e-41, -7]).buffer)), 'w', 'raw');
  t.ok(f32 instanceof Float32Array && Object.is(f32[1], -0), 'FP32: a Float32Array, -0 kept');
  t.same([...f32], [1.5, -0, Math.fround(3e-41), -7], 'FP32: the values, a subnormal included');
  // The tensor check reads the typed data as it reads arrays: the count, and every element finite.
  t.equal(checkTensor('w', 'FP16', [2, 2], decodeRaw('FP16', Buffer.from(new Uint16Array([0x3c00, 0, 0x8000, 0x3800]).buffer), 'w', 'raw')).data.length, 4);
  throws400(t, () => checkTensor('w', 'FP16', [3], decodeRaw('FP16', Buffer.from(new Uint16Array([0x3c00, 0x3c00, 0x7c00]).buffer), 'w', 'raw')),
    /input 'w': element 2 is Infinity \(number\), not a FP16 value/);
  throws400(t, () => checkTensor('w', 'BF16', [2], decodeRaw('BF16', Buffer.from(new Uint16Array([0x7fc0, 0]).buffer), 'w', 'raw')),
    /input 'w': element 0 is NaN \(number\), not a BF16 value/);
  throws400(t, () => checkTensor('w', 'FP32', [1, 3], decodeRaw('FP32', Buffer.alloc(8), 'w', 'raw')), /shape \[1, 3\] needs 3 elements, data has 2/);
});

t.test('raw: every datatype round-trips; the byte layout is the protocol\'s', async (t) => {
  const cases: [string, unknown[]][] = [
    ['BOOL', [true, false, true]], ['INT8', [-128, 127]], ['UINT8', [0, 255]], ['INT16', [-32768, 7]], ['UINT16', [65535]],
    ['INT32', [-1, 2147483647]], ['UINT32', [4294967295]], ['INT64', [-(2 ** 53) + 1, 5]], ['UINT64', [2 ** 53 - 1]],
    ['FP32', [1.5, -0.25]], ['FP64', [Math.PI]], ['BYTES', ['', 'héllo', 'x'.repeat(300)]],
  ];
  for (const [datatype, data] of cases) t.same(decodeRaw(datatype, encodeRaw(datatype, data), 'x', 'raw'), data, datatype);
  t.same([...encodeRaw('INT32', [1, -2])], [1, 0, 0, 0, 254, 255, 255, 255], 'INT32 little-endian');
  t.same([...encodeRaw('BYTES', ['ab'])], [2, 0, 0, 0, 97, 98], 'BYTES: 4-byte little-endian length, then the bytes');
  t.same([...encodeRaw('BOOL', [true, false])], [1, 0]);
  // FP16 arrives raw only (no typed field): 0x3c00 = 1, 0xc000 = -2, 0x0001 = the smallest subnormal, 0x7c00 = inf.
  t.same(decodeRaw('FP16', Buffer.from([0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00, 0x00, 0x7c]), 'x', 'raw'), [1, -2, 2 ** -24, Infinity]);
  t.same(decodeRaw('INT64', Buffer.from(BigInt64Array.from([2n ** 60n]).buffer), 'x', 'raw'), [2 ** 60], 'past 2^53: a number the tensor check then refuses');
});

t.test('raw: malformed bytes are the client\'s error, named', async (t) => {
  throws400(t, () => decodeRaw('INT32', Buffer.alloc(7), 'ids', 'raw_input_contents[0]'), /input 'ids': raw_input_contents\[0\] holds 7 bytes, not a whole number of 4-byte INT32 elements/);
  throws400(t, () => decodeRaw('BYTES', Buffer.from([5, 0, 0]), 'q', 'raw_input_contents[1]'), /input 'q': raw_input_contents\[1\] ends inside an element's 4-byte length \(at byte 0 of 3\)/);
  throws400(t, () => decodeRaw('BYTES', Buffer.from([5, 0, 0, 0, 65]), 'q', 'r'), /element 0 claims 5 bytes, only 1 remain/);
});

t.test('typed contents: the datatype\'s own field; another field is named', async (t) => {
  t.same(encodeContents('INT32', [1, 2]), { int_contents: [1, 2] });
  t.same(encodeContents('UINT8', [3]), { uint_contents: [3] });
  t.same(encodeContents('BYTES', ['a']), { bytes_contents: [Buffer.from('a')] });
  t.same(decodeContents('BYTES', { bytes_contents: [Buffer.from('héllo')] }, 'q'), ['héllo']);
  t.same(decodeContents('FP32', { fp32_contents: [0.5], int_contents: [] }, 'x'), [0.5], 'empty other fields are fine');
  t.same(decodeContents('INT32', null, 'x'), [], 'no contents: no elements (the shape check then says how many were needed)');
  throws400(t, () => decodeContents('INT32', { fp32_contents: [1] }, 'ids'), /input 'ids': a INT32 tensor's data goes in int_contents, got fp32_contents/);
  throws400(t, () => decodeContents('FP16', { fp32_contents: [1] }, 'h'), /a FP16 tensor's data goes in raw_input_contents, got fp32_contents/);
});

t.test('a whole request: raw or typed, parameters, requested outputs', async (t) => {
  const raw = decodeInferRequest({
    model_name: 'tensorrt_llm', model_version: '', id: 'r', inputs: [
      { name: 'input_ids', datatype: 'INT32', shape: [1, 2] }, { name: 'request_output_len', datatype: 'UINT32', shape: [1, 1] }],
    outputs: [{ name: 'output_ids' }], raw_input_contents: [encodeRaw('INT32', [5, 6]), encodeRaw('UINT32', [3])],
    parameters: { triton_enable_empty_final_response: { bool_param: true, parameter_choice: 'bool_param' } },
  });
  t.same(raw.request.inputs.get('input_ids'), { shape: [1, 2], data: [5, 6], datatype: 'INT32' });
  t.same([...raw.request.outputs!], ['output_ids']);
  t.match(raw, { rawOutputs: true, emptyFinal: true, request: { modelName: 'tensorrt_llm', modelVersion: undefined, id: 'r' } });
  const typed = decodeInferRequest({
    model_name: 'ensemble', model_version: '1', id: '', inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1], contents: { bytes_contents: [Buffer.from('hi')] } }],
    outputs: [], raw_input_contents: [],
  });
  t.match(typed, { rawOutputs: false, emptyFinal: false, request: { id: undefined, modelVersion: '1' } });
  t.equal(typed.request.outputs, undefined, 'no outputs named: all of them');
  throws400(t, () => decodeInferRequest({ model_name: 'm', model_version: '', id: '', outputs: [], raw_input_contents: [],
    inputs: [{ name: 'a', datatype: 'INT32', shape: [1], contents: { int_contents: [1] } }, { name: 'a', datatype: 'INT32', shape: [1], contents: { int_contents: [2] } }] }),
  /input 'a' is given twice/);
  throws400(t, () => decodeInferRequest({ model_name: 'm', model_version: '', id: '', outputs: [], raw_input_contents: [Buffer.alloc(4)],
    inputs: [{ name: 'a', datatype: 'INT32', shape: [1], contents: { int_contents: [1] } }] }),
  /input 'a' has both contents and raw_input_contents\[0\]; send one of them/);
  throws400(t, () => decodeInferRequest({ model_name: 'm', model_version: '', id: '', outputs: [], raw_input_contents: [],
    inputs: [{ name: '', datatype: 'INT32', shape: [1] }] }), /inputs\[0\]\.name must be a non-empty string/);
});

t.test('a response: raw or typed; text_output flat as Triton\'s postprocessing returns it', async (t) => {
  const outputs = [
    { name: 'text_output', datatype: 'BYTES' as const, shape: [2, 1], data: ['a', 'bc'] },
    { name: 'batch_index', datatype: 'INT32' as const, shape: [2, 1], data: [0, 1] },
  ];
  const raw = encodeInferResponse({ modelName: 'ensemble', modelVersion: '1', id: 'q' }, outputs, true, { triton_final_response: { bool_param: true } });
  t.same(raw.outputs.map((o) => [o.name, o.shape]), [['text_output', [2]], ['batch_index', [2, 1]]]);
  t.same(raw.raw_output_contents, [encodeRaw('BYTES', ['a', 'bc']), encodeRaw('INT32', [0, 1])]);
  t.match(raw, { model_name: 'ensemble', model_version: '1', id: 'q', parameters: { triton_final_response: { bool_param: true } } });
  const typed = encodeInferResponse({ modelName: 'ensemble', modelVersion: '1' }, outputs, false);
  t.same(typed.outputs[1]!.contents, { int_contents: [0, 1] });
  t.equal(typed.raw_output_contents, undefined);
  t.equal(typed.id, '');
});
