// Tool calls as the official `openai` client reads them, whole and streamed: message.tool_calls with ids, parsed
// arguments, finish_reason "tool_calls", content before a call, malformed calls as content, parallel calls, forced
// calls read from inside the block, n > 1 and logprobs. The model's output is scripted (the executor's enqueue is
// replaced by one that answers with the tokens of a given text), so this tests the frontend alone.
import OpenAI from 'openai';
import t from 'tap';

import type { NativeRequest } from '../../../../worker/binding/addon-types.js';
import { RequestHandle } from '../../../../worker/executor/request-handle.js';
import { startTestServer } from '../../../helpers/serving.js';

const model = 'tiny-gpt2';
const weather = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };
const tools: OpenAI.Chat.ChatCompletionFunctionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: weather, strict: true } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {}, additionalProperties: false }, strict: true } },
];
const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
const CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';

t.test('tool calls through the official client', async (t) => {
  const { base, server } = await startTestServer(t);
  const executor = server.context.executor;
  const tokenizer = server.context.tokenizer;
  const original = executor.enqueue.bind(executor);
  let script: string[] = [];            // the text each choice answers, in enqueue order (the last one repeats)
  const requests: NativeRequest[] = [];
  let nextId = 1_000_000;
  executor.enqueue = (request: NativeRequest) => {
    requests.push(request);
    const text = script.length > 1 ? script.shift()! : script[0]!;
    const ids = tokenizer.encode(text, { addSpecialTokens: false });
    const handle = new RequestHandle(nextId++, () => {});
    const send = (from: number) => {
      const chunk = ids.slice(from, from + 3);
      const isFinal = from + 3 >= ids.length;
      handle.push({
        requestId: handle.id, isFinal, outputTokenIds: [chunk], logProbs: [chunk.map(() => -0.5)],
        ...(isFinal ? { finishReasons: ['end_id' as const] } : {}),
      });
      if (!isFinal) setImmediate(() => send(from + 3));
    };
    setImmediate(() => send(0));
    return handle;
  };
  t.teardown(() => { executor.enqueue = original; });
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
  const answer = (...texts: string[]) => { script = texts; requests.length = 0; };

  t.test('auto: text before a call, the call parsed; streamed = whole', async (t) => {
    answer(`Let me look.\n${CALL}`);
    const r = await client.chat.completions.parse({ model, messages, tools, max_tokens: 64 });
    const choice = r.choices[0]!;
    t.equal(choice.finish_reason, 'tool_calls');
    t.equal(choice.message.content, 'Let me look.');
    const call = choice.message.tool_calls![0]!;
    t.match(call, { type: 'function', id: /^call_[0-9a-f]{24}$/, function: { name: 'get_weather', arguments: '{"city":"Paris"}' } });
    t.same(call.type === 'function' && call.function.parsed_arguments, { city: 'Paris' }, "the client's parsed_arguments");
    t.equal(requests[0]!.guidedDecoding, undefined, 'auto: unconstrained');
    answer(`Let me look.\n${CALL}`);
    const stream = client.chat.completions.stream({ model, messages, tools, max_tokens: 64 });
    const deltas: OpenAI.Chat.ChatCompletionChunk.Choice.Delta.ToolCall[] = [];
    stream.on('chunk', (chunk) => { for (const c of chunk.choices) deltas.push(...(c.delta.tool_calls ?? [])); });
    const final = await stream.finalChatCompletion();
    t.equal(final.choices[0]!.finish_reason, 'tool_calls');
    t.equal(final.choices[0]!.message.content, 'Let me look.');
    const streamed = final.choices[0]!.message.tool_calls![0]!;
    t.same(streamed.type === 'function' && [streamed.function.name, streamed.function.arguments, streamed.function.parsed_arguments], ['get_weather', '{"city":"Paris"}', { city: 'Paris' }]);
    t.match(deltas[0], { index: 0, id: /^call_/, type: 'function', function: { name: 'get_weather', arguments: '' } }, 'the first delta of a call: id, type, name');
    t.match(deltas[1], { index: 0, function: { arguments: '{"city":"Paris"}' } }, 'then its arguments');
  });

  t.test('several calls; parallel_tool_calls false keeps the first', async (t) => {
    const two = `${CALL}\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>`;
    answer(two);
    const r = await client.chat.completions.create({ model, messages, tools, max_tokens: 64 });
    t.same(r.choices[0]!.message.tool_calls!.map((c) => c.type === 'function' && c.function.name), ['get_weather', 'get_time']);
    t.equal(r.choices[0]!.message.content, null, 'only calls: content null');
    t.not(r.choices[0]!.message.tool_calls![0]!.id, r.choices[0]!.message.tool_calls![1]!.id, 'ids differ');
    answer(two);
    const one = await client.chat.completions.create({ model, messages, tools, max_tokens: 64, parallel_tool_calls: false });
    t.equal(one.choices[0]!.message.tool_calls!.length, 1);
    answer(two);
    const final = await client.chat.completions.stream({ model, messages, tools, max_tokens: 64 }).finalChatCompletion();
    t.same(final.choices[0]!.message.tool_calls!.map((c) => c.type === 'function' && c.function.name), ['get_weather', 'get_time'], 'streamed: index 0 and 1');
  });

  t.test('a malformed call is content, finish_reason "stop"; no tools: no parsing', async (t) => {
    const broken = '<tool_call>\n{"name": "get_weather", "arguments": {"city": \n</tool_call>';
    answer(broken);
    const r = await client.chat.completions.create({ model, messages, tools, max_tokens: 64 });
    t.same([r.choices[0]!.message.content, r.choices[0]!.message.tool_calls, r.choices[0]!.finish_reason], [broken, undefined, 'stop']);
    answer(broken);
    let text = '';
    let finish: string | null | undefined;
    for await (const chunk of await client.chat.completions.create({ model, messages, tools, max_tokens: 64, stream: true })) {
      for (const c of chunk.choices) { text += c.delta.content ?? ''; finish = c.finish_reason ?? finish; t.notOk(c.delta.tool_calls, 'no tool deltas'); }
    }
    t.same([text, finish], [broken, 'stop'], 'streamed: the same text');
    answer(CALL);
    const plain = await client.chat.completions.create({ model, messages, max_tokens: 64 });
    t.same([plain.choices[0]!.message.content, plain.choices[0]!.finish_reason], [CALL, 'stop'], 'without tools the text is the answer');
    answer(CALL);
    const none = await client.chat.completions.create({ model, messages, tools, tool_choice: 'none', max_tokens: 64 });
    t.equal(none.choices[0]!.message.content, CALL, 'tool_choice none: no parsing');
    t.notOk(tokenizer.decode(requests[0]!.inputTokenIds).includes('get_weather'), 'tool_choice none: the template does not see the tools');
    const json = `{"note": "${CALL.replaceAll('"', '\\"').replaceAll('\n', '\\n')}"}`;
    answer(json);
    const formatted = await client.chat.completions.create({ model, messages, tools, response_format: { type: 'json_object' }, max_tokens: 64 });
    t.same([formatted.choices[0]!.message.content, formatted.choices[0]!.finish_reason], [json, 'stop'], 'auto + response_format: the formatted answer is content');
  });

  t.test('required and named: the prompt ends with the opener, the constrained JSON is read as the call', async (t) => {
    answer('{"name": "get_weather", "arguments": {"city": "Paris"}}');
    const r = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', max_tokens: 64 });
    t.ok(tokenizer.decode(requests[0]!.inputTokenIds).endsWith('<tool_call>\n'), 'opener in the prompt');
    t.equal(requests[0]!.guidedDecoding?.guideType, 'json_schema');
    t.match(r.choices[0]!, { finish_reason: 'tool_calls', message: { content: null, tool_calls: [{ function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] } });
    answer('{"name": "get_time", "arguments": {}}');
    const named = await client.chat.completions.stream({ model, messages, tools, tool_choice: { type: 'function', function: { name: 'get_time' } }, max_tokens: 64 }).finalChatCompletion();
    t.match(named.choices[0]!, { finish_reason: 'tool_calls', message: { tool_calls: [{ function: { name: 'get_time', arguments: '{}' } }] } });
    answer('{"name": "get_weather", "argu');
    const cut = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', max_tokens: 64 });
    t.same([cut.choices[0]!.message.content, cut.choices[0]!.finish_reason], ['{"name": "get_weather", "argu', 'stop'], 'a payload cut short comes back as the text');
  });

  t.test('n > 1 and logprobs with tools', async (t) => {
    answer(CALL, 'No call here.');
    const r = await client.chat.completions.create({ model, messages, tools, n: 2, max_tokens: 64, temperature: 1, seed: 1, logprobs: true });
    const byIndex = [...r.choices].sort((a, b) => a.index - b.index);
    t.same(byIndex.map((c) => c.finish_reason), ['tool_calls', 'stop']);
    t.equal(byIndex[1]!.message.content, 'No call here.');
    t.equal(byIndex[0]!.logprobs?.content?.length, tokenizer.encode(CALL, { addSpecialTokens: false }).length, 'a logprob per token, calls included');
    answer(CALL);
    let count = 0;
    for await (const chunk of await client.chat.completions.create({ model, messages, tools, max_tokens: 64, logprobs: true, stream: true })) {
      for (const c of chunk.choices) count += c.logprobs?.content?.length ?? 0;
    }
    t.equal(count, tokenizer.encode(CALL, { addSpecialTokens: false }).length, 'streamed: held-back tokens keep their logprobs');
  });

  t.test('a conversation with an earlier call and its result renders and runs', async (t) => {
    answer('It is 18 degrees.');
    const r = await client.chat.completions.create({
      model, tools, max_tokens: 16,
      messages: [...messages, { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: '18 C' }],
    });
    t.equal(r.choices[0]!.message.content, 'It is 18 degrees.');
    const bad = await client.chat.completions.create({
      model, max_tokens: 4, messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: 'not json' } }] }],
    }).then(() => undefined, (e: unknown) => e);
    t.ok(bad instanceof OpenAI.BadRequestError, 'arguments that are not JSON: 400');
    t.match((bad as Error).message, /messages\[0\]\.tool_calls\[0\]\.function\.arguments must be a JSON object as text/);
  });
});
