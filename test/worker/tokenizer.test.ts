// The JS tokenizer must produce the ids Hugging Face's Python tokenizers produced for the same texts.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';

import { expectError } from '../helpers/expect-error.js';
import { loadTokenizer } from '../../worker/tokenizer.js';
import { fixtureDir } from '../helpers/fixtures.js';

for (const model of ['tiny-llama', 'tiny-gpt2']) {
  t.test(`${model}: ids match the Python reference`, async (t) => {
    const dir = fixtureDir(model);
    const tokenizer = loadTokenizer(dir);
    const cases = JSON.parse(readFileSync(join(dir, 'tokenizer_reference.json'), 'utf8')) as { text: string; ids: number[] }[];
    for (const c of cases) {
      t.same(tokenizer.encode(c.text), c.ids, JSON.stringify(c.text));
      t.equal(tokenizer.decode(c.ids), c.text, `round trip of ${JSON.stringify(c.text)}`);
    }
  });
}

t.test('a checkpoint without tokenizer.json gets a clear error', async (t) => {
  expectError(t, () => loadTokenizer('/nonexistent'), 'not_found', /tokenizer\.json is missing/);
});

t.test('no tokens decode to no text', async (t) => {
  t.equal(loadTokenizer(fixtureDir('tiny-llama')).decode([]), '');
});
