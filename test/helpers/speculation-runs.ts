// What the speculative-decoding tests (prompt lookup, draft model, Medusa heads) do alike: a batch of prompts
// through an executor — every request at once, the prompt left out of the output, one of them sampled with a seed —
// giving each request's tokens and the iteration stats' counts; and prompts through two servers, whose texts must
// be equal.
import type { Test } from 'tap';

import type { Executor } from '../../worker/executor/executor.js';
import type { TextTokenizer } from '../../worker/tokenizer.js';
import { postJson } from './serving.js';

export interface SpeculationRun {
  tokens: number[][];
  steps: number;      // the iterations each request took part in, summed over the requests
  drafted: number;    // guesses checked
  accepted: number;   // guesses kept
  best: number;       // the most tokens an iteration gained per request
}

export interface RunShape {
  maxTokens: number;
  streaming: boolean;
  /** The request drawn by sampling (temperature 0.8, top-p 0.9, this seed); the others are greedy. */
  sampled?: { index: number; seed: number };
}

export async function runPrompts(executor: Executor, tokenizer: TextTokenizer, prompts: readonly string[], shape: RunShape): Promise<SpeculationRun> {
  const requests = prompts.map(async (text, k) => {
    const handle = executor.enqueue({
      inputTokenIds: tokenizer.encode(text), maxTokens: shape.maxTokens, streaming: shape.streaming, output: { excludeInputFromOutput: true },
      ...(k === shape.sampled?.index ? { sampling: { temperature: 0.8, topP: 0.9, seed: shape.sampled.seed } } : {}),
    });
    const ids: number[] = [];
    for await (const r of handle) ids.push(...(r.outputTokenIds?.[0] ?? []));
    return ids;
  });
  const tokens = await Promise.all(requests);
  const stats = executor.iterationStats();
  return {
    tokens,
    steps: stats.reduce((n, s) => n + s.inflightBatchingStats.numGenRequests + s.inflightBatchingStats.numContextRequests, 0),
    drafted: stats.reduce((n, s) => n + s.specDecodingStats.numDraftTokens, 0),
    accepted: stats.reduce((n, s) => n + s.specDecodingStats.numAcceptedTokens, 0),
    best: Math.max(...stats.map((s) => s.inflightBatchingStats.avgNumDecodedTokensPerIter)),
  };
}

/** Each prompt through the ensemble of two servers (one without speculation, one with): the same text, asserted. */
export async function expectSameText(t: Test, plainBase: string, specBase: string, prompts: readonly string[], maxTokens: number): Promise<void> {
  for (const prompt of prompts) {
    const body = { text_input: prompt, max_tokens: maxTokens };
    const a = await postJson(`${plainBase}/v2/models/ensemble/generate`, body);
    const b = await postJson(`${specBase}/v2/models/ensemble/generate`, body);
    t.equal(a.status, 200);
    t.equal(b.status, 200);
    t.equal(b.json.text_output, a.json.text_output, `"${prompt}": the same text`);
  }
}
