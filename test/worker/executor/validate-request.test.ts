// Pure tests of request validation: each bad input is rejected with its field and value named.
import t, { type Test } from 'tap';

import { expectError } from '../../helpers/expect-error.js';
import { type RequestLimits, validateRequest } from '../../../worker/executor/validate-request.js';

const limits: RequestLimits = { vocabSize: 512, maxSeqLen: 256, maxNumTokens: 128, maxBeamWidth: 1, chunkedContext: false };
const ok = { inputTokenIds: [1, 2, 3], maxTokens: 4 };

function rejects(t: Test, request: unknown, pattern: RegExp, name: string): void {
  expectError(t, () => validateRequest(request, limits), 'invalid_argument', pattern, name);
}

t.test('a valid request passes unchanged', async (t) => {
  t.same(validateRequest(ok, limits), ok);
  t.same(validateRequest({ ...ok, sampling: { temperature: 0.7, topK: 5, topP: 0.9, seed: 3 }, output: { returnLogProbs: true } }, limits).sampling,
    { temperature: 0.7, topK: 5, topP: 0.9, seed: 3 });
});

t.test('bad inputs name the field and the value', async (t) => {
  rejects(t, { ...ok, inputTokenIds: [] }, /inputTokenIds is empty/, 'empty prompt');
  rejects(t, { ...ok, inputTokenIds: [1, 512] }, /inputTokenIds\[1\].*\[0, 512\).*512 \(number\)/, 'token id = vocab');
  rejects(t, { ...ok, inputTokenIds: [1, -1] }, /inputTokenIds\[1\]/, 'negative token id');
  rejects(t, { ...ok, inputTokenIds: 'abc' }, /inputTokenIds must be an array.*"abc" \(string\)/, 'prompt not an array');
  rejects(t, { ...ok, maxTokens: 0 }, /maxTokens must be an integer in \[1, 256\].*got 0/, 'max_tokens 0');
  rejects(t, { ...ok, maxTokens: -5 }, /maxTokens.*got -5/, 'max_tokens negative');
  rejects(t, { ...ok, maxTokens: 1.5 }, /maxTokens.*got 1\.5/, 'max_tokens fractional');
  rejects(t, { ...ok, maxTokens: 300 }, /maxTokens.*\[1, 256\]/, 'max_tokens beyond limit');
  rejects(t, { inputTokenIds: new Array(200).fill(5), maxTokens: 100 }, /prompt length 200 \+ maxTokens 100 = 300 exceeds max_seq_len 256/, 'prompt + output too long');
  rejects(t, { inputTokenIds: new Array(129).fill(5), maxTokens: 1 }, /prompt length 129 exceeds max_num_tokens 128/, 'prompt beyond max_num_tokens');
  rejects(t, { ...ok, sampling: { temperature: Number.NaN } }, /sampling.temperature must be a finite number >= 0, got NaN/, 'NaN temperature');
  rejects(t, { ...ok, sampling: { temperature: -1 } }, /sampling.temperature.*got -1/, 'negative temperature');
  rejects(t, { ...ok, sampling: { topP: 0 } }, /sampling.topP must be a finite number in \(0, 1\], got 0/, 'top_p 0');
  rejects(t, { ...ok, sampling: { topP: 1.5 } }, /sampling.topP.*got 1\.5/, 'top_p above 1');
  rejects(t, { ...ok, sampling: { topK: -1 } }, /sampling.topK must be an integer >= 0, got -1/, 'top_k negative');
  rejects(t, { ...ok, sampling: { beamWidth: 4 } }, /sampling.beamWidth.*\[1, 1\].*got 4/, 'beam width above max');
  rejects(t, { ...ok, temperature: 0.5 }, /unknown parameter 'temperature'/, 'unknown top-level parameter');
  rejects(t, { ...ok, sampling: { topq: 1 } }, /unknown parameter 'sampling.topq'/, 'unknown sampling parameter');
  rejects(t, { ...ok, output: { logits: true } }, /unknown parameter 'output.logits'/, 'unknown output parameter');
  rejects(t, { ...ok, output: { returnLogProbs: 'yes' } }, /output.returnLogProbs must be a boolean/, 'non-boolean flag');
  rejects(t, { ...ok, endId: 600 }, /endId.*600/, 'end id out of vocab');
  rejects(t, { ...ok, stopWords: [[]] }, /stopWords\[0\] is empty/, 'empty stop word');
  rejects(t, null, /a request must be an object, got null/, 'null request');
});

t.test('maxAttentionWindow: an int32 >= 0 (0: the executor\'s), passed on as given', async (t) => {
  t.same(validateRequest({ ...ok, maxAttentionWindow: 64 }, limits), { ...ok, maxAttentionWindow: 64 });
  t.same(validateRequest({ ...ok, maxAttentionWindow: 0 }, limits), { ...ok, maxAttentionWindow: 0 }, '0: the executor\'s window');
  t.ok(validateRequest({ ...ok, maxAttentionWindow: 2 ** 31 - 1 }, limits), 'the largest int32');
  const range = 'maxAttentionWindow must be an integer in \\[0, 2147483647\\] \\(0: the executor\'s\\), got';
  rejects(t, { ...ok, maxAttentionWindow: -1 }, new RegExp(`${range} -1 \\(number\\)`), 'negative');
  rejects(t, { ...ok, maxAttentionWindow: 1.5 }, new RegExp(`${range} 1\\.5 \\(number\\)`), 'fractional');
  rejects(t, { ...ok, maxAttentionWindow: 'abc' }, new RegExp(`${range} "abc" \\(string\\)`), 'a string');
  rejects(t, { ...ok, maxAttentionWindow: true }, new RegExp(`${range} true \\(boolean\\)`), 'a boolean');
  rejects(t, { ...ok, maxAttentionWindow: 2 ** 31 }, new RegExp(`${range} 2147483648 \\(number\\)`), 'past int32');
});

