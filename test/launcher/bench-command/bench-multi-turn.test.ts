// `trtllm-launch bench multi-turn` against a real server (tiny-gpt2 on the CPU), through a recording proxy that
// logs, in the order it saw them, each generate_stream request (its input_ids) and the end of its answer (the
// output_ids it carried): every later turn's prompt is an earlier turn's prompt plus that turn's real answer, and was
// sent only after that answer had ended — checked by order, never by timing. The report has the per-turn figures.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { type AddressInfo } from 'node:net';
import { join } from 'node:path';

import { execa } from 'execa';
import t from 'tap';

import { type BenchOptions, runBench } from '../../../launcher/bench-command/bench-run.js';
import { packageRoot } from '../../../worker/common/package-root.js';
import { fixtureDir } from '../../helpers/fixtures.js';
import { parseSse, startTestServer } from '../../helpers/serving.js';

const bin = join(packageRoot(), 'bin', 'trtllm-launch.js');

type Seen = { kind: 'request'; id: number; inputIds: number[] } | { kind: 'answered'; id: number; outputIds: number[] };

const bodyOf = async (req: IncomingMessage) => {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
};

/** Forwards everything to `upstream`, streaming answers back; logs generate_stream requests and their answers' ends. */
async function recordingProxy(t: { teardown(fn: () => unknown): void }, upstream: string): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  let next = 0;
  const server: Server = createServer((req, res) => {
    void (async () => {
      const body = await bodyOf(req);
      const generate = req.url!.endsWith('/generate_stream');
      const id = next++;
      if (generate) seen.push({ kind: 'request', id, inputIds: (JSON.parse(body.toString()) as { input_ids: number[] }).input_ids });
      const answer = await fetch(`${upstream}${req.url}`, {
        method: req.method!, ...(body.length > 0 ? { body, headers: { 'content-type': 'application/json' } } : {}),
      });
      res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' });
      let text = '';
      for await (const chunk of answer.body!) {
        text += Buffer.from(chunk).toString();
        res.write(chunk);
      }
      // Logged before the client can see the end: a request sent because of this answer is logged after it.
      if (generate) seen.push({ kind: 'answered', id, outputIds: parseSse(text).flatMap((e: { output_ids?: unknown[] }) => (e.output_ids ?? []).flat(Infinity) as number[]) });
      res.end();
    })().catch((error: Error) => { res.destroy(error); });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise((r) => server.close(r)));
  return { url: `127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

function options(url: string, o: Partial<BenchOptions> = {}): BenchOptions {
  return {
    url, protocol: 'http', offline: false, model: fixtureDir('tiny-gpt2'), numRequests: 100, arrivals: 'exponential',
    warmupRequests: 1, inputMean: 6, inputStdev: 2, outputMean: 4, outputStdev: 1, numConversations: 3, numTurns: 3,
    systemPromptLen: 8, conversationsPerSystemPrompt: 2, seed: 5, endId: -1, json: false, perfTolerance: 0.1, progress: false, ...o,
  };
}

const startsWith = (a: number[], prefix: number[]) => prefix.length <= a.length && prefix.every((x, i) => a[i] === x);

t.test('3 conversations x 3 turns: each turn carries the previous turn and its real answer, sent after that answer', async (t) => {
  const { base } = await startTestServer(t);
  const proxy = await recordingProxy(t, base);
  const lines: string[] = [];
  const result = await runBench('multi-turn', options(proxy.url), { out: (l) => lines.push(l), info: (l) => lines.push(l) });

  const requests = proxy.seen.filter((s) => s.kind === 'request');
  const answers = new Map(proxy.seen.flatMap((s) => (s.kind === 'answered' ? [[s.id, s.outputIds] as const] : [])));
  const at = (kind: Seen['kind'], id: number) => proxy.seen.findIndex((s) => s.kind === kind && s.id === id);
  t.equal(requests.length, 1 + 9, 'one warm-up request, then 3 x 3 turns');
  const [warmup, ...turns] = requests;
  // Each turn's predecessor: the request whose prompt + answer its own prompt starts with (the longest such).
  const previous = new Map<number, number>();
  for (const r of turns) {
    const candidates = turns.filter((p) => p.id !== r.id && startsWith(r.inputIds, [...p.inputIds, ...answers.get(p.id)!]));
    if (candidates.length > 0) previous.set(r.id, candidates.sort((a, b) => b.inputIds.length - a.inputIds.length)[0]!.id);
  }
  const firsts = turns.filter((r) => !previous.has(r.id));
  t.equal(firsts.length, 3, 'three first turns');
  t.equal(previous.size, 6, 'six later turns, each continuing an earlier one');
  for (const first of firsts) {
    const chain = [first.id];
    for (let id: number | undefined = first.id; id !== undefined;) {
      id = [...previous.entries()].find(([, p]) => p === id)?.[0];
      if (id !== undefined) chain.push(id);
    }
    t.equal(chain.length, 3, `conversation from request ${first.id}: 3 turns in a row`);
    for (let k = 1; k < chain.length; k += 1) {
      t.ok(at('request', chain[k]!) > at('answered', chain[k - 1]!), `turn ${k + 1} (request ${chain[k]}) sent after turn ${k}'s answer ended`);
      t.equal(answers.get(chain[k - 1]!)!.length > 0, true, 'that answer had tokens');
    }
  }
  // The system prompt (8 tokens): the first two conversations share one, the third has its own.
  const systemOf = (r: (typeof turns)[number]) => r.inputIds.slice(0, 8).join(',');
  t.equal(new Set(firsts.map(systemOf)).size, 2, 'two system prompts among three conversations');
  t.notOk(firsts.some((f) => startsWith(warmup!.inputIds, f.inputIds.slice(0, 8))), 'the warm-up shares no prefix with them');

  t.match(result.summary, { total_requests: 9, successful_requests: 9, failed_requests: 0 });
  const m = result.turns!;
  t.match(m, { num_conversations: 3, turns_per_conversation: 3, unsent_turns: 0 });
  t.same(m.turns.map((x) => [x.turn, x.requests, x.failed_requests]), [[1, 3, 0], [2, 3, 0], [3, 3, 0]]);
  for (const key of ['first_turn_p50_ttft_ms', 'first_turn_p90_ttft_ms', 'later_turns_p50_ttft_ms', 'later_turns_p90_ttft_ms'] as const) {
    t.ok(m[key] > 0, `${key} ${m[key]}`);
  }
  const promptTokens = turns.reduce((a, r) => a + r.inputIds.length, 0);
  t.equal(result.summary.input_tokens, promptTokens, 'prompt tokens: what the server was sent');
  // New tokens: each turn's user message, plus a system prompt the first time it was sent (twice: two groups).
  const userTokens = turns.reduce((a, r) => a + r.inputIds.length - (previous.has(r.id) ? (() => {
    const p = turns.find((x) => x.id === previous.get(r.id))!;
    return p.inputIds.length + answers.get(p.id)!.length;
  })() : 8), 0);
  t.equal(m.new_input_tokens, userTokens + 2 * 8);
  t.equal(m.reusable_input_tokens, promptTokens - m.new_input_tokens);

  const text = lines.join('\n');
  t.match(text, /\[INFO\] Start benchmarking on 3 conversations of 3 turns\./);
  t.match(text, /\[INFO\] Multi-turn: 3 conversations x 3 turns\n/);
  t.match(text, /\| Turn 1 +\| 3 +\| 0 +\| +[\d.]+ \| +[\d.]+ \| +[\d.]+ \| +[\d.]+ \|/);
  t.match(text, /\| Later turns \(2-3\) +\| 6 +\| 0 +\|/);
  t.match(text, new RegExp(`\\[INFO\\] Prompt tokens: ${promptTokens}, new: ${m.new_input_tokens}; a perfect prefix cache skips ${m.reusable_input_tokens} \\(`));
});

