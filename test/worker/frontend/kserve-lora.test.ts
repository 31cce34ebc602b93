// A request's LoRA inputs (lora_task_id, lora_weights, lora_config), pure: read once for every KServe frontend into
// each batch element's LoraRequest, with shapes [1, rows, cols] or [rows, cols]; which go together and bad shapes
// are 400s naming the field and what was received. Also the facade's check of the request it builds
// (validate-request.ts) and the tensors as raw bytes (FP16, BF16: gRPC raw_input_contents, HTTP binary data).
// Through a real server: kserve-lora-e2e.test.ts.
import t from 'tap';

import { validateRequest } from '../../../worker/executor/validate-request.js';
import { decodeRaw } from '../../../worker/frontend/grpc/tensor-codec.js';
import { readKserveLora } from '../../../worker/frontend/kserve-lora.js';
import { checkTensor, fromJsonField, type NamedValues } from '../../../worker/frontend/named-values.js';
import { readTextParams } from '../../../worker/frontend/text-params.js';
import { jsonInputs, refusal } from '../../helpers/named-inputs.js';

const values = jsonInputs;

const weights2x4 = [[0.5, 0.25, 0, -1], [1, 2, 3, 4]];
const config2 = [[1, 0, 1], [2, 1, 1]];

t.test('lora_task_id alone names an adapter the server holds; absent: the base model', async (t) => {
  t.same(readKserveLora(values({}), 2), [undefined, undefined]);
  t.same(readKserveLora(values({ lora_task_id: 3 }), 1), [{ taskId: 3 }]);
  t.same(readKserveLora(values({ lora_task_id: [[0]] }), 1), [{ taskId: 0 }], 'shape [1, 1]; 0 is an id like any');
  t.same(readKserveLora(values({ lora_task_id: 3 }), 2), [{ taskId: 3 }, { taskId: 3 }], 'one id for every element');
  t.same(readKserveLora(values({ lora_task_id: [1, 2] }), 2), [{ taskId: 1 }, { taskId: 2 }], 'or one per element');
  for (const [bad, shown] of [[-1, '-1 (number)'], [1.5, '1.5 (number)'], ['3', '"3" (string)'], [2 ** 53, '9007199254740992 (number)']] as const) {
    t.same(refusal(() => readKserveLora(values({ lora_task_id: bad }), 1)),
      { message: `lora_task_id must be an integer >= 0 (below 2^53), got ${shown}`, param: 'lora_task_id' }, `${shown}`);
  }
  t.same(refusal(() => readKserveLora(values({ lora_task_id: [1, 2, 3] }), 2)),
    { message: 'lora_task_id must hold 1 value or one per batch element (2), got 3', param: 'lora_task_id' });
});

t.test('lora_weights + lora_config: the adapter sent with the request, as float32 and int32 with their shapes', async (t) => {
  const [lora] = readKserveLora(values({ lora_task_id: 7, lora_weights: [weights2x4], lora_config: [config2] }), 1);
  t.equal(lora!.taskId, 7);
  t.ok(lora!.weights instanceof Float32Array);
  t.same(Array.from(lora!.weights!), weights2x4.flat());
  t.same(lora!.weightsShape, [2, 4], '[1, rows, cols] loses its batch dimension');
  t.ok(lora!.config instanceof Int32Array);
  t.same(Array.from(lora!.config!), config2.flat());
  t.same(lora!.configShape, [2, 3]);
  const [flat] = readKserveLora(values({ lora_task_id: 7, lora_weights: weights2x4, lora_config: config2 }), 1);
  t.same(flat!.weightsShape, [2, 4], '[rows, cols] too');
  const both = readKserveLora(values({ lora_task_id: 7, lora_weights: weights2x4, lora_config: config2 }), 2);
  t.equal(both[0]!.weights, both[1]!.weights, 'every element of the batch runs the one adapter (not copied)');
});

t.test('what goes together, and the shapes: 400s naming the field', async (t) => {
  const cases: [Record<string, unknown>, string, string][] = [
    [{ lora_weights: weights2x4, lora_config: config2 }, 'lora_weights and lora_config need lora_task_id: the id the adapter is cached under (later requests name it alone)', 'lora_task_id'],
    [{ lora_task_id: 1, lora_weights: weights2x4 }, 'lora_weights needs lora_config: an adapter sent with a request is both tensors (TensorRT-LLM\'s layout)', 'lora_config'],
    [{ lora_task_id: 1, lora_config: config2 }, 'lora_config needs lora_weights: an adapter sent with a request is both tensors (TensorRT-LLM\'s layout)', 'lora_weights'],
    [{ lora_config: config2 }, 'lora_config needs lora_weights: an adapter sent with a request is both tensors (TensorRT-LLM\'s layout)', 'lora_weights'],
    [{ lora_task_id: 1, lora_weights: [1, 2, 3], lora_config: config2 }, 'lora_weights must have shape [1, rows, cols] or [rows, cols] (one row per module and layer), got [3]', 'lora_weights'],
    [{ lora_task_id: 1, lora_weights: [weights2x4, weights2x4], lora_config: config2 }, 'lora_weights must have shape [1, rows, cols] or [rows, cols] (one row per module and layer), got [2, 2, 4]', 'lora_weights'],
    [{ lora_task_id: 1, lora_weights: weights2x4, lora_config: [[1, 0], [2, 1]] }, 'lora_config must have shape [1, rows, 3] or [rows, 3] (one row per module and layer), got [2, 2]', 'lora_config'],
    [{ lora_task_id: 1, lora_weights: weights2x4, lora_config: [[[1, 0, 1, 5]]] }, 'lora_config must have shape [1, rows, 3] or [rows, 3] (one row per module and layer), got [1, 1, 4]', 'lora_config'],
    [{ lora_task_id: 1, lora_weights: [[1, 'x']], lora_config: [[1, 0, 1]] }, 'lora_weights[1] must be a finite number, got "x" (string)', 'lora_weights'],
    [{ lora_task_id: 1, lora_weights: [[1, 2]], lora_config: [[1, 0.5, 1]] }, 'lora_config[1] must be a 32-bit integer, got 0.5 (number)', 'lora_config'],
    [{ lora_task_id: 1, lora_weights: [[1, 2]], lora_config: [[1, 2 ** 31, 1]] }, 'lora_config[1] must be a 32-bit integer, got 2147483648 (number)', 'lora_config'],
  ];
  for (const [fields, message, param] of cases) t.same(refusal(() => readKserveLora(values(fields), 1)), { message, param }, message);
  t.same(refusal(() => readKserveLora(values({ lora_task_id: [1, 2], lora_weights: weights2x4, lora_config: config2 }), 2)),
    { message: 'lora_task_id must hold one id with lora_weights and lora_config (they are one adapter), got 2', param: 'lora_task_id' });
});

