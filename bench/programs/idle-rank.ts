// One rank of bench/cluster-liveness.ts's first-request measurement: `node idle-rank.js <model> <tp> <gap seconds>
// <runs>`. World rank 0 sends, --runs times, one request after <gap> seconds of idle and two right after it (busy:
// the followers are still in their spin), and prints `RESULT <json>`: for each request the engine's TTFT (the
// response's firstToken - arrival) and the leader's communication time in the request's first iteration — in a tp
// grid mostly the first all-reduce's wait for the followers, i.e. how late they came. The followers wait for plans as
// TRTLLM_IDLE_WAIT says.
import { loadAddon } from '../../worker/binding/load-addon.js';
import { Executor } from '../../worker/executor/executor.js';
import { initRank } from '../../worker/rank.js';

const [model = '', tp = '1', gap = '10', runs = '6'] = process.argv.slice(2);
const load = { tp: Number(tp), pp: 1, numThreads: 1 };

interface Sample { ttftMs: number; commMs: number }

async function one(executor: Executor): Promise<Sample> {
  executor.iterationStats();  // drained: the next batch starts with this request's first iteration
  const response = await executor.generate({ inputTokenIds: [1, 2, 3, 4, 5, 6, 7, 8], maxTokens: 2 });
  const first = executor.iterationStats()[0];
  const t = response.timings!;
  return { ttftMs: (t.firstToken - t.arrival) * 1000, commMs: (first?.commSeconds ?? 0) * 1000 };
}

async function leader(): Promise<{ idle: Sample[]; busy: Sample[] }> {
  const executor = await Executor.load(model, { ...load, tokensPerBlock: 16 });
  const idle: Sample[] = [];
  const busy: Sample[] = [];
  try {
    await executor.generate({ inputTokenIds: [1, 2, 3], maxTokens: 2 });
    for (let i = 0; i < Number(runs); i += 1) {
      await new Promise((r) => setTimeout(r, Number(gap) * 1000));
      idle.push(await one(executor));
      busy.push(await one(executor), await one(executor));
    }
  } finally {
    await executor.shutdown();
  }
  return { idle, busy };
}

const info = initRank();
if (info.worldRank === 0) process.stdout.write(`RESULT ${JSON.stringify(await leader())}\n`);
else await loadAddon().runFollower(model, load);