t.test('the command line: multi-turn --json carries the per-turn fields; bad values are refused by name', async (t) => {
  const { base } = await startTestServer(t);
  const r = await execa('node', [bin, 'bench', 'multi_turn', '-u', base.replace('http://', ''), '--num-conversations', '2', '--num-turns', '2',
    '--system-prompt-len', '4', '--input-mean', '5', '--output-mean', '3', '--concurrency', '1', '--json', '--no-progress'], { reject: false });
  t.equal(r.exitCode, 0, r.stderr);
  const json = JSON.parse(r.stdout) as Record<string, unknown>;
  t.match(json, { source: 'multi-turn', total_requests: 4, successful_requests: 4, num_conversations: 2, turns_per_conversation: 2,
    first_turn_p50_ttft_ms: Number, later_turns_p90_ttft_ms: Number, new_input_tokens: 4 + 5 * 4, turns: [{ turn: 1, requests: 2 }, { turn: 2, requests: 2 }] });
  t.equal(json.input_tokens, (json.reusable_input_tokens as number) + (json.new_input_tokens as number));
  const bad = await execa('node', [bin, 'bench', 'multi-turn', '--num-turns', '0'], { reject: false });
  t.equal(bad.exitCode, 1);
  t.match(bad.stderr, /--num-turns must be an integer >= 1, got "0"/);
  const orphan = await execa('node', [bin, 'bench', 'multi-turn', '-u', base.replace('http://', ''), '--conversations-per-system-prompt', '2'], { reject: false });
  t.equal(orphan.exitCode, 2);
  t.match(orphan.stderr, /--conversations-per-system-prompt 2 needs a system prompt: pass --system-prompt-len <n>/);
});
