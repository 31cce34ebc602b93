// The bench's multi-turn traffic, pure: seeded conversations, prompts that grow by each answer, shared system
// prompts, lengths, refused option values, the per-turn summary and table; and the runner's turn order against an
// in-process fake target (no server, no timing: the order in which it saw sends and answers).
import t from 'tap';

import { type ConversationTraffic, multiTurnConversations, playConversation, type TurnRequest } from '../../../launcher/bench-command/conversations.js';
import { runConversations } from '../../../launcher/bench-command/runner.js';
import type { BenchRequest } from '../../../launcher/bench-command/sources.js';
import { mean } from '../../../launcher/bench-command/statistics.js';
import { type RequestRecord, summarize, summarizeTurns } from '../../../launcher/bench-command/summary.js';
import { report, turnsTable } from '../../../launcher/bench-command/table.js';
import type { BenchTarget } from '../../../launcher/bench-command/targets.js';

const traffic = (o: Partial<ConversationTraffic> = {}): ConversationTraffic => ({
  numConversations: 7, numTurns: 4, systemPromptLen: 12, conversationsPerSystemPrompt: 3,
  inputMean: 10, inputStdev: 0, outputMean: 5, outputStdev: 0, vocabSize: 100, seed: 3, ...o,
});

/** Plays every conversation with made-up answers (answer of a turn: outputLen copies of 1000 + turn). */
async function play(d: ConversationTraffic): Promise<TurnRequest[][]> {
  const sentGroups = new Set<number>();
  const out: TurnRequest[][] = [];
  for (const c of multiTurnConversations(d)) {
    const turns: TurnRequest[] = [];
    await playConversation(c, sentGroups, async (turn) => {
      turns.push(turn);
      return Array.from({ length: turn.outputLen }, () => 1000 + turn.turn);
    });
    out.push(turns);
  }
  return out;
}

t.test('seeded: the same seed gives the same conversations, another seed others', async (t) => {
  const a = multiTurnConversations(traffic());
  t.same(a, multiTurnConversations(traffic()));
  t.notSame(a, multiTurnConversations(traffic({ seed: 4 })));
  t.same(await play(traffic()), await play(traffic()), 'and the same prompts, turn by turn');
});

t.test("turn k's prompt is turn k-1's prompt, its answer, then the new user message", async (t) => {
  const d = traffic();
  const conversations = multiTurnConversations(d);
  const played = await play(d);
  for (const [i, turns] of played.entries()) {
    const c = conversations[i]!;
    t.equal(turns.length, 4);
    t.same(turns[0]!.inputIds, [...c.systemPrompt, ...c.turns[0]!.user], `conversation ${i}: system prompt + first message`);
    for (let k = 1; k < turns.length; k += 1) {
      const previous = [...turns[k - 1]!.inputIds, ...Array.from({ length: turns[k - 1]!.outputLen }, () => 1000 + k - 1)];
      t.same(turns[k]!.inputIds.slice(0, previous.length), previous, `conversation ${i} turn ${k}: starts with turn ${k - 1} and its answer`);
      t.same(turns[k]!.inputIds.slice(previous.length), c.turns[k]!.user, 'then its own user message, nothing else');
      t.equal(turns[k]!.newInputTokens, 10, 'new: only the user message');
      t.same([turns[k]!.conversation, turns[k]!.turn, turns[k]!.outputLen], [i, k, 5]);
    }
  }
  // First turns: the system prompt is new only for the first conversation of its group to send it.
  t.same(played.map((turns) => turns[0]!.newInputTokens), [22, 10, 10, 22, 10, 10, 22]);

  // A failed turn ends its conversation: nothing after it is asked.
  const asked: number[] = [];
  const sent = await playConversation(conversations[0]!, new Set(), async (turn) => {
    asked.push(turn.turn);
    return turn.turn === 1 ? undefined : [7];
  });
  t.same([sent, asked], [2, [0, 1]]);
});

