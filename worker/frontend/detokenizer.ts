// Incremental detokenization for streaming. Decoding tokens one at a time breaks in two ways: a character whose
// UTF-8 bytes span tokens decodes to U+FFFD until its last byte arrives, and tokenizers that strip a word's leading
// space at the start of a decode (SentencePiece's "▁") lose it at every token boundary. So we decode a short
// window that starts a few tokens back and emit only what the new tokens added, once it no longer ends in U+FFFD.
import type { TextTokenizer } from '../tokenizer.js';

const REPLACEMENT = '\uFFFD';
const CONTEXT_TOKENS = 4;  // prompt tokens to seed the window with, so the first output token keeps its space

export class IncrementalDetokenizer {
  private readonly ids: number[];
  private prefixOffset: number;   // the window starts here
  private readOffset: number;     // text up to here has been emitted
  private prefixText: string | undefined;  // decode(prefixOffset, readOffset), kept until the offsets move

  constructor(private readonly tokenizer: Pick<TextTokenizer, 'decode'>, promptIds: readonly number[] = []) {
    this.ids = promptIds.slice(-CONTEXT_TOKENS);
    this.prefixOffset = 0;
    this.readOffset = this.ids.length;
  }

  /** Adds tokens; returns the text they complete (may be empty while a character is still incomplete). */
  push(newIds: readonly number[]): string {
    if (newIds.length === 0) return '';
    for (const id of newIds) this.ids.push(id);
    const prefix = this.prefixText ??= this.decode(this.prefixOffset, this.readOffset);
    const full = this.decode(this.prefixOffset, this.ids.length);
    if (full.length <= prefix.length || full.endsWith(REPLACEMENT)) return '';
    // The new text normally extends the old one; if a merge rewrote it, emit from the first differing char.
    let common = 0;
    while (common < prefix.length && prefix.charCodeAt(common) === full.charCodeAt(common)) common += 1;
    this.prefixOffset = this.readOffset;
    this.readOffset = this.ids.length;
    this.prefixText = undefined;
    this.compact();
    return full.slice(common);
  }

  /** What is left at the end of the stream, incomplete characters included (as U+FFFD, like a full decode). */
  flush(): string {
    if (this.readOffset >= this.ids.length) return '';
    const prefix = this.decode(this.prefixOffset, this.readOffset);
    const full = this.decode(this.prefixOffset, this.ids.length);
    this.prefixOffset = this.readOffset = this.ids.length;
    return full.startsWith(prefix) ? full.slice(prefix.length) : full;
  }

  private decode(from: number, to: number): string {
    return from >= to ? '' : this.tokenizer.decode(this.ids.slice(from, to));
  }

  // Keeps the id buffer short on long generations: nothing before prefixOffset is ever decoded again.
  private compact(): void {
    if (this.prefixOffset < 256) return;
    this.ids.splice(0, this.prefixOffset);
    this.readOffset -= this.prefixOffset;
    this.prefixOffset = 0;
  }
}
