// The p-tuning inputs (prompt_embedding_table, prompt_vocab_size), pure: read once for every KServe frontend, with
// shapes [rows, hidden] or [1, rows, hidden], typed (binary) or JSON numbers; bad shapes, widths, counts, values and
// datatypes are 400s naming the input and the numbers. Also the facade's check of the request it builds
// (validate-request.ts). Through a real server: prompt-table-e2e.test.ts.
import t from 'tap';

import { validateRequest } from '../../../worker/executor/validate-request.js';
import { checkTensor } from '../../../worker/frontend/named-values.js';
import { checkVirtualIds, readPromptTable, virtualIds } from '../../../worker/frontend/prompt-table.js';
import { expectError } from '../../helpers/expect-error.js';
import { jsonInputs, refusal } from '../../helpers/named-inputs.js';

const values = jsonInputs;

const rows3x2 = [[1, 2], [3, 4], [5.5, -6]];

t.test('a table with and without its batch dimension, JSON or typed', async (t) => {
  t.equal(readPromptTable(values({}), 2), undefined, 'none sent');
  const a = readPromptTable(values({ prompt_embedding_table: rows3x2, prompt_vocab_size: 3 }), 2)!;
  t.same(a.shape, [3, 2]);
  t.same(Array.from(a.embeddingTable), [1, 2, 3, 4, 5.5, -6]);
  t.same(readPromptTable(values({ prompt_embedding_table: [rows3x2] }), 2)!.shape, [3, 2], '[1, rows, hidden]');
  const typed = new Map([['prompt_embedding_table', checkTensor('prompt_embedding_table', 'BF16', [1, 3, 2], Float32Array.of(1, 2, 3, 4, 5, 6))]]);
  t.equal(readPromptTable(typed, 2)!.embeddingTable, typed.get('prompt_embedding_table')!.data, 'typed rows pass as they are');
  t.same(virtualIds(100, a), [100, 101, 102]);
  t.same(virtualIds(100, undefined), []);
  t.doesNotThrow(() => checkVirtualIds([0, 99, 100, 102], 100, a, 'input_ids'));
});

t.test('refusals name the input and the numbers', async (t) => {
  const cases: [Record<string, unknown>, RegExp, string][] = [
    [{ prompt_embedding_table: [[1, 2, 3]] }, /^prompt_embedding_table rows have width 3 but must have the model's hidden_size 2/, 'prompt_embedding_table'],
    [{ prompt_embedding_table: [1, 2] }, /^prompt_embedding_table must have shape \[prompt_vocab_size, 2\] or \[1, prompt_vocab_size, 2\].*got \[2\]/, 'prompt_embedding_table'],
    [{ prompt_embedding_table: [[rows3x2], [rows3x2]] }, /got \[2, 1, 3, 2\]/, 'prompt_embedding_table'],
    [{ prompt_embedding_table: rows3x2, prompt_vocab_size: 2 }, /^prompt_vocab_size 2 does not match the 3 rows of prompt_embedding_table/, 'prompt_vocab_size'],
    [{ prompt_embedding_table: rows3x2, prompt_vocab_size: [3, 3] }, /^prompt_vocab_size must be one integer/, 'prompt_vocab_size'],
    [{ prompt_vocab_size: 3 }, /^prompt_vocab_size needs prompt_embedding_table/, 'prompt_vocab_size'],
    [{ prompt_embedding_table: [[1, 2], [3, null]] }, /^prompt_embedding_table\[1\]\[1\] must be a finite number, got null/, 'prompt_embedding_table'],
  ];
  for (const [fields, pattern, param] of cases) {
    const r = refusal(() => readPromptTable(values(fields), 2));
    t.match(r?.message, pattern);
    t.equal(r?.param, param);
  }
  const ints = new Map([['prompt_embedding_table', checkTensor('prompt_embedding_table', 'INT32', [1, 2], [1, 2])]]);
  t.match(refusal(() => readPromptTable(ints, 2))?.message, /^prompt_embedding_table must be FP16, BF16 or FP32 \(the model's data type\), got INT32/);
  const table = readPromptTable(values({ prompt_embedding_table: rows3x2 }), 2)!;
  t.match(refusal(() => checkVirtualIds([1, 103], 100, table, 'input_ids'))?.message,
    /^input_ids\[1\] = 103 is out of range \[0, 103\) \(vocab_size 100 \+ prompt_vocab_size 3/);
});

t.test("the facade's check: virtual ids need a table wide enough, of the model's width", async (t) => {
  const limits = { vocabSize: 100, maxSeqLen: 64, maxNumTokens: 64, maxBeamWidth: 1, chunkedContext: false, hiddenSize: 2 };
  const promptTuning = { embeddingTable: Float32Array.of(1, 2, 3, 4), shape: [2, 2] };
  t.doesNotThrow(() => validateRequest({ inputTokenIds: [1, 100, 101], maxTokens: 2, promptTuning }, limits));
  expectError(t, () => validateRequest({ inputTokenIds: [1, 102], maxTokens: 2, promptTuning }, limits), 'invalid_argument',
    /inputTokenIds\[1\] must be an integer in \[0, 102\) \(vocab_size 100 \+ prompt_vocab_size 2\), got 102/);
  expectError(t, () => validateRequest({ inputTokenIds: [1, 100], maxTokens: 2 }, limits), 'invalid_argument',
    /inputTokenIds\[1\] must be an integer in \[0, 100\) \(vocab_size\)/);
  expectError(t, () => validateRequest({ inputTokenIds: [1], maxTokens: 2, promptTuning: { ...promptTuning, shape: [1, 4] } }, limits),
    'invalid_argument', /promptTuning.shape \[1, 4\]: rows must have the model's hidden_size 2/);
  expectError(t, () => validateRequest({ inputTokenIds: [1], maxTokens: 2, promptTuning: { ...promptTuning, shape: [3, 2] } }, limits),
    'invalid_argument', /promptTuning.shape \[3, 2\] holds 6 values, the array 4/);
  expectError(t, () => validateRequest({ inputTokenIds: [1], maxTokens: 2, promptTuning: { embeddingTable: [1, 2], shape: [1, 2] } }, limits),
    'invalid_argument', /promptTuning.embeddingTable must be a Float32Array/);
});