t.test('system prompts: shared exactly within the groups asked, distinct across them', async (t) => {
  const c = multiTurnConversations(traffic());
  t.same(c.map((x) => x.systemPromptGroup), [0, 0, 0, 1, 1, 1, 2], '3 per group, the last group shorter');
  for (const x of c) {
    t.equal(x.systemPrompt.length, 12);
    for (const y of c) {
      if (x.systemPromptGroup === y.systemPromptGroup) t.same(x.systemPrompt, y.systemPrompt);
      else t.notSame(x.systemPrompt, y.systemPrompt, `conversations ${x.index} and ${y.index}: different groups`);
    }
  }
  const all = multiTurnConversations(traffic({ conversationsPerSystemPrompt: undefined }));
  t.ok(all.every((x) => x.systemPromptGroup === 0 && x.systemPrompt === all[0]!.systemPrompt), 'default: one for all');
  const alone = multiTurnConversations(traffic({ conversationsPerSystemPrompt: 1 }));
  t.same(alone.map((x) => x.systemPromptGroup), [0, 1, 2, 3, 4, 5, 6], 'one each');
  const none = multiTurnConversations(traffic({ systemPromptLen: 0, conversationsPerSystemPrompt: undefined }));
  t.ok(none.every((x) => x.systemPrompt.length === 0), 'length 0: no system prompt');
  t.same((await play(traffic({ systemPromptLen: 0, conversationsPerSystemPrompt: undefined }))).map((x) => x[0]!.newInputTokens), [10, 10, 10, 10, 10, 10, 10]);
});

t.test('lengths: exact at stdev 0, at least 1 and around the mean otherwise, ids within the vocabulary', async (t) => {
  for (const c of multiTurnConversations(traffic())) t.ok(c.turns.every((x) => x.user.length === 10 && x.outputLen === 5));
  const spread = multiTurnConversations(traffic({ numConversations: 200, numTurns: 10, inputMean: 3, inputStdev: 4, outputMean: 2, outputStdev: 3 }));
  const turns = spread.flatMap((c) => c.turns);
  t.ok(turns.every((x) => x.user.length >= 1 && x.outputLen >= 1), 'never below 1 token');
  t.ok(turns.some((x) => x.user.length > 3) && turns.some((x) => x.user.length === 1), 'they do vary');
  const wide = multiTurnConversations(traffic({ numConversations: 100, numTurns: 20, inputMean: 40, inputStdev: 5 })).flatMap((c) => c.turns);
  t.ok(Math.abs(mean(wide.map((x) => x.user.length)) - 40) < 0.5, `mean user message ${mean(wide.map((x) => x.user.length))}`);
  t.ok(spread.every((c) => [...c.systemPrompt, ...c.turns.flatMap((x) => x.user)].every((id) => Number.isInteger(id) && id >= 0 && id < 100)));
});

t.test('bad values are refused, naming the option and the value', async (t) => {
  const bad: [Partial<ConversationTraffic>, RegExp][] = [
    [{ numConversations: 0 }, /^--num-conversations must be an integer >= 1, got 0$/],
    [{ numTurns: 1.5 }, /^--num-turns must be an integer >= 1, got 1\.5$/],
    [{ systemPromptLen: -1 }, /^--system-prompt-len must be an integer >= 0, got -1$/],
    [{ conversationsPerSystemPrompt: 0 }, /^--conversations-per-system-prompt must be an integer >= 1, got 0$/],
    [{ systemPromptLen: 0, conversationsPerSystemPrompt: 2 }, /^--conversations-per-system-prompt 2 needs a system prompt: pass --system-prompt-len/],
    [{ inputMean: 0 }, /^--input-mean must be a number >= 1, got 0$/],
    [{ inputStdev: -2 }, /^--input-stdev must be a number >= 0, got -2$/],
    [{ outputMean: Number.NaN }, /^--output-mean must be a number >= 1, got NaN$/],
    [{ outputStdev: -1 }, /^--output-stdev must be a number >= 0, got -1$/],
    [{ vocabSize: 0 }, /^--vocab-size must be an integer >= 1, got 0$/],
  ];
  for (const [o, message] of bad) t.throws(() => multiTurnConversations(traffic(o)), { name: 'ToolError', message }, JSON.stringify(o));
});

const rec = (turn: number, ttft: number, input: number, fresh: number, ok = true): RequestRecord => ({
  ok, inputTokens: input, outputTokens: ok ? 2 : 0, startMs: 0, endMs: ttft + 1, chunkTimesMs: ok ? [ttft, ttft + 1] : [],
  conversation: 0, turn, newInputTokens: fresh, ...(ok ? {} : { error: 'boom' }),
});

