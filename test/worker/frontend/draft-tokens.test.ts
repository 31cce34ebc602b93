// A request's num_draft_tokens (the seeds' tensorrt_llm_bls input) through every frontend that takes it — KServe
// generate and /infer, gRPC ModelInfer (ensemble and tensorrt_llm), OpenAI completions and chat: a value in [0, 64]
// reaches the executor's request as numDraftTokens (0 too: it turns speculation off), none sends nothing (the
// server's --speculative-ngram), and a bad one is a 400 / INVALID_ARGUMENT naming the field and the value before
// anything is enqueued. (What the engine does with it: native/test/executor-speculative and
// test/worker/executor/executor-speculative.)
import t from 'tap';

import { readDraftTokens } from '../../../worker/frontend/draft-tokens.js';
import { HttpError } from '../../../worker/frontend/http-errors.js';
import { readOpenAiParams } from '../../../worker/frontend/openai-params.js';
import { validateRequest } from '../../../worker/executor/validate-request.js';
import { expectRefusals, fieldFrontends } from '../../helpers/field-frontends.js';
import { waitFor } from '../../helpers/serving.js';

const RULE = 'num_draft_tokens must be an integer in [0, 64] (0: no speculation; absent: the server\'s --speculative-ngram), got';
const BAD: [unknown, string][] = [[-1, '-1 (number)'], [65, '65 (number)'], [2.5, '2.5 (number)'], ['4', '"4" (string)'], [true, 'true (boolean)']];

t.test('read once for every frontend: an integer in [0, 64], none for the server\'s', async (t) => {
  for (const n of [0, 1, 64]) t.equal(readDraftTokens(n), n);
  for (const none of [null, undefined]) t.equal(readDraftTokens(none), undefined, `${String(none)}: the server's`);
  for (const [bad, shown] of BAD) {
    let error: unknown;
    try {
      readDraftTokens(bad);
    } catch (e) {
      error = e;
    }
    t.ok(error instanceof HttpError && error.status === 400 && error.param === 'num_draft_tokens', `${shown}: a 400 naming the field`);
    t.equal((error as Error | undefined)?.message, `${RULE} ${shown}`);
  }
  t.equal(readOpenAiParams({ model: 'm', num_draft_tokens: 3 }).numDraftTokens, 3, 'OpenAI body field');
  t.equal(readOpenAiParams({ model: 'm' }).numDraftTokens, undefined);
  const limits = { vocabSize: 100, maxSeqLen: 64, maxNumTokens: 64, maxBeamWidth: 1, chunkedContext: false };
  t.throws(() => validateRequest({ inputTokenIds: [1], maxTokens: 2, numDraftTokens: 65 }, limits), /numDraftTokens must be .*in \[0, 64\].*got 65/);
});

t.test('use_draft_logits (ensemble / tensorrt_llm_bls): false or absent runs, true is refused with the reason', async (t) => {
  const { seen, frontends } = await fieldFrontends(t, 'use_draft_logits');
  const ensemble = frontends.find(([name]) => name === 'generate (ensemble)')![1];
  const before = seen.length;
  t.ok((await ensemble(false)).ok, 'false is served');
  t.equal(seen.length, before + 1);
  const r = await ensemble(true);
  t.notOk(r.ok);
  t.match(r.message, /^use_draft_logits must be false or absent, got true \(boolean\): guesses here are single tokens/);
  t.equal(seen.length, before + 1, 'nothing enqueued');
});

t.test('through every frontend to the executor\'s request', async (t) => {
  const { seen, frontends, executor } = await fieldFrontends(t, 'num_draft_tokens');
  for (const [name, send] of frontends) {
    t.test(name, async (t) => {
      for (const n of [3, 0]) {
        const before = seen.length;
        const good = await send(n);
        t.ok(good.ok, `${n} is served ${good.message}`);
        t.equal(seen.length, before + 1, 'one request enqueued');
        t.equal(seen.at(-1)?.numDraftTokens, n, `the executor's request carries numDraftTokens ${n}`);
      }
      const before = seen.length;
      t.ok((await send(undefined)).ok, 'none is served');
      t.equal(seen.length, before + 1);
      t.notOk(seen.at(-1) && 'numDraftTokens' in seen.at(-1)!, 'none: nothing sent (the server\'s)');
      await expectRefusals(t, send, seen, BAD, RULE);
    });
  }
  t.test('nothing left running', async (t) => {
    t.ok(await waitFor(() => executor.numActiveRequests() === 0));
  });
});
