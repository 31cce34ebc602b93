// The pure pieces of the text path: word-list parsing, stop strings on text, UTF-8-safe incremental
// detokenization, the text-interface mapping and tensor stacking.
import t from 'tap';

import { loadTokenizer } from '../../../worker/tokenizer.js';
import { IncrementalDetokenizer } from '../../../worker/frontend/detokenizer.js';
import { HttpError } from '../../../worker/frontend/http-errors.js';
import { stackOutputs } from '../../../worker/frontend/kserve-encode.js';
import { fromJsonField, fromKserveTensor } from '../../../worker/frontend/named-values.js';
import { StopStringMatcher } from '../../../worker/frontend/stop-strings.js';
import { readTextParams, textNativeRequest } from '../../../worker/frontend/text-params.js';
import { parseWordList, parseWordTensor, toWordTensor } from '../../../worker/frontend/word-lists.js';
import { fixtureDir } from '../../helpers/fixtures.js';

function throws400(t: { ok(v: unknown, m: string): unknown; fail(m: string): unknown }, fn: () => unknown, pattern: RegExp): void {
  try {
    fn();
    t.fail(`expected a 400 matching ${pattern}`);
  } catch (error) {
    t.ok(error instanceof HttpError && error.status === 400 && pattern.test(error.message), `${pattern} (${(error as Error).message})`);
  }
}

t.test('stop/bad words: string, comma list, JSON list (as string or array)', async (t) => {
  t.same(parseWordList('', 'stop_words'), []);
  t.same(parseWordList('Hello', 'stop_words'), ['Hello']);
  t.same(parseWordList('a, b,,c', 'stop_words'), ['a', ' b', 'c'], 'spaces kept, empty items dropped');
  t.same(parseWordList('["x,y", " z"]', 'stop_words'), ['x,y', ' z']);
  t.same(parseWordList(['p', 'q'], 'stop_words'), ['p', 'q']);
  throws400(t, () => parseWordList(3, 'bad_words'), /bad_words must be a string.*got 3 \(number\)/);
  throws400(t, () => parseWordList('[1, 2', 'stop_words'), /stop_words looks like a JSON list/);
  throws400(t, () => parseWordList(['a', 1], 'stop_words'), /stop_words\[1\] must be a string/);
  const tensor = toWordTensor([[5, 6], [7]]);
  t.same(tensor, { shape: [2, 3], data: [5, 6, 7, 2, 3, -1] }, "Triton's [2, N] layout");
  t.same(parseWordTensor(tensor.data, tensor.shape, 'stop_words_list'), [[5, 6], [7]], 'round trip');
  t.same(parseWordTensor([0, -1], [2, 1], 'stop_words_list'), [], 'all -1: no words');
});

t.test('stop strings hold back partial matches and cut at the first match', async (t) => {
  const m = new StopStringMatcher(['STOP'], false);
  t.same(m.push('abc S'), { emit: 'abc ', stopped: false }, 'holds back a possible start');
  t.same(m.push('T'), { emit: '', stopped: false });
  t.same(m.push('x'), { emit: 'STx', stopped: false }, 'released when it cannot match');
  t.same(m.push('yySTO'), { emit: 'yy', stopped: false });
  t.same(m.push('Pzz'), { emit: '', stopped: true }, 'OpenAI style: the stop string is left out');
  const triton = new StopStringMatcher(['\n\n', 'END'], true);
  t.same(triton.push('one\n'), { emit: 'one', stopped: false });
  t.same(triton.push('\ntwo'), { emit: '\n\n', stopped: true }, 'Triton style: the stop word is kept');
  const none = new StopStringMatcher([], false);
  t.same(none.push('abc'), { emit: 'abc', stopped: false });
  const held = new StopStringMatcher(['xyz'], false);
  held.push('ab x');
  t.equal(held.flush(), 'x', 'flush releases held text at the end');
});

t.test('incremental detokenization equals a full decode and never emits broken UTF-8', async (t) => {
  for (const model of ['tiny-gpt2', 'tiny-llama']) {
    const tok = loadTokenizer(fixtureDir(model));
    const texts = ['Hello world, héllo 日本語 🙂 and  two  spaces', ' leading space', 'naïve café — ok?\nnew line'];
    for (const text of texts) {
      const prompt = tok.encode('Say:');
      const ids = tok.encode(text, { addSpecialTokens: false });
      for (const step of [1, 2, 3]) {
        const d = new IncrementalDetokenizer(tok, prompt);
        let out = '';
        for (let i = 0; i < ids.length; i += step) {
          const piece = d.push(ids.slice(i, i + step));
          t.notOk(piece.includes('\uFFFD'), `no replacement char mid-stream (${model}, step ${step})`);
          out += piece;
        }
        out += d.flush();
        t.equal(out, tok.decode(ids), `${model} step ${step}: ${JSON.stringify(text)}`);
      }
    }
  }
});

