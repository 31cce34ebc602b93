// Guided decoding's token-mask time per request step on one CPU core, with a vocabulary of Llama-3's size (128,256
// ids): the bundled tokenizer's 8,192 byte-level tokens, every number of up to three digits, runs of JSON
// punctuation, and concatenations of its tokens drawn with a fixed seed until the size is reached (Llama-3's
// tokenizer cannot be fetched here; what matters to the mask is the count and the spread of lengths and prefixes).
// The guides are the JSON Schema suite (test/fixtures/json-schemas) plus a regex and a generic JSON guide. The
// baseline, in the same run, walks every token from the real stacks for each mask. "As served" is what the executor
// does: a new guide's requests wait until the grammar cache's background thread has computed every position, so the
// tool reports that wait (compile + every position, one core) and the steps' mask time after it.
// GRAMMAR_BENCH_OWN_STORE=1: each guide as a server's first (no masks shared with earlier guides);
// GRAMMAR_BENCH_EACH=1: per-guide lines.
//   node dist/bench/grammar-mask.js [--steps 64] [--walks 2] [--vocab 128256] [--write-vocab <file>]
// --write-vocab only writes the vocabulary (for `bench --offline --guided-vocab` on a dummy checkpoint) and stops.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Command } from 'commander';

import { packageRoot } from '../worker/common/package-root.js';
import { guidedVocabulary } from '../worker/token-bytes.js';

function synthesize(size: number): Uint8Array[] {
  const base = guidedVocabulary(join(packageRoot(), 'examples', 'models', 'brown-llama-17m'), 1 << 30);
  if (!base) throw new Error('the bundled tokenizer is not byte-level BPE');
  const tokens: Uint8Array[] = [];
  const seen = new Set<string>();
  const add = (b: Uint8Array): void => {
    const key = Buffer.from(b).toString('latin1');
    if (b.length === 0 || seen.has(key) || tokens.length >= size) return;
    seen.add(key);
    tokens.push(b);
  };
  const offsets = base.tokenOffsets;
  const pieces: Uint8Array[] = [];
  for (let i = 0; i + 1 < offsets.length; i += 1) pieces.push(base.tokenBytes.slice(offsets[i]!, offsets[i + 1]!));
  for (const p of pieces) add(p);
  for (let n = 0; n < 1000; n += 1) add(Buffer.from(String(n)));
  const punct = ['"', '{', '}', '[', ']', ',', ':', ' ', '\n'];
  for (const a of punct) for (const b of punct) { add(Buffer.from(a + b)); for (const c of punct) add(Buffer.from(a + b + c)); }
  // xorshift32: an LCG's low bits cycle too fast to draw pairs from 8,192 pieces.
  let state = 12345;
  const next = (): number => {
    state ^= state << 13; state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5; state >>>= 0;
    return state;
  };
  while (tokens.length < size) {
    const a = pieces[next() % pieces.length]!, b = pieces[next() % pieces.length]!;
    if (a.length + b.length > 16) continue;
    add(Buffer.concat([a, b]));
  }
  return tokens;
}

function writeVocab(tokens: Uint8Array[], path: string): void {
  const total = tokens.reduce((n, t) => n + t.length, 0);
  const out = Buffer.alloc(4 + 4 * (tokens.length + 1) + total);
  out.writeInt32LE(tokens.length, 0);
  let at = 0;
  tokens.forEach((t, i) => {
    out.writeInt32LE(at, 4 + 4 * i);
    Buffer.from(t).copy(out, 4 + 4 * (tokens.length + 1) + at);
    at += t.length;
  });
  out.writeInt32LE(at, 4 + 4 * tokens.length);
  writeFileSync(path, out);
}

const program = new Command()
  .option('--steps <n>', 'steps per walk', '64')
  .option('--walks <n>', 'walks per guide', '2')
  .option('--vocab <n>', 'vocabulary size', '128256')
  .option('--write-vocab <file>', 'only write the vocabulary to this file')
  .parse();
const o = program.opts<{ steps: string; walks: string; vocab: string; writeVocab?: string }>();
if (o.writeVocab !== undefined) {
  writeVocab(synthesize(Number(o.vocab) - 256), o.writeVocab);
  process.exit(0);
}
const dir = mkdtempSync(join(tmpdir(), 'grammar-mask-'));
const vocabPath = join(dir, 'vocab.bin');
// Llama-3's 128,256 ids include 256 special tokens, which stand for no text.
writeVocab(synthesize(Number(o.vocab) - 256), vocabPath);
const schemas = join(packageRoot(), 'test', 'fixtures', 'json-schemas');
const guides = readdirSync(schemas).filter((f) => /^\d+.*\.json$/.test(f) && !/\.(valid|invalid)\.json$/.test(f)).map((f) => `json_schema:${join(schemas, f)}`);
const regex = join(dir, 'phone.regex');
writeFileSync(regex, String.raw`\(\d{3}\) \d{3}-\d{4}( x\d{1,5})?`);
const any = join(dir, 'any.json');
writeFileSync(any, '');
const tool = join(packageRoot(), 'build', 'native', 'grammar-bench');
console.log(`grammar-mask: ${guides.length} JSON schemas + a regex + any JSON; vocabulary ${o.vocab} ids (synthesized)`);
const output = execFileSync('taskset', ['-c', '0', tool, vocabPath, o.steps, o.walks, ...guides, `regex:${regex}`, `json:${any}`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
process.stdout.write(output);
