// A request's max_attention_window_size through every frontend that takes it — KServe generate and /infer, gRPC
// ModelInfer (ensemble and tensorrt_llm), OpenAI completions and chat: a good value reaches the executor's request as
// maxAttentionWindow, 0 or none sends nothing (the server's window), and a bad one is a 400 / INVALID_ARGUMENT naming
// the field and the value before anything is enqueued. (That the engine then attends over that window is the
// executor's tests' to show.)
import t, { type Test } from 'tap';

import { readAttentionWindow } from '../../../worker/frontend/attention-window.js';
import { HttpError } from '../../../worker/frontend/http-errors.js';
import { readOpenAiParams } from '../../../worker/frontend/openai-params.js';
import { expectRefusals, fieldFrontends } from '../../helpers/field-frontends.js';
import { waitFor } from '../../helpers/serving.js';

const RULE = 'max_attention_window_size must be an integer in [1, 2147483647] (0 or absent: the server\'s window), got';
const BAD: [unknown, string][] = [[-1, '-1 (number)'], [1.5, '1.5 (number)'], ['abc', '"abc" (string)'], [true, 'true (boolean)']];

function rejects400(t: Test, fn: () => unknown, message: string): void {
  try {
    fn();
    t.fail(`expected a 400: ${message}`);
  } catch (error) {
    t.ok(error instanceof HttpError && error.status === 400 && error.param === 'max_attention_window_size', `400 naming the field (${(error as Error).message})`);
    t.equal((error as Error).message, message);
  }
}

t.test('read once for every frontend: an int32 >= 1, 0 or none for the server\'s', async (t) => {
  t.equal(readAttentionWindow(64), 64);
  t.equal(readAttentionWindow(2 ** 31 - 1), 2 ** 31 - 1, 'the largest int32');
  for (const none of [0, null, undefined]) t.equal(readAttentionWindow(none), undefined, `${String(none)}: the server's`);
  for (const [bad, shown] of [...BAD, [2 ** 31, '2147483648 (number)'], ['64', '"64" (string)'], [[64], 'an array of length 1']] as [unknown, string][]) {
    rejects400(t, () => readAttentionWindow(bad), `${RULE} ${shown}`);
  }
  t.equal(readOpenAiParams({ model: 'm', max_attention_window_size: 64 }).maxAttentionWindow, 64, 'OpenAI body field');
  t.equal(readOpenAiParams({ model: 'm' }).maxAttentionWindow, undefined);
  for (const [bad, shown] of BAD) rejects400(t, () => readOpenAiParams({ model: 'm', max_attention_window_size: bad }), `${RULE} ${shown}`);
});

t.test('through every frontend to the executor\'s request', async (t) => {
  const { seen, frontends, executor } = await fieldFrontends(t, 'max_attention_window_size');
  for (const [name, send] of frontends) {
    t.test(name, async (t) => {
      let before = seen.length;
      const good = await send(64);
      t.ok(good.ok, `64 is served ${good.message}`);
      t.equal(seen.length, before + 1, 'one request enqueued');
      t.equal(seen.at(-1)?.maxAttentionWindow, 64, 'the executor\'s request carries maxAttentionWindow 64');
      for (const none of [0, undefined]) {
        before = seen.length;
        t.ok((await send(none)).ok, `${String(none)} is served`);
        t.equal(seen.length, before + 1);
        t.notOk(seen.at(-1) && 'maxAttentionWindow' in seen.at(-1)!, `${String(none)}: nothing sent (the server's window)`);
      }
      await expectRefusals(t, send, seen, BAD, RULE);
    });
  }
  t.test('nothing left running', async (t) => {
    t.ok(await waitFor(() => executor.numActiveRequests() === 0));
  });
});
