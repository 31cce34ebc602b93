// What each token id stands for as bytes, for guided decoding (the engine's grammar matcher works on bytes, as
// TensorRT-LLM's GuidedDecodingConfig encoded_vocab): byte-level BPE (GPT-2, Llama 3, Qwen) maps characters back to
// bytes; SentencePiece-style vocabularies (Llama 2, Mistral) write a space as U+2581 and unknown bytes as <0xHH>.
// Special tokens stand for no text, so a grammar never admits them.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { byteLevelTokenBytes } from './frontend/byte-level.js';

export interface GuidedVocabulary { tokenBytes: Uint8Array; tokenOffsets: Int32Array }

interface TokenizerJson {
  decoder?: { type?: string; decoders?: { type?: string }[] };
  model?: { type?: string; vocab?: Record<string, number> | [string, number][] };
  added_tokens?: { id: number; content: string; special?: boolean }[];
}

const BYTE_PIECE = /^<0x([0-9A-Fa-f]{2})>$/;

/** SentencePiece pieces: U+2581 is a space, <0xHH> one raw byte. */
function metaspaceBytes(json: TokenizerJson): (Uint8Array | undefined)[] | undefined {
  const vocab = json.model?.vocab;
  if (!vocab) return undefined;
  const entries: [string, number][] = Array.isArray(vocab) ? vocab.map(([piece], id) => [piece, id]) : Object.entries(vocab);
  const encoder = new TextEncoder();
  const out: (Uint8Array | undefined)[] = [];
  for (const [piece, id] of entries) {
    const byte = BYTE_PIECE.exec(piece);
    out[id] = byte ? Uint8Array.of(parseInt(byte[1]!, 16)) : encoder.encode(piece.replaceAll('\u2581', ' '));
  }
  return out;
}

function isMetaspace(json: TokenizerJson): boolean {
  const d = json.decoder;
  const types = [d?.type, ...(d?.decoders ?? []).map((x) => x.type)];
  return types.includes('Metaspace') || types.includes('ByteFallback') ||
    (types.includes('Replace') && (json.model?.type === 'BPE' || json.model?.type === 'Unigram'));
}

/** The vocabulary as bytes for the model's `vocabSize` ids, or undefined when the tokenizer is neither kind (guided
 * decoding is then refused, naming why). */
export function guidedVocabulary(modelDir: string, vocabSize: number): GuidedVocabulary | undefined {
  let table = byteLevelTokenBytes(modelDir);
  if (!table) {
    let json: TokenizerJson;
    try {
      json = JSON.parse(readFileSync(join(modelDir, 'tokenizer.json'), 'utf8')) as TokenizerJson;
    } catch {
      return undefined;
    }
    if (!isMetaspace(json)) return undefined;
    table = metaspaceBytes(json);
    if (!table) return undefined;
    const encoder = new TextEncoder();
    for (const added of json.added_tokens ?? []) table[added.id] = added.special ? undefined : encoder.encode(added.content);
  }
  const count = Math.min(table.length, vocabSize);
  const offsets = new Int32Array(count + 1);
  let total = 0;
  for (let id = 0; id < count; id += 1) {
    total += table[id]?.length ?? 0;
    offsets[id + 1] = total;
  }
  const bytes = new Uint8Array(total);
  for (let id = 0; id < count; id += 1) {
    const b = table[id];
    if (b) bytes.set(b, offsets[id]!);
  }
  return { tokenBytes: bytes, tokenOffsets: offsets };
}
