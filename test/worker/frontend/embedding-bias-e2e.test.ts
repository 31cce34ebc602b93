// A request's bias over the vocabulary through every interface, on the tiny GPT-2 fixture over real HTTP: OpenAI's
// logit_bias, tensorrt_llm's embedding_bias tensor, and the seeds' embedding_bias_words / embedding_bias_weights on
// ensemble, tensorrt_llm_bls and preprocessing. What each must do is read off the model's own unbiased logits: a
// +100 bias makes that token every greedy choice, and a -100 bias on the greedy token leaves the runner-up; bad
// inputs are 400s naming the field, with the KV cache left free.
import t from 'tap';

import { loadTokenizer } from '../../../worker/tokenizer.js';
import { fixtureDir } from '../../helpers/fixtures.js';
import { localExecutor, postJson, startTestServer, waitFor } from '../../helpers/serving.js';

const VOCAB = 512;

t.test('embedding bias over HTTP', async (t) => {
  const { base, server } = await startTestServer(t);
  const executor = localExecutor(server);
  const tok = loadTokenizer(fixtureDir('tiny-gpt2'));
  const prompt = tok.encode('The quick brown fox', { addSpecialTokens: false });
  const trt = (body: Record<string, unknown>) => postJson(`${base}/v2/models/tensorrt_llm/generate`, { input_ids: prompt, ...body });

  // The unbiased greedy run and its first step's logits: the greedy token and the runner-up (lowest id on a tie).
  const plain = await trt({ request_output_len: 3, return_generation_logits: true, exclude_input_in_output: true });
  t.equal(plain.status, 200);
  const first = (plain.json.generation_logits as unknown[]).flat(3).slice(0, VOCAB) as number[];
  const greedy = plain.json.output_ids[0] as number;
  t.equal(first.indexOf(Math.max(...first)), greedy, 'the greedy token is the first step\'s argmax');
  let second = greedy === 0 ? 1 : 0;
  first.forEach((v, id) => { if (id !== greedy && v > first[second]!) second = id; });
  const forced = (greedy + 7) % VOCAB;

  t.test("tensorrt_llm's embedding_bias", async (t) => {
    const push = new Array<number>(VOCAB).fill(0);
    push[forced] = 100;
    const r = await trt({ request_output_len: 4, embedding_bias: push, exclude_input_in_output: true });
    t.equal(r.status, 200);
    t.same(r.json.output_ids, [forced, forced, forced, forced], '+100 on one token: every greedy choice');
    const ban = new Array<number>(VOCAB).fill(0);
    ban[greedy] = -100;
    const b = await trt({ request_output_len: 1, embedding_bias: ban, exclude_input_in_output: true });
    t.same(b.json.output_ids, [second], '-100 on the greedy token: the runner-up');
    const zeros = await trt({ request_output_len: 3, embedding_bias: new Array<number>(VOCAB).fill(0), exclude_input_in_output: true });
    t.same(zeros.json.output_ids, plain.json.output_ids, 'an all-zero bias changes nothing');
    const wrong = await trt({ request_output_len: 1, embedding_bias: [1, 2, 3] });
    t.equal(wrong.status, 400);
    t.match(wrong.json.error, /embedding_bias must have shape \[512\] \(vocab_size\) or \[1, 512\], got \[3\]/);
  });

  t.test("OpenAI's logit_bias, completions and chat", async (t) => {
    const c = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt, max_tokens: 4, temperature: 0, logit_bias: { [forced]: 100 } });
    t.equal(c.status, 200);
    t.equal(c.json.choices[0].text, tok.decode([forced, forced, forced, forced]), '+100: that token four times');
    const b = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt, max_tokens: 1, temperature: 0, logit_bias: { [greedy]: -100 } });
    t.equal(b.json.choices[0].text, tok.decode([second]), '-100 on the greedy token: the runner-up');
    const n = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt, max_tokens: 2, n: 2, temperature: 0.7, seed: 3, logit_bias: { [forced]: 100 } });
    t.same(n.json.choices.map((x: { text: string }) => x.text), [tok.decode([forced, forced]), tok.decode([forced, forced])], 'every sampled choice: +100 dominates');
    const chat = await postJson(`${base}/v1/chat/completions`, { model: 'tiny-gpt2', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, temperature: 0, logit_bias: { [forced]: 100 } });
    t.equal(chat.status, 200);
    t.equal(chat.json.choices[0].message.content, tok.decode([forced, forced, forced]), 'chat: the same');
    for (const [bias, pattern] of [
      [{ 512: 1 }, /logit_bias key "512" must be a token id in \[0, 512\) \(vocab_size\)/],
      [{ 5: 101 }, /logit_bias\["5"\] must be a number in \[-100, 100\], got 101/],
      [{ tok: 1 }, /logit_bias key "tok" must be a token id/],
      [[1], /logit_bias must be an object/],
    ] as const) {
      const r = await postJson(`${base}/v1/completions`, { model: 'tiny-gpt2', prompt, max_tokens: 2, logit_bias: bias });
      t.equal(r.status, 400);
      t.match(r.json.error.message, pattern);
      t.equal(r.json.error.param, 'logit_bias');
    }
  });

  t.test("the seeds' embedding_bias_words and embedding_bias_weights", async (t) => {
    const word = ' fox';
    const ids = tok.encode(word, { addSpecialTokens: false });
    const pre = await postJson(`${base}/v2/models/preprocessing/infer`, { inputs: [
      { name: 'QUERY', datatype: 'BYTES', shape: [1, 1], data: ['The quick brown'] },
      { name: 'REQUEST_OUTPUT_LEN', datatype: 'INT32', shape: [1, 1], data: [4] },
      { name: 'EMBEDDING_BIAS_WORDS', datatype: 'BYTES', shape: [1], data: [word] },
      { name: 'EMBEDDING_BIAS_WEIGHTS', datatype: 'FP32', shape: [1], data: [100] },
    ] });
    t.equal(pre.status, 200);
    const bias = pre.json.outputs.find((o: { name: string }) => o.name === 'EMBEDDING_BIAS').data as number[];
    t.equal(bias.length, VOCAB, 'preprocessing: EMBEDDING_BIAS over the vocabulary');
    t.same(bias.flatMap((v, id) => (v !== 0 ? [id] : [])), [...new Set(ids)].sort((a, b) => a - b), 'non-zero exactly at the word\'s tokens');
    // The same bias through the token model and the text model: the same greedy continuation.
    const viaTokens = await trt({ request_output_len: 4, embedding_bias: bias, exclude_input_in_output: true });
    t.ok((viaTokens.json.output_ids as number[]).every((id) => ids.includes(id)), 'every token is one of the word\'s');
    for (const model of ['ensemble', 'tensorrt_llm_bls']) {
      const r = await postJson(`${base}/v2/models/${model}/generate`, {
        text_input: 'The quick brown fox', max_tokens: 4, exclude_input_in_output: true,
        embedding_bias_words: [word], embedding_bias_weights: [100],
      });
      t.equal(r.status, 200);
      t.equal(r.json.text_output, tok.decode(viaTokens.json.output_ids), `${model}: the text of the biased token run`);
    }
    const noPre = await postJson(`${base}/v2/models/preprocessing/infer`, { inputs: [
      { name: 'QUERY', datatype: 'BYTES', shape: [1, 1], data: ['The'] },
      { name: 'REQUEST_OUTPUT_LEN', datatype: 'INT32', shape: [1, 1], data: [4] },
    ] });
    t.same(noPre.json.outputs.find((o: { name: string }) => o.name === 'EMBEDDING_BIAS'), { name: 'EMBEDDING_BIAS', datatype: 'FP32', shape: [1, 0], data: [] }, 'no words: an empty bias');
    const mismatch = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'The', max_tokens: 2, embedding_bias_words: ['a', 'b'], embedding_bias_weights: [1] });
    t.equal(mismatch.status, 400);
    t.match(mismatch.json.error, /embedding_bias_weights has 1 value\(s\) but embedding_bias_words has 2 word\(s\); give one weight per word/);
    const alone = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'The', max_tokens: 2, embedding_bias_weights: [1] });
    t.match(alone.json.error, /embedding_bias_weights needs embedding_bias_words/);
  });

  t.test('the KV cache is free after all of it', async (t) => {
    t.ok(await waitFor(() => { const s = executor.kvCacheStats(); return s.freeNumBlocks === s.maxNumBlocks && executor.numActiveRequests() === 0; }));
  });
});
