// Requests the executor refuses when they are enqueued (a value past the model's limits that only the engine
// checks, a full queue), alone or after earlier choices, prompts or rows of the same request were queued: the client
// gets the status and a message naming the field in its own terms, the earlier ones stop, and the metrics count the
// request as failed instead of leaving it pending.
import t from 'tap';

import { leftPending, localExecutor, metricValue, postJson, startTestServer, waitFor } from '../../helpers/serving.js';

t.test('a value only the engine checks: a 400 naming the client\'s field, and nothing left pending', async (t) => {
  const { base, metricsBase, server } = await startTestServer(t);
  const executor = localExecutor(server);
  const failures = () => metricValue(metricsBase, 'nv_inference_request_failure', { model: 'tiny-gpt2' });
  const before = await failures();
  const completion = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt: 'Hi', max_tokens: 1e9 });
  t.equal(completion.status, 400);
  t.match(completion.json.error.message, /^max_tokens must be an integer in \[1, \d+\] \(max_seq_len\), got 1000000000 \(number\)/);
  t.equal(completion.json.error.param, 'max_tokens', 'OpenAI\'s param names the field');
  const chat = await postJson(`${base}/v1/chat/completions`, { model: 'tiny-gpt2', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1e9 });
  t.equal(chat.status, 400);
  t.equal(chat.json.error.param, 'max_tokens');
  const generate = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'Hi', max_tokens: 1e9 });
  t.equal(generate.status, 400);
  t.match(generate.json.error, /^max_tokens must be an integer in \[1, \d+\]/);
  t.equal(await failures(), before + 2, 'both OpenAI requests counted as failed');
  t.same((await leftPending(metricsBase)).pending, [], 'no model has a request pending');
  t.equal(executor.numActiveRequests(), 0);
});

t.test('a full queue refuses a later choice, prompt or row: the earlier ones are cancelled, nothing left pending', async (t) => {
  const { base, metricsBase, server } = await startTestServer(t, { maxQueueSize: 1, maxBatchSize: 2 });
  const executor = localExecutor(server);
  // Held before any iteration: each request's first sequence fills the queue of one and its second is refused.
  executor.holdIterations(0);
  const choices = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt: 'Hi', n: 2, max_tokens: 4 });
  t.equal(choices.status, 503);
  t.match(choices.json.error.message, /Maximum queue size of 1 has been reached/);
  t.ok(await waitFor(() => executor.numActiveRequests() === 0), 'the first choice was cancelled');
  const prompts = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: ['a', 'b'], max_tokens: 4 });
  t.equal(prompts.status, 503);
  t.ok(await waitFor(() => executor.numActiveRequests() === 0), 'the first prompt was cancelled');
  const rows = await postJson(`${base}/v2/models/tensorrt_llm/infer`, { inputs: [
    { name: 'input_ids', datatype: 'INT32', shape: [2, 2], data: [1, 2, 1, 2] },
    { name: 'request_output_len', datatype: 'INT32', shape: [2, 1], data: [4, 4] },
  ] });
  t.equal(rows.status, 503);
  t.ok(await waitFor(() => executor.numActiveRequests() === 0), 'the first row was cancelled');
  t.same((await leftPending(metricsBase)).pending, [], 'no model has a request pending');
  executor.holdIterations(-1);
  const one = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt: 'Hi', max_tokens: 2 });
  t.equal(one.status, 200, 'still serving');
  t.ok(await waitFor(() => executor.kvCacheStats().freeNumBlocks === executor.kvCacheStats().maxNumBlocks), 'KV all free');
  t.same((await leftPending(metricsBase)).pending, []);
});
