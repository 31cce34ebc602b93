// A fast exact path for streaming detokenization with byte-level BPE tokenizers (GPT-2, Llama 3, Qwen2, ...):
// each token id is a fixed byte string, so a streaming UTF-8 decoder turns tokens into text with no re-decoding,
// never splits a character and never loses a space. About 1 µs per token instead of two library decodes; other
// tokenizers (SentencePiece) use the windowed decoder.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export type TokenBytes = (Uint8Array | undefined)[];  // undefined: a special token, skipped like decode() does

// GPT-2's printable stand-ins for bytes: printable Latin-1 bytes stand for themselves, the others map to 256 + n.
function unicodeToByte(): Map<string, number> {
  const printable = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const map = new Map<string, number>();
  let n = 0;
  for (let b = 0; b < 256; b += 1) map.set(String.fromCodePoint(printable(b) ? b : 256 + n++), b);
  return map;
}

/** The bytes of every token id, or undefined when the tokenizer is not plain byte-level BPE. */
export function byteLevelTokenBytes(modelDir: string): TokenBytes | undefined {
  let json: { decoder?: { type?: string }; model?: { type?: string; vocab?: Record<string, number> }; added_tokens?: { id: number; content: string; special?: boolean }[] };
  try {
    json = JSON.parse(readFileSync(join(modelDir, 'tokenizer.json'), 'utf8'));
  } catch {
    return undefined;
  }
  if (json.decoder?.type !== 'ByteLevel' || json.model?.type !== 'BPE' || !json.model.vocab) return undefined;
  const table = unicodeToByte();
  const bytes: TokenBytes = [];
  for (const [token, id] of Object.entries(json.model.vocab)) {
    const out: number[] = [];
    for (const ch of token) {
      const b = table.get(ch);
      if (b === undefined) return undefined;  // not a byte-level vocabulary after all
      out.push(b);
    }
    bytes[id] = Uint8Array.from(out);
  }
  for (const added of json.added_tokens ?? []) bytes[added.id] = added.special ? undefined : new TextEncoder().encode(added.content);
  return bytes;
}

/** Streams token ids to text through a stateful UTF-8 decoder: incomplete characters wait for their last byte. */
export class ByteLevelDetokenizer {
  private readonly decoder = new TextDecoder('utf-8', { fatal: false });

  constructor(private readonly table: TokenBytes) {}

  push(ids: readonly number[]): string {
    let text = '';
    for (const id of ids) {
      const b = this.table[id];
      if (b !== undefined) text += this.decoder.decode(b, { stream: true });
    }
    return text;
  }

  flush(): string {
    return this.decoder.decode();
  }
}
