// The OpenAI-compatible API through the official `openai` npm client: models, completions and chat, whole and
// streamed, with usage, logprobs, stop, n and seed; and errors in OpenAI's shape.
import { copyFileSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import OpenAI from 'openai';
import t from 'tap';

import { fixtureDir } from '../../helpers/fixtures.js';
import { postJson, startTestServer, waitFor } from '../../helpers/serving.js';

t.test('the official openai client', async (t) => {
  const { base, server } = await startTestServer(t);
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
  const model = 'tiny-gpt2';

  t.test('models', async (t) => {
    const list = await client.models.list();
    t.same(list.data.map((m) => m.id), [model]);
  });

  t.test('completions: whole, greedy, usage, logprobs, stop, n, seed', async (t) => {
    const r = await client.completions.create({ model, prompt: 'What is machine learning?', max_tokens: 10, temperature: 0, logprobs: 1 });
    t.equal(r.object, 'text_completion');
    t.equal(r.choices.length, 1);
    t.equal(r.choices[0]!.finish_reason, 'length');
    t.equal(r.usage?.completion_tokens, 10);
    t.ok((r.usage?.prompt_tokens ?? 0) > 0);
    t.equal(r.choices[0]!.logprobs?.token_logprobs?.length, 10, 'a logprob per token');
    t.equal(r.choices[0]!.logprobs?.tokens?.join(''), r.choices[0]!.text, 'tokens spell the text');
    const triton = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'What is machine learning?', max_tokens: 10, exclude_input_in_output: true });
    t.equal(r.choices[0]!.text, triton.json.text_output, 'temperature 0 = the greedy text of the KServe route');
    const text = r.choices[0]!.text;
    const stop = text.slice(3, 5);
    const s = await client.completions.create({ model, prompt: 'What is machine learning?', max_tokens: 10, temperature: 0, stop: [stop] });
    t.equal(s.choices[0]!.text, text.slice(0, text.indexOf(stop)), 'cut before the stop string (OpenAI leaves it out)');
    t.equal(s.choices[0]!.finish_reason, 'stop');
    const n = await client.completions.create({ model, prompt: ['Hello', 'World'], max_tokens: 4, n: 2, seed: 7, temperature: 1.5 });
    t.same(n.choices.map((c) => c.index), [0, 1, 2, 3], 'n × prompts choices');
    const again = await client.completions.create({ model, prompt: ['Hello', 'World'], max_tokens: 4, n: 2, seed: 7, temperature: 1.5 });
    t.same(again.choices.map((c) => c.text), n.choices.map((c) => c.text), 'same seed, same texts');
    const echo = await client.completions.create({ model, prompt: 'Hi', max_tokens: 2, echo: true, temperature: 0 });
    t.ok(echo.choices[0]!.text.startsWith('Hi'), 'echo');
  });

  t.test('completions: streamed chunks, usage, [DONE]', async (t) => {
    const whole = await client.completions.create({ model, prompt: 'What is machine learning?', max_tokens: 12, temperature: 0 });
    const stream = await client.completions.create({ model, prompt: 'What is machine learning?', max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let chunks = 0;
    let finish: string | null | undefined;
    let usage;
    for await (const chunk of stream) {
      chunks += 1;
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        text += c.text;
        finish = c.finish_reason ?? finish;
      }
    }
    t.ok(chunks > 2, `${chunks} chunks`);
    t.equal(text, whole.choices[0]!.text, 'streamed = whole');
    t.equal(finish, 'length');
    t.equal(usage?.completion_tokens, 12);
  });

  t.test('chat: whole and streamed, template rendered', async (t) => {
    const messages = [{ role: 'system' as const, content: 'Be brief.' }, { role: 'user' as const, content: 'What is machine learning?' }];
    const r = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0, logprobs: true });
    t.equal(r.object, 'chat.completion');
    t.equal(r.choices[0]!.message.role, 'assistant');
    t.equal(r.choices[0]!.logprobs?.content?.length, 8);
    const rendered = 'system: Be brief.\nuser: What is machine learning?\nassistant:';
    const direct = await client.completions.create({ model, prompt: rendered, max_tokens: 8, temperature: 0 });
    t.equal(r.choices[0]!.message.content, direct.choices[0]!.text, 'chat = completion of the rendered template');
    t.equal(r.usage?.prompt_tokens, direct.usage?.prompt_tokens, 'template tokenized without extra special tokens');
    const stream = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let content = '';
    let role: string | undefined;
    let finish: string | null | undefined;
    let usage;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        role ??= c.delta.role;
        content += c.delta.content ?? '';
        finish = c.finish_reason ?? finish;
      }
    }
    t.equal(role, 'assistant');
    t.equal(content, r.choices[0]!.message.content, 'streamed = whole');
    t.equal(finish, 'length');
    t.equal(usage?.completion_tokens, 8);
  });

  t.test('errors in OpenAI shape; the client sees them as APIError', async (t) => {
    try {
      await client.completions.create({ model: 'nope', prompt: 'x', max_tokens: 2 });
      t.fail('expected a 404');
    } catch (error) {
      t.ok(error instanceof OpenAI.NotFoundError, 'NotFoundError');
      t.match((error as Error).message, /The model `nope` does not exist/);
    }
    try {
      await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], max_tokens: 2, temperature: 3 });
      t.fail('expected a 400');
    } catch (error) {
      t.ok(error instanceof OpenAI.BadRequestError, 'BadRequestError');
      t.match((error as Error).message, /temperature must be a finite number in \[0, 2\], got 3/);
    }
    const r = await postJson(`${base}/v1/completions`, { model, prompt: 'x', max_tokens: 2, frobnicate: 1 });
    t.equal(r.status, 400);
    t.match(r.json, { error: { message: /unknown parameter 'frobnicate'/, type: 'BadRequestError', param: 'frobnicate', code: 400 } });
    const big = await postJson(`${base}/v1/completions`, { model, prompt: 'x', max_tokens: 100000 });
    t.equal(big.status, 400);
    t.match(big.json.error.message, /max_tokens/);
    t.ok(await waitFor(() => server.context.executor.numActiveRequests() === 0));
  });
});

t.test('a model without a chat template: a clear error', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'no-template-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const src = fixtureDir('tiny-gpt2');
  for (const f of ['config.json', 'tokenizer.json', 'generation_config.json']) copyFileSync(join(src, f), join(dir, f));
  symlinkSync(join(src, 'model.safetensors'), join(dir, 'model.safetensors'));
  const config = JSON.parse(readFileSync(join(src, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
  delete config.chat_template;
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(config));
  const { base } = await startTestServer(t, { model: dir, servedModelName: 'plain' });
  const r = await postJson(`${base}/v1/chat/completions`, { model: 'plain', messages: [{ role: 'user', content: 'hi' }] });
  t.equal(r.status, 400);
  t.match(r.json.error.message, /model 'plain' has no chat template .*use \/v1\/completions/);
  t.equal((await postJson(`${base}/v1/completions`, { model: 'plain', prompt: 'hi', max_tokens: 2 })).status, 200, 'completions still work');
});
