// The orchestrator's link messages (pure): JSON with logits as raw float bytes, round-tripped exactly.
import t from 'tap';

import { decode, encode, withRequestId } from '../../worker/orchestrator/wire.js';

t.test('responses with logits round-trip bit-exactly', async (t) => {
  const logits = new Float32Array([1.5, -0, Number.NaN, 3.4028234663852886e38, 1e-45]);
  const message = [{ requestId: 7, isFinal: true, outputTokenIds: [[1, 2]], contextLogits: logits, vocabSize: 5 }];
  const back = decode<typeof message>(encode(message));
  t.ok(back[0]!.contextLogits instanceof Float32Array);
  t.same(new Uint8Array(back[0]!.contextLogits.buffer), new Uint8Array(logits.buffer), 'same bytes, NaN and -0 included');
  t.same(back[0]!.outputTokenIds, [[1, 2]]);
  t.equal(withRequestId(back[0]! as never, 99).requestId, 99);
});

t.test('a Float32Array inside a request (embedding bias) survives too', async (t) => {
  const bias = new Float32Array(1000).map((_, i) => i / 7);
  const back = decode<{ request: { embeddingBias: Float32Array } }>(encode({ id: 1, request: { embeddingBias: bias } }));
  t.same(Array.from(back.request.embeddingBias), Array.from(bias));
});

t.test('a request\'s LoRA tensors (Float32Array weights, Int32Array config) survive too', async (t) => {
  const lora = { taskId: 3, weights: new Float32Array([0.5, -1.25, 3]), weightsShape: [1, 3], config: new Int32Array([1, 0, 1, -7]), configShape: [1, 3] };
  const back = decode<{ request: { lora: typeof lora } }>(encode({ id: 1, request: { inputTokenIds: [1], maxTokens: 1, lora } }));
  t.ok(back.request.lora.weights instanceof Float32Array);
  t.ok(back.request.lora.config instanceof Int32Array);
  t.same(Array.from(back.request.lora.weights), [0.5, -1.25, 3]);
  t.same(Array.from(back.request.lora.config), [1, 0, 1, -7]);
  t.same(back.request.lora.weightsShape, [1, 3]);
  t.equal(back.request.lora.taskId, 3);
});
