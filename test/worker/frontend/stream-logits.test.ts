// Logits on a stream: the context logits arrive once, with the first tokens, and each event carries the
// generation logits of its own tokens; together they equal the non-streaming response's.
import t from 'tap';

import { referenceCases } from '../../helpers/fixtures.js';
import { postJson, postSse, startTestServer } from '../../helpers/serving.js';

t.test('tensorrt_llm generate_stream returns context and generation logits', async (t) => {
  const { base } = await startTestServer(t, {});
  const c = referenceCases('tiny-gpt2')[0]!;
  const body = { input_ids: c.input_ids, request_output_len: 5, return_context_logits: true, return_generation_logits: true };
  const whole = await postJson(`${base}/v2/models/tensorrt_llm/generate`, body);
  t.equal(whole.status, 200);
  const { status, events } = await postSse(`${base}/v2/models/tensorrt_llm/generate_stream`, body);
  t.equal(status, 200);
  const withContext = events.filter((e) => e.context_logits !== undefined);
  t.equal(withContext.length, 1, 'context logits exactly once');
  t.same(withContext[0].context_logits, whole.json.context_logits, 'the same context logits as without streaming');
  const generation = events.flatMap((e) => (e.generation_logits ?? []).flat());
  t.same(generation, whole.json.generation_logits.flat(), 'per-event generation logits add up to the whole');
});