t.test('the text models carry it onto each prompt\'s request', async (t) => {
  const [p] = readTextParams(values({ text_input: 'hi', max_tokens: 2, lora_task_id: 5 }), 8);
  t.same(p!.lora, { taskId: 5 });
  t.equal(readTextParams(values({ text_input: 'hi', max_tokens: 2 }), 8)[0]!.lora, undefined);
});

t.test('LoRA tensors as raw bytes: FP32, FP16 and BF16 weights, UINT64 / INT64 task ids', async (t) => {
  const f32 = Buffer.from(new Float32Array([0.5, -2]).buffer);
  t.same(decodeRaw('FP32', f32, 'lora_weights', 'raw'), [0.5, -2]);
  const f16 = Buffer.from(new Uint16Array([0x3800, 0xc000]).buffer);  // 0.5, -2
  t.same(decodeRaw('FP16', f16, 'lora_weights', 'raw'), [0.5, -2]);
  const bf16 = Buffer.from(new Uint16Array([0x3f00, 0xc000, 0x3f80]).buffer);  // 0.5, -2, 1
  t.same(decodeRaw('BF16', bf16, 'lora_weights', 'raw'), [0.5, -2, 1]);
  // Binary weights reach the request as the Float32Array they were decoded into (a large adapter is never an array
  // of numbers on the JS thread: bench/lora-weights-decode.ts).
  const weights = checkTensor('lora_weights', 'FP16', [1, 2], decodeRaw('FP16', f16, 'lora_weights', 'raw'));
  const config = checkTensor('lora_config', 'INT32', [1, 3], [1, 0, 1]);
  const values: NamedValues = new Map([['lora_weights', weights], ['lora_config', config], ['lora_task_id', fromJsonField('lora_task_id', 9)]]);
  const [lora] = readKserveLora(values, 1);
  t.equal(lora?.weights, weights.data, 'the decoded array itself, not a copy');
  t.same([...(lora?.weights ?? [])], [0.5, -2]);
  t.same(decodeRaw('UINT64', Buffer.from(new BigUint64Array([3n]).buffer), 'lora_task_id', 'raw'), [3]);
  t.same(decodeRaw('INT64', Buffer.from(new BigInt64Array([4n]).buffer), 'lora_task_id', 'raw'), [4]);
});

t.test('the facade checks the request\'s lora before native code sees it', async (t) => {
  const limits = { vocabSize: 100, maxSeqLen: 64, maxNumTokens: 64, maxBeamWidth: 1, chunkedContext: false };
  const base = { inputTokenIds: [1], maxTokens: 2 };
  const weights = new Float32Array(8);
  const config = new Int32Array(6);
  t.doesNotThrow(() => validateRequest({ ...base, lora: { taskId: 0 } }, limits));
  t.doesNotThrow(() => validateRequest({ ...base, lora: { taskId: 1, weights, weightsShape: [2, 4], config, configShape: [2, 3] } }, limits));
  const bad: [unknown, RegExp][] = [
    [{ taskId: -1 }, /^lora\.taskId must be an integer >= 0, got -1 \(number\)$/],
    [{}, /^lora\.taskId must be an integer >= 0, got undefined/],
    [{ taskId: 1, rank: 8 }, /^unknown parameter 'lora\.rank'/],
    [{ taskId: 1, weights, weightsShape: [2, 4] }, /^lora\.weights and lora\.config go together .*got only lora\.weights$/],
    [{ taskId: 1, weights: [1, 2], weightsShape: [1, 2], config, configShape: [2, 3] }, /^lora\.weights must be a Float32Array, got an array of length 2$/],
    [{ taskId: 1, weights, weightsShape: [2, 3], config, configShape: [2, 3] }, /^lora\.weightsShape \[2, 3\] holds 6 values, the array 8$/],
    [{ taskId: 1, weights, weightsShape: [2, 4], config, configShape: [3, 2] }, /^lora\.configShape must be \[rows, 3\], got \[3, 2\]$/],
    [{ taskId: 1, weightsShape: [2, 4] }, /^lora\.weightsShape and lora\.configShape need lora\.weights and lora\.config$/],
    ['x', /^lora must be an object, got "x" \(string\)$/],
  ];
  for (const [lora, message] of bad) t.throws(() => validateRequest({ ...base, lora }, limits), { code: 'invalid_argument', message }, String(message));
});
