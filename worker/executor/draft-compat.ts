// Whether a draft model can guess for a model (--draft-model): its guesses are token ids, so both checkpoints must
// read ids the same way — the same tokenizer.json vocabulary and added tokens. Checked before anything loads, with
// the first difference named; the engine then checks the two vocab_size values itself. Pure apart from reading the
// two files.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { TrtllmError } from '../common/errors.js';

type TokenizerJson = { model?: { type?: string; vocab?: unknown }; added_tokens?: { id: number; content: string }[] };

/** The id of each token, as [token, id] pairs in id order (BPE/WordPiece vocab objects and Unigram lists alike). */
function idsOf(json: TokenizerJson): [string, number][] {
  const pairs: [string, number][] = [];
  const vocab = json.model?.vocab;
  if (Array.isArray(vocab)) vocab.forEach((entry, id) => pairs.push([String(Array.isArray(entry) ? entry[0] : entry), id]));
  else if (vocab && typeof vocab === 'object') for (const [token, id] of Object.entries(vocab)) pairs.push([token, Number(id)]);
  for (const t of json.added_tokens ?? []) pairs.push([t.content, t.id]);
  return pairs.sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

function read(dir: string): TokenizerJson | undefined {
  const path = join(dir, 'tokenizer.json');
  if (!existsSync(path)) return undefined;
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as TokenizerJson;
  } catch (error) {
    throw new TrtllmError(`${path} is not valid JSON: ${(error as Error).message}`, 'invalid_argument');
  }
}

/** Throws (invalid_argument) when the draft's tokenizer reads ids differently from the model's; a checkpoint without
 * tokenizer.json on either side is left to the engine's vocab_size check. */
export function checkDraftTokenizer(modelDir: string, draftDir: string): void {
  if (!existsSync(join(draftDir, 'config.json'))) {
    throw new TrtllmError(`--draft-model ${draftDir}: no config.json there; give a Hugging Face checkpoint directory`, 'invalid_argument');
  }
  const model = read(modelDir);
  const draft = read(draftDir);
  if (!model || !draft) return;
  const a = idsOf(model);
  const b = idsOf(draft);
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i += 1) {
    if (a[i]![0] !== b[i]![0] || a[i]![1] !== b[i]![1]) {
      throw new TrtllmError(
        `--draft-model ${draftDir}: its tokenizer differs from the model's at id ${Math.min(a[i]![1], b[i]![1])} ` +
          `(model: ${JSON.stringify(a[i]![0])} = ${a[i]![1]}, draft: ${JSON.stringify(b[i]![0])} = ${b[i]![1]}); ` +
          'a draft model must share the model\'s tokenizer',
        'invalid_argument',
      );
    }
  }
  if (a.length !== b.length) {
    throw new TrtllmError(
      `--draft-model ${draftDir}: its tokenizer has ${b.length} tokens, the model's ${a.length}; a draft model must share the model's tokenizer`,
      'invalid_argument',
    );
  }
}
