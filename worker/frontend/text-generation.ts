// One prompt through the executor as text: enqueue, then turn each iteration's tokens into UTF-8-safe text
// deltas, matching stop strings on text, feeding the metrics, and cancelling the engine request when the client
// goes away or a stop string ends it early. Shared by the KServe text models and the OpenAI routes.
import type { FinishReason, NativeRequest, NativeResponse } from '../binding/addon-types.js';
import type { RequestHandle } from '../executor/request-handle.js';
import { ByteLevelDetokenizer } from './byte-level.js';
import { IncrementalDetokenizer } from './detokenizer.js';
import type { RequestTracker } from './metrics.js';
import type { ServingContext } from './serving-context.js';
import { StopStringMatcher } from './stop-strings.js';

export interface TextDelta {
  text: string;
  tokenIds: number[];
  logProbs: number[];
  final: boolean;
  finishReason?: FinishReason;
  response: NativeResponse;
}

export interface TextRun {
  handle: RequestHandle;
  deltas: AsyncIterable<TextDelta>;
  /** For a run whose deltas will never be read (a later prompt of the same request was rejected): cancels it and
   * ends its metrics as failed, as reading the deltas to their end would. */
  abandon(): void;
}

export interface TextRunOptions {
  promptIds: number[];
  request: NativeRequest;
  stopStrings: readonly string[];
  includeStop: boolean;
  tracker: RequestTracker;
  signal: AbortSignal;
}

/** Enqueues now (so queue_full and bad parameters throw before any response is written) and returns the deltas. */
export function startText(ctx: ServingContext, options: TextRunOptions): TextRun {
  let handle: RequestHandle;
  try {
    handle = ctx.executor.enqueue(options.request);
  } catch (error) {
    options.tracker.finish(false);  // rejected (a bad parameter, a full queue): no longer pending
    throw error;
  }
  options.tracker.inputDone(options.promptIds.length);
  const cancel = () => handle.cancel();
  if (options.signal.aborted) cancel();
  options.signal.addEventListener('abort', cancel, { once: true });
  const cleanup = () => options.signal.removeEventListener('abort', cancel);
  const abandon = () => {
    handle.cancel();
    cleanup();
    options.tracker.finish(false);
  };
  return { handle, deltas: deltas(ctx, handle, options, cleanup), abandon };
}

async function* deltas(ctx: ServingContext, handle: RequestHandle, o: TextRunOptions, cleanup: () => void): AsyncGenerator<TextDelta> {
  const detok = ctx.tokenBytes ? new ByteLevelDetokenizer(ctx.tokenBytes) : new IncrementalDetokenizer(ctx.tokenizer, o.promptIds);
  const matcher = new StopStringMatcher(o.stopStrings, o.includeStop);
  let ok = false;
  let queueSeconds: number | undefined;
  try {
    for await (const response of handle) {
      const ids = response.outputTokenIds?.[0] ?? [];
      const logProbs = response.logProbs?.[0] ?? [];
      let text = detok.push(ids);
      if (response.isFinal) text += detok.flush();
      const match = matcher.push(text);
      o.tracker.tokens(ids.length);
      if (response.timings) queueSeconds = response.timings.firstScheduled - response.timings.arrival;
      if (match.stopped) {
        handle.cancel();
        ok = true;
        yield { text: match.emit, tokenIds: ids, logProbs, final: true, finishReason: 'stop_words', response };
        return;
      }
      const final = response.isFinal;
      const reason = response.finishReasons?.[0];
      ok = final && reason !== 'cancelled';
      yield { text: final ? match.emit + matcher.flush() : match.emit, tokenIds: ids, logProbs, final, finishReason: reason, response };
      if (final) return;
    }
  } finally {
    // A consumer that stops early (client gone, error elsewhere) must not leave the request running.
    if (!ok) handle.cancel();
    cleanup();
    o.tracker.finish(ok, queueSeconds);
  }
}
