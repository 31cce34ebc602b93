// Greedy completions through a running server's /v1/completions, to compare layouts (scripts/gpu/check.sh serve):
//   node scripts/gpu/served-greedy.js capture <port> <out.json>   24 prompts, 8 at a time, 40 tokens, top-2 log-probs
//   node scripts/gpu/served-greedy.js compare <ref.json> <other.json>
// compare prints how many completions are equal token for token and, for the others, where they part and the
// reference's top-2 margin there (a near tie may break either way between layouts in bf16).
import { readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';

const [verb, a, b] = process.argv.slice(2);
const seeds = ['The jury said', 'It was the first time that', 'In the morning the', 'He told the committee',
  'The city of', 'She looked at the', 'There is no doubt that', 'The new law will'];

async function capture(port, outPath) {
  const base = `http://127.0.0.1:${port}`;
  const model = (await (await fetch(`${base}/v1/models`)).json()).data[0].id;
  // Three lengths of each seed: short prompts, and ones of ~40 more tokens.
  const prompts = Array.from({ length: 24 }, (_, i) => seeds[i % 8] + ' and then'.repeat(Math.floor(i / 8) * 9));
  const out = new Array(prompts.length);
  let next = 0;
  const worker = async () => {
    while (next < prompts.length) {
      const i = next++;
      const r = await fetch(`${base}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, prompt: prompts[i], max_tokens: 40, temperature: 0, logprobs: 2 }),
      });
      const j = await r.json();
      if (!r.ok) throw new Error(`prompt ${i}: HTTP ${r.status}: ${JSON.stringify(j)}`);
      out[i] = j.choices[0].logprobs;
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  writeFileSync(outPath, JSON.stringify(out));
  console.log(`${model}: ${out.length} greedy completions written to ${outPath}`);
}

function compare(refPath, otherPath) {
  const [ref, other] = [refPath, otherPath].map((f) => JSON.parse(readFileSync(f, 'utf8')));
  let equal = 0;
  const parts = [];
  ref.forEach((r, i) => {
    const x = r.tokens, y = other[i].tokens;
    let k = 0;
    while (k < x.length && k < y.length && x[k] === y[k]) k++;
    if (k === x.length && k === y.length) return void equal++;
    const top = Object.values(r.top_logprobs?.[k] ?? {}).sort((p, q) => q - p);
    const margin = top.length > 1 ? `top-2 margin ${(top[0] - top[1]).toFixed(4)}` : 'top-2 share one text';
    parts.push(`#${i} parts at token ${k} (${margin})`);
  });
  console.log(`${basename(otherPath)} against ${basename(refPath)}: ${equal} of ${ref.length} equal` +
    (parts.length ? `; ${parts.join('; ')}` : ''));
}

if (verb === 'capture') await capture(a, b);
else if (verb === 'compare') compare(a, b);
else {
  console.error('usage: served-greedy.js capture <port> <out.json> | compare <ref.json> <other.json>');
  process.exit(2);
}
