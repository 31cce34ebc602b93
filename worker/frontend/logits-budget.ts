// A server-wide budget for the logits requests ask to have returned (return_context_logits,
// return_generation_logits). Logits are held whole — by the engine until the final response, then by the frontend
// while the answer is written — so one request can take gigabytes. What a request will take is known before it runs
// (prompt length, max tokens, beams, vocabulary), so it is decided then: a request over
// --max-logits-bytes-per-request on its own is the client's mistake (400, naming the option, the bytes and the
// fields), and one that would take the logits in flight past --max-logits-bytes-in-flight is refused for now (503,
// what a full queue answers too: retry later). A request without logits costs nothing and never waits on this.
import type { NativeRequest } from '../binding/addon-types.js';
import type { RequestHandle } from '../executor/request-handle.js';
import { HttpError } from './http-errors.js';

/** Logits are float32 wherever they are held (engine, Float32Array, raw tensor bytes). */
export const LOGIT_BYTES = 4;

// Defaults: a few hundred generated tokens' logits on a 150k vocabulary (400 x 152,064 x 4 B = 243 MB), or context
// logits of a prompt of ~500 tokens on Llama 3's 128k, fit one request; four of those may be in flight at once.
export const DEFAULT_MAX_LOGITS_BYTES_PER_REQUEST = 256 * 1024 * 1024;
export const DEFAULT_MAX_LOGITS_BYTES_IN_FLIGHT = 1024 * 1024 * 1024;

export interface LogitsLimits {
  perRequestBytes: number;   // 0: no limit
  inFlightBytes: number;     // 0: no limit
}

/** The limits from a server's options; an option not given takes its default. */
export function logitsLimits(o: { maxLogitsBytesPerRequest?: number | undefined; maxLogitsBytesInFlight?: number | undefined }): LogitsLimits {
  return {
    perRequestBytes: o.maxLogitsBytesPerRequest ?? DEFAULT_MAX_LOGITS_BYTES_PER_REQUEST,
    inFlightBytes: o.maxLogitsBytesInFlight ?? DEFAULT_MAX_LOGITS_BYTES_IN_FLIGHT,
  };
}

/** What the client called the fields a cost comes from (input_ids or text_input, request_output_len or max_tokens). */
export interface LogitsFieldNames { prompt: string; maxTokens: string }

export interface LogitsPart {
  field: 'return_context_logits' | 'return_generation_logits';
  bytes: number;
  why: string;               // "return_context_logits: input_ids 1000 tokens x vocab_size 8192 x 4 bytes = 32768000"
}

export interface LogitsCost { bytes: number; parts: LogitsPart[] }

/**
 * The logits bytes of one client request, whose sequences are `requests` (batch rows, prompts): per sequence,
 * prompt length x vocab x 4 for context logits and max_tokens x beams x vocab x 4 for generation logits.
 */
export function logitsCost(requests: readonly NativeRequest[], vocab: number, names: LogitsFieldNames): LogitsCost {
  const parts: LogitsPart[] = [];
  requests.forEach((r, i) => {
    const at = requests.length > 1 ? `[${i}]` : '';
    if (r.output?.returnContextLogits) {
      const bytes = r.inputTokenIds.length * vocab * LOGIT_BYTES;
      parts.push({
        field: 'return_context_logits', bytes,
        why: `return_context_logits: ${names.prompt}${at} ${r.inputTokenIds.length} tokens x vocab_size ${vocab} x ${LOGIT_BYTES} bytes = ${bytes}`,
      });
    }
    if (r.output?.returnGenerationLogits) {
      const beams = r.sampling?.beamWidth ?? 1;
      const bytes = r.maxTokens * beams * vocab * LOGIT_BYTES;
      parts.push({
        field: 'return_generation_logits', bytes,
        why: `return_generation_logits: ${names.maxTokens}${at} ${r.maxTokens} x beam_width ${beams} x vocab_size ${vocab} x ${LOGIT_BYTES} bytes = ${bytes}`,
      });
    }
  });
  return { bytes: parts.reduce((n, p) => n + p.bytes, 0), parts };
}

/** One request's share of the budget; release() gives it back (once, however often it is called). */
export interface LogitsLease { release(): void }

const NOTHING_HELD: LogitsLease = { release() {} };
const LISTED_PARTS = 4;  // a batch of hundreds is summarized, not listed

function listParts(cost: LogitsCost): string {
  const shown = cost.parts.slice(0, LISTED_PARTS).map((p) => p.why);
  if (cost.parts.length > LISTED_PARTS) shown.push(`and ${cost.parts.length - LISTED_PARTS} more`);
  return shown.join('; ');
}

export class LogitsBudget {
  private held = 0;

  constructor(readonly limits: LogitsLimits) {}

  /** Bytes reserved by requests in flight now. */
  get inFlightBytes(): number {
    return this.held;
  }

  /** Reserves a request's logits before it runs, or refuses it (HttpError 400 or 503). */
  reserve(cost: LogitsCost): LogitsLease {
    if (cost.bytes === 0) return NOTHING_HELD;
    const { perRequestBytes, inFlightBytes } = this.limits;
    // A request over the in-flight budget on its own could never run: that is the client's 400 too, not a retry.
    for (const [option, limit] of [['--max-logits-bytes-per-request', perRequestBytes], ['--max-logits-bytes-in-flight', inFlightBytes]] as const) {
      if (limit > 0 && cost.bytes > limit) {
        throw new HttpError(400, `the logits this request asks for take ${cost.bytes} bytes, more than ${option} ${limit}: ${listParts(cost)}; `
          + 'ask for a shorter prompt, fewer tokens or no logits', cost.parts[0]!.field);
      }
    }
    if (inFlightBytes > 0 && this.held + cost.bytes > inFlightBytes) {
      throw new HttpError(503, `the server's logits budget is in use: this request's logits take ${cost.bytes} bytes and requests in flight `
        + `hold ${this.held} of --max-logits-bytes-in-flight ${inFlightBytes}; retry when they have finished`, cost.parts[0]!.field);
    }
    this.held += cost.bytes;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.held -= cost.bytes;
      },
    };
  }
}

export interface HoldOptions {
  signal: AbortSignal;               // the client going away
  settled?: (() => Promise<unknown>) | undefined;  // the caller is done with the outputs (its answer written or abandoned)
}

/**
 * A run's events, with `lease` held for as long as its logits may be in memory: until every engine request of the
 * run has its final response (finished, failed, cancelled or cut by a drain — each ends with one) and the caller is
 * done with the outputs — `settled` when the caller says when that is, else once the events end or the client goes
 * away.
 */
export function holdLease<T>(lease: LogitsLease, events: AsyncIterable<T>, handles: readonly RequestHandle[], o: HoldOptions): AsyncIterable<T> {
  if (lease === NOTHING_HELD) return events;
  let eventsEnded!: () => void;
  const ended = new Promise<void>((resolve) => { eventsEnded = resolve; });
  let onAbort: (() => void) | undefined;
  const gone = new Promise<void>((resolve) => {
    onAbort = resolve;
    if (o.signal.aborted) resolve();
    else o.signal.addEventListener('abort', onAbort, { once: true });
  });
  const callerDone = o.settled ? o.settled().then(() => {}, () => {}) : Promise.race([ended, gone]);
  void Promise.all([callerDone, ...handles.map((h) => h.responses())]).finally(() => {
    o.signal.removeEventListener('abort', onAbort!);
    lease.release();
  });
  return (async function* () {
    try {
      yield* events;
    } finally {
      eventsEnded();
    }
  })();
}