t.test('per-turn summary: first against later turns, new against reusable prompt tokens, and its table', async (t) => {
  const records = [rec(0, 10, 20, 20), rec(0, 30, 20, 8), rec(1, 4, 40, 10), rec(1, 6, 40, 10), rec(2, 8, 60, 10), rec(2, 0, 60, 10, false)];
  const m = summarizeTurns(records, 3, 3);
  t.match(m, {
    num_conversations: 3, turns_per_conversation: 3, unsent_turns: 3,
    first_turn_p50_ttft_ms: 20, first_turn_p90_ttft_ms: 28, later_turns_p50_ttft_ms: 6, later_turns_p90_ttft_ms: 7.6,
    new_input_tokens: 58, reusable_input_tokens: 180 - 58,
  });
  t.equal(m.reusable_input_fraction, (180 - 58) / 180);
  t.same(m.turns.map((x) => [x.turn, x.requests, x.failed_requests, x.avg_input_tokens, x.avg_new_input_tokens, x.p50_ttft_ms]),
    [[1, 2, 0, 20, 14, 20], [2, 2, 0, 40, 10, 5], [3, 2, 1, 60, 10, 8]]);
  const table = turnsTable(m).split('\n');
  t.equal(table[1], '| Turn              | Requests | Failed | Avg. IP tokens | Avg. new IP tokens | TTFT P50 (ms) | TTFT P90 (ms) |');
  t.equal(table[3], '| Turn 1            | 2        | 0      |          20.00 |              14.00 |         20.00 |         28.00 |');
  t.equal(table[6], '| Later turns (2-3) | 4        | 1      |          46.67 |              10.00 |          6.00 |          7.60 |');
  const text = report(summarize(records), m);
  t.match(text, /\[INFO\] Multi-turn: 3 conversations x 3 turns, 3 turns not sent \(their conversation had a failed turn\)\n\+/);
  t.match(text, /\[INFO\] Prompt tokens: 180, new: 58; a perfect prefix cache skips 122 \(67\.8%\)\n\[INFO\] Successful requests: 5, failed requests: 1/);
});

/** A fake target that answers each request with [prompt length] after yielding to the loop, and logs what it saw. */
function fakeTarget(failAt?: (r: BenchRequest) => boolean): { target: BenchTarget; log: string[]; inFlight: { max: number } } {
  const log: string[] = [];
  const inFlight = { now: 0, max: 0 };
  const target: BenchTarget = {
    where: 'fake', vocabSize: 100, codec: undefined as never, liveness: async () => undefined, close: async () => {},
    async send(request, onTokens) {
      const r = request as TurnRequest;
      log.push(`send c${r.conversation} t${r.turn}`);
      inFlight.now += 1;
      inFlight.max = Math.max(inFlight.max, inFlight.now);
      await new Promise((resolve) => setImmediate(resolve));
      inFlight.now -= 1;
      if (failAt?.(request)) {
        log.push(`fail c${r.conversation} t${r.turn}`);
        throw new Error('refused');
      }
      onTokens(1);
      log.push(`answer c${r.conversation} t${r.turn}`);
      return [request.inputIds.length];
    },
  };
  return { target, log, inFlight };
}

t.test('runner: turns of a conversation one after the other, conversations side by side, --concurrency holds', async (t) => {
  const conversations = multiTurnConversations(traffic({ numConversations: 4, numTurns: 3 }));
  const { target, log, inFlight } = fakeTarget();
  const progress: string[] = [];
  const records = await runConversations(target, conversations, [], { arrivalsMs: [0, 0, 0, 0], concurrency: 2, warmup: 0,
    onProgress: (done, total) => progress.push(`${done}/${total}`) });
  t.equal(records.length, 12);
  t.equal(inFlight.max, 2, 'at most 2 in flight, and 2 at once: conversations overlap');
  for (let c = 0; c < 4; c += 1) {
    for (let k = 1; k < 3; k += 1) {
      t.ok(log.indexOf(`send c${c} t${k}`) > log.indexOf(`answer c${c} t${k - 1}`), `c${c}: turn ${k} sent after turn ${k - 1}'s answer`);
    }
  }
  t.equal(progress.at(-1), '12/12');
  t.ok(records.every((r) => r.ok && r.conversation !== undefined && r.turn !== undefined && r.newInputTokens !== undefined));

  // A refused turn ends its conversation; the others go on; the progress still reaches the total.
  const failing = fakeTarget((r) => (r as TurnRequest).conversation === 1 && (r as TurnRequest).turn === 1);
  const progress2: string[] = [];
  const partial = await runConversations(failing.target, conversations, [], { arrivalsMs: [0, 0, 0, 0], concurrency: undefined, warmup: 0,
    onProgress: (done, total) => progress2.push(`${done}/${total}`) });
  t.equal(partial.length, 11, 'c1 t2 never sent');
  t.notOk(failing.log.includes('send c1 t2'));
  t.equal(partial.filter((r) => !r.ok).length, 1);
  t.equal(progress2.at(-1), '12/12');
  t.equal(summarizeTurns(partial, 4, 3).unsent_turns, 1);
});
