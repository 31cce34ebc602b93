// Stop sequences matched on text, because a stop word's tokens alone need not be how the model spells it (" Hello"
// vs "Hello", or a merge across the boundary). Text that could still be the start of a stop string is held back
// until it is known not to be, so a stream never shows a stop string it then has to retract.
export interface StopMatch {
  emit: string;        // text safe to show now
  stopped: boolean;    // a stop string matched; nothing after `emit` may be shown
}

export class StopStringMatcher {
  private pending = '';
  private readonly maxLen: number;

  /** includeStop: Triton returns the stop word in the output (as TensorRT-LLM does); OpenAI leaves it out. */
  constructor(private readonly stops: readonly string[], private readonly includeStop: boolean) {
    this.maxLen = stops.reduce((m, s) => Math.max(m, s.length), 0);
  }

  push(delta: string): StopMatch {
    if (this.stops.length === 0) return { emit: delta, stopped: false };
    const text = this.pending + delta;
    let best = -1;
    let bestStop = '';
    for (const stop of this.stops) {
      const at = text.indexOf(stop);
      if (at >= 0 && (best < 0 || at < best)) {
        best = at;
        bestStop = stop;
      }
    }
    if (best >= 0) {
      this.pending = '';
      return { emit: text.slice(0, this.includeStop ? best + bestStop.length : best), stopped: true };
    }
    const hold = this.heldSuffixLength(text);
    this.pending = text.slice(text.length - hold);
    return { emit: text.slice(0, text.length - hold), stopped: false };
  }

  /** At the end of generation nothing can complete a stop string any more: release what was held. */
  flush(): string {
    const rest = this.pending;
    this.pending = '';
    return rest;
  }

  // The longest suffix of `text` that is a proper prefix of some stop string.
  private heldSuffixLength(text: string): number {
    for (let len = Math.min(this.maxLen - 1, text.length); len > 0; len -= 1) {
      const suffix = text.slice(text.length - len);
      if (this.stops.some((s) => s.startsWith(suffix))) return len;
    }
    return 0;
  }
}