t.test('decoding parameters: penalties, words, embedding bias, beams, logits cap', async (t) => {
  const beams: RequestLimits = { ...limits, maxBeamWidth: 4, maxLogitsElements: 4096 };
  const reject = (request: unknown, pattern: RegExp, name: string): void => {
    expectError(t, () => validateRequest(request, beams), 'invalid_argument', pattern, name);
  };
  const bias = new Array(512).fill(0);
  t.ok(validateRequest({ ...ok, embeddingBias: bias, numReturnSequences: 2, sampling: { beamWidth: 2, minTokens: 4 } }, beams), 'a valid beam request passes');
  t.ok(validateRequest({ ...ok, embeddingBias: new Float32Array(512) }, beams), 'a Float32Array bias passes');
  reject({ ...ok, sampling: { beamWidth: 5 } }, /sampling.beamWidth must be an integer in \[1, 4\] \(max_beam_width\), got 5/, 'beam width names max_beam_width');
  reject({ ...ok, sampling: { repetitionPenalty: 0 } }, /sampling.repetitionPenalty must be a finite number > 0, got 0/, 'repetition penalty 0');
  reject({ ...ok, sampling: { presencePenalty: Infinity } }, /sampling.presencePenalty must be a finite number/, 'presence penalty inf');
  reject({ ...ok, sampling: { frequencyPenalty: Number.NaN } }, /sampling.frequencyPenalty must be a finite number/, 'frequency penalty NaN');
  reject({ ...ok, sampling: { lengthPenalty: -Infinity } }, /sampling.lengthPenalty must be a finite number/, 'length penalty -inf');
  reject({ ...ok, sampling: { minTokens: 5 } }, /sampling.minTokens must be an integer in \[0, maxTokens 4\], got 5/, 'min tokens above max tokens');
  reject({ ...ok, sampling: { minTokens: -1 } }, /sampling.minTokens.*got -1/, 'min tokens negative');
  reject({ ...ok, badWords: [[1], []] }, /badWords\[1\] is empty/, 'empty bad word');
  reject({ ...ok, badWords: [[1, 512]] }, /badWords\[0\]\[1\].*\[0, 512\)/, 'bad word token out of vocab');
  reject({ ...ok, stopWords: [[-1]] }, /stopWords\[0\]\[0\]/, 'stop word token negative');
  reject({ ...ok, embeddingBias: [1, 2] }, /embeddingBias has 2 values but must have vocab_size 512/, 'bias length');
  reject({ ...ok, embeddingBias: [...bias.slice(1), Number.NaN] }, /embeddingBias\[511\] must be a finite number, got NaN/, 'bias NaN');
  reject({ ...ok, embeddingBias: 'x' }, /embeddingBias must be an array of numbers or a Float32Array/, 'bias type');
  reject({ ...ok, numReturnSequences: 3, sampling: { beamWidth: 2 } }, /numReturnSequences must be an integer in \[0, beamWidth 2\].*got 3/, 'more sequences than beams');
  reject({ ...ok, numReturnSequences: 2 }, /numReturnSequences.*\[0, beamWidth 1\]/, 'sequences without beams');
  reject({ ...ok, maxTokens: 4, sampling: { beamWidth: 4 }, output: { returnGenerationLogits: true } },
    /returnGenerationLogits: beam_width 4 x maxTokens 4 x vocab_size 512 = 8192 values exceeds max_logits_elements 4096/, 'generation logits cap');
  reject({ inputTokenIds: new Array(9).fill(1), maxTokens: 1, output: { returnContextLogits: true } },
    /returnContextLogits: prompt length 9 x vocab_size 512 = 4608 values exceeds max_logits_elements 4096/, 'context logits cap');
});

t.test('guidedDecoding: its shape is checked here, naming the field (the guide itself where it is compiled)', async (t) => {
  t.ok(validateRequest({ ...ok, guidedDecoding: { guideType: 'json' } }, limits), 'json needs no guide');
  t.ok(validateRequest({ ...ok, guidedDecoding: { guideType: 'regex', guide: 'a+' } }, limits), 'a regex guide passes');
  rejects(t, { ...ok, guidedDecoding: 'json' }, /guidedDecoding must be an object, got "json" \(string\)/, 'not an object');
  rejects(t, { ...ok, guidedDecoding: { guideType: 'xml', guide: '<a/>' } }, /guidedDecoding\.guideType must be one of json, json_schema, regex, ebnf_grammar, got "xml"/, 'unknown type');
  rejects(t, { ...ok, guidedDecoding: { guideType: 'json_schema' } }, /guidedDecoding\.guide is required for guideType json_schema/, 'missing guide');
  rejects(t, { ...ok, guidedDecoding: { guideType: 'regex', guide: 5 } }, /guidedDecoding\.guide must be a string, got 5/, 'guide not a string');
  rejects(t, { ...ok, guidedDecoding: { guideType: 'json', schema: '{}' } }, /unknown parameter 'guidedDecoding\.schema'/, 'unknown key');
  const beams: RequestLimits = { ...limits, maxBeamWidth: 2 };
  expectError(t, () => validateRequest({ ...ok, sampling: { beamWidth: 2 }, guidedDecoding: { guideType: 'json' } }, beams), 'invalid_argument',
    /guidedDecoding cannot be combined with beam search \(sampling\.beamWidth 2\)/, 'with beams');
});
