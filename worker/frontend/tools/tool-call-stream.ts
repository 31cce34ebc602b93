// Separates a choice's text into content and tool calls as it streams, for any family's syntax (ToolSyntax):
// content goes out at once, except a tail that may be the start of a call marker (held, like a stop string) and
// trailing whitespace (dropped when a call follows it); a call block is held whole until it closes (or the output
// ends) and goes out as calls if it parses, or as the very text the model wrote if it does not — a malformed call
// is content, never an error. A whole response is the same stream pushed at once, so streamed = whole.
import type { ParsedToolCall } from './tool-call.js';

export interface ToolSyntax {
  /** Markers that open a call block anywhere in the text (`<tool_call>`, `[TOOL_CALLS]`). */
  openers: readonly string[];
  /** A character that opens a block when it starts the output (after whitespace): Llama 3's `{`. Part of the block. */
  bareStart?: string;
  /** The marker that ends a block (`</tool_call>`); absent: a block runs to the end of the output. */
  closer?: string;
  /** The calls a block's text holds (its markers excluded), or undefined when it is not a well-formed call block. */
  parseBlock(block: string): ParsedToolCall[] | undefined;
}

export type ToolPiece = { content: string; call?: undefined } | { call: ParsedToolCall; content?: undefined };

/** The longest tail of `text` that is a proper prefix of one of `markers`: it may become a marker. */
function partialMarker(text: string, markers: readonly string[]): number {
  let best = 0;
  for (const m of markers) {
    for (let n = Math.min(m.length - 1, text.length); n > best; n -= 1) {
      if (text.endsWith(m.slice(0, n))) { best = n; break; }
    }
  }
  return best;
}

export class ToolCallStream {
  private inCall: boolean;
  private pending = '';     // text state: not yet looked at or held back
  private ws = '';          // whitespace after the last content, held until content follows
  private opener = '';      // what opened the current block (marker, or the whitespace before a bare start)
  private block = '';
  private atStart = true;   // nothing but whitespace so far: a bare start may open a block
  private calls = 0;

  /** `inCall`: the block's opener is in the prompt (a forced call), so the output starts inside a block. */
  constructor(private readonly syntax: ToolSyntax, options: { inCall?: boolean } = {}) {
    this.inCall = options.inCall ?? false;
    if (this.inCall) this.atStart = false;
  }

  get callCount(): number {
    return this.calls;
  }

  push(text: string): ToolPiece[] {
    const out: ToolPiece[] = [];
    if (this.inCall) this.block += text;
    else this.pending += text;
    this.advance(out);
    return out;
  }

  finish(): ToolPiece[] {
    const out: ToolPiece[] = [];
    this.advance(out);
    if (this.inCall) this.closeBlock(out, this.block, '');
    else if (this.pending !== '') this.content(out, this.pending);
    this.pending = '';
    // Whitespace at the very end is content only when no call was made (then the text is returned as written).
    if (this.calls === 0 && this.ws !== '') out.push({ content: this.ws });
    this.ws = '';
    return out;
  }

  private advance(out: ToolPiece[]): void {
    for (;;) {
      if (this.inCall) {
        const end = this.syntax.closer === undefined ? -1 : this.block.indexOf(this.syntax.closer);
        if (end < 0) return;
        const rest = this.block.slice(end + this.syntax.closer!.length);
        this.closeBlock(out, this.block.slice(0, end), this.syntax.closer!);
        this.pending = rest;
        continue;
      }
      const { bareStart, openers } = this.syntax;
      if (this.atStart && bareStart !== undefined) {
        const body = this.pending.trimStart();
        if (body === '') return;
        if (body.startsWith(bareStart)) {
          this.open(this.pending.slice(0, this.pending.length - body.length), body);
          continue;
        }
      }
      let at = -1;
      let marker = '';
      for (const m of openers) {
        const i = this.pending.indexOf(m);
        if (i >= 0 && (at < 0 || i < at)) { at = i; marker = m; }
      }
      if (at >= 0) {
        this.content(out, this.pending.slice(0, at));
        this.open(marker, this.pending.slice(at + marker.length));
        continue;
      }
      const hold = partialMarker(this.pending, openers);
      this.content(out, this.pending.slice(0, this.pending.length - hold));
      this.pending = this.pending.slice(this.pending.length - hold);
      return;
    }
  }

  private open(opener: string, block: string): void {
    this.inCall = true;
    this.atStart = false;
    this.opener = opener;
    this.block = block;
    this.pending = '';
  }

  private closeBlock(out: ToolPiece[], block: string, closer: string): void {
    this.inCall = false;
    const calls = this.syntax.parseBlock(block);
    if (calls && calls.length > 0) {
      this.ws = '';
      for (const call of calls) out.push({ call });
      this.calls += calls.length;
    } else {
      this.content(out, this.opener + block + closer);
    }
    this.opener = '';
    this.block = '';
  }

  /** Emits text as content, holding its trailing whitespace back. */
  private content(out: ToolPiece[], text: string): void {
    if (text === '') return;
    const all = this.ws + text;
    const kept = all.trimEnd();
    this.ws = all.slice(kept.length);
    if (kept === '') return;
    this.atStart = false;
    out.push({ content: kept });
  }
}

/** A whole output: its content (null when it is only calls) and its calls. */
export interface ToolParse {
  content: string | null;
  calls: ParsedToolCall[];
}

/** Gathers a stream's pieces into one answer. */
export function gatherPieces(pieces: readonly ToolPiece[]): ToolParse {
  const calls = pieces.flatMap((p) => (p.call ? [p.call] : []));
  const content = pieces.map((p) => p.content ?? '').join('');
  return { content: calls.length > 0 && content === '' ? null : content, calls };
}

/** The pure whole-output parser of a syntax: the stream, pushed at once. */
export function parseWhole(syntax: ToolSyntax, text: string, options: { inCall?: boolean } = {}): ToolParse {
  const stream = new ToolCallStream(syntax, options);
  return gatherPieces([...stream.push(text), ...stream.finish()]);
}