t.test('text interface: fields map onto TensorRT-LLM semantics, bad values name the field', async (t) => {
  const values = (o: Record<string, unknown>) => new Map(Object.entries(o).map(([k, v]) => [k, fromJsonField(k, v)]));
  const [p] = readTextParams(values({
    text_input: 'hi', max_tokens: 5, top_k: 0, top_p: 0, temperature: 0.7, random_seed: 3, min_length: 2,
    repetition_penalty: 1.1, presence_penalty: 0.5, frequency_penalty: 0.2, length_penalty: 1, beam_width: 1,
    stop_words: 'a,b', bad_words: '["c"]', return_log_probs: true, exclude_input_in_output: true,
  }), 64);
  t.same(p!.sampling, { temperature: 0.7, lengthPenalty: 1, repetitionPenalty: 1.1, presencePenalty: 0.5, frequencyPenalty: 0.2, minTokens: 2, seed: 3, beamWidth: 1 }, 'top_k/top_p 0 are off');
  t.same([p!.stopWords, p!.badWords, p!.returnLogProbs, p!.excludeInput], [['a', 'b'], ['c'], true, true]);
  const batch = readTextParams(values({ text_input: ['a', 'b'], max_tokens: [3, 4] }), 64);
  t.same(batch.map((b) => b.maxTokens), [3, 4], 'per-element values');
  throws400(t, () => readTextParams(values({ max_tokens: 3 }), 64), /text_input is required/);
  throws400(t, () => readTextParams(values({ text_input: 'a' }), 64), /max_tokens is required/);
  throws400(t, () => readTextParams(values({ text_input: 'a', max_tokens: 0 }), 64), /max_tokens must be an integer >= 1, got 0 \(number\)/);
  throws400(t, () => readTextParams(values({ text_input: 'a', max_tokens: 2, top_p: 1.5 }), 64), /top_p must be a finite number in \[0, 1\], got 1.5/);
  throws400(t, () => readTextParams(values({ text_input: 'a', max_tokens: 2, temperature: 'hot' }), 64), /temperature .* got "hot" \(string\)/);
  throws400(t, () => readTextParams(values({ text_input: ['a', 'b', 'c'], max_tokens: [1, 2] }), 64), /max_tokens must hold 1 value or one per batch element \(3\), got 2/);
  throws400(t, () => readTextParams(values({ text_input: 7, max_tokens: 2 }), 64), /text_input must be a string, got 7/);
});

t.test('text interface: max_attention_window_size reaches the executor request; bad values name it and the value', async (t) => {
  const values = (o: Record<string, unknown>) => new Map(Object.entries(o).map(([k, v]) => [k, fromJsonField(k, v)]));
  const read = (window: unknown) => readTextParams(values({ text_input: 'hi', max_tokens: 2, max_attention_window_size: window }), 64)[0]!;
  const request = (window: unknown) => textNativeRequest(read(window), [5, 6], new Map(), { endId: 0, padId: 0 }, false);
  t.equal(request(64).maxAttentionWindow, 64, 'passed on');
  t.notOk('maxAttentionWindow' in request(0), '0: the server\'s window, not sent');
  t.notOk('maxAttentionWindow' in textNativeRequest(readTextParams(values({ text_input: 'hi', max_tokens: 2 }), 64)[0]!, [5], new Map(), { endId: 0, padId: 0 }, false), 'absent: not sent');
  const batch = readTextParams(values({ text_input: ['a', 'b'], max_tokens: 2, max_attention_window_size: [16, 32] }), 64);
  t.same(batch.map((p) => p.maxAttentionWindow), [16, 32], 'one per batch element');
  const rule = 'max_attention_window_size must be an integer in \\[1, 2147483647\\] \\(0 or absent: the server\'s window\\), got';
  for (const [bad, shown] of [[-1, '-1 \\(number\\)'], [1.5, '1\\.5 \\(number\\)'], ['abc', '"abc" \\(string\\)'], [true, 'true \\(boolean\\)'], [2 ** 31, '2147483648 \\(number\\)']] as const) {
    throws400(t, () => read(bad), new RegExp(`^${rule} ${shown}$`));
  }
});

t.test('KServe tensors are checked; stacking pads ragged elements', async (t) => {
  t.same(fromKserveTensor({ name: 'x', datatype: 'INT32', shape: [2, 2], data: [[1, 2], [3, 4]] }, 0), ['x', { shape: [2, 2], data: [1, 2, 3, 4], datatype: 'INT32' }]);
  throws400(t, () => fromKserveTensor({ name: 'x', datatype: 'INT32', shape: [3], data: [1, 2] }, 0), /shape \[3\] needs 3 elements, data has 2/);
  throws400(t, () => fromKserveTensor({ name: 'x', datatype: 'INT32', shape: [1], data: [1.5] }, 0), /element 0 is 1.5 \(number\), not a INT32/);
  throws400(t, () => fromKserveTensor({ name: 'x', datatype: 'FLOAT', shape: [1], data: [1] }, 0), /datatype must be one of/);
  throws400(t, () => fromJsonField('input_ids', [[1, 2], [3]]), /input_ids must be a rectangular array/);
  const stacked = stackOutputs([
    [{ name: 'output_ids', datatype: 'INT32', shape: [1, 3], data: [1, 2, 3], pad: -1 }],
    [{ name: 'output_ids', datatype: 'INT32', shape: [1, 1], data: [9], pad: -1 }],
  ]);
  t.same(stacked, [{ name: 'output_ids', datatype: 'INT32', shape: [2, 1, 3], data: [1, 2, 3, 9, -1, -1] }]);
});

t.test('byte-level fast path: the same text as the library decode, token by token', async (t) => {
  const { byteLevelTokenBytes, ByteLevelDetokenizer } = await import('../../../worker/frontend/byte-level.js');
  const table = byteLevelTokenBytes(fixtureDir('tiny-gpt2'));
  t.ok(table, 'the fixtures use byte-level BPE');
  const tok = loadTokenizer(fixtureDir('tiny-gpt2'));
  for (const text of ['Hello world, héllo 日本語 🙂', ' two  spaces\nand a newline', 'naïve café']) {
    const ids = [...tok.encode(text, { addSpecialTokens: false }), tok.eosTokenId!];
    const d = new ByteLevelDetokenizer(table!);
    let out = '';
    for (const id of ids) {
      const piece = d.push([id]);
      t.notOk(piece.includes('\uFFFD'), 'never a broken character');
      out += piece;
    }
    out += d.flush();
    t.equal(out, tok.decode(ids), JSON.stringify(text));
  }
});
