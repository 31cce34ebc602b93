// Triton's stop by id: a request with `stop: true` and the id of a running request of the same model cancels it.
// The ids are the clients' own, so this is where they are kept honest:
//   - per model: a stop to tensorrt_llm reaches only tensorrt_llm's requests (as in Triton, where each model's
//     backend keeps its own ids); HTTP and gRPC share a model's ids, since Triton's backend never sees the wire;
//   - type-exact: the generate body's 123 and "123" are different ids (a Map key keeps the JSON type);
//   - unique among a model's running requests: a second request with an id in use is refused (409 Conflict, gRPC
//     ALREADY_EXISTS) instead of both answering to one stop, so a stop names exactly one request;
//   - a stop says what it did: how many requests it ended cancelled (0 when none ran under that id, or the one
//     that did had already finished), and answers only once they have ended.
// Ids are not secrets: any client that may call a model may stop its requests by id, as with Triton.
import { describeValue } from '../common/errors.js';
import { quoteName } from '../common/quote-value.js';
import type { RequestHandle } from '../executor/request-handle.js';
import { HttpError } from './http-errors.js';

/** A client's request id as it sent it: a string (KServe infer, gRPC, generate) or an integer (generate). */
export type RequestId = string | number;

/** What a stop request did. */
export interface StopOutcome {
  cancelled: number;   // requests it ended cancelled: 1, or 0 when none with its id was running
}

/** One client request under an id: the executor requests it fans out to (one per batch element). Its id is taken
 * before its prompts are tokenized, so a stop can arrive before anything is enqueued: the stop then waits until the
 * request is enqueued (or refused), and what is enqueued after the stop is cancelled at once. */
export class LiveRequest {
  private readonly handles: RequestHandle[] = [];
  private stopping: Promise<boolean> | undefined;
  private stopped = false;
  private settle!: () => void;
  private readonly settled = new Promise<void>((resolve) => { this.settle = resolve; });

  constructor(private readonly forget: () => void) {}

  /** An executor request of this client request (called as each is enqueued). */
  track(handle: RequestHandle): void {
    this.handles.push(handle);
    if (this.stopped) handle.cancel();
  }

  /** Every executor request of it is enqueued (track was called for each). */
  enqueued(): void {
    this.settle();
  }

  /** The client request has ended, or was refused before it ran: its id is free again. Idempotent. */
  release(): void {
    this.settle();
    this.forget();
  }

  /** Cancels every executor request of it and waits for their final responses; true when one of them ended
   * cancelled (the others may have finished first), and only for the first stop (a second one, sent while the first
   * is at work, cancels nothing more). The id is free once this resolves. */
  async stop(): Promise<boolean> {
    if (this.stopping) {
      await this.stopping;
      return false;
    }
    this.stopping = (async () => {
      this.stopped = true;
      for (const handle of this.handles) handle.cancel();
      await this.settled;
      const finals = await Promise.all(this.handles.map(async (handle) => (await handle.responses()).at(-1)));
      this.release();
      return finals.some((r) => r !== undefined && r.error === undefined && (r.finishReasons?.includes('cancelled') ?? false));
    })();
    return this.stopping;
  }
}

/** One executor's running requests by model name and id. */
export class LiveRequests {
  private readonly byModel = new Map<string, Map<RequestId, LiveRequest>>();

  /** Takes `id` for a new request of `model`; 409 when a running request of that model has it. */
  claim(model: string, id: RequestId): LiveRequest {
    let ids = this.byModel.get(model);
    if (!ids) this.byModel.set(model, (ids = new Map()));
    if (ids.has(id)) {
      throw new HttpError(409, `id ${describeValue(id)} is already used by a running request of model ${quoteName(model)}; ` +
        'a stop request names one request by its id, so running requests of a model need different ids', 'id');
    }
    const models = this.byModel;
    const live: LiveRequest = new LiveRequest(() => {
      if (ids.get(id) !== live) return;
      ids.delete(id);
      if (ids.size === 0 && models.get(model) === ids) models.delete(model);
    });
    ids.set(id, live);
    return live;
  }

  /** Triton's stop: cancels the running request of `model` with `id`, if there is one, and says so once it ended. */
  async stop(model: string, id: RequestId): Promise<StopOutcome> {
    const live = this.byModel.get(model)?.get(id);
    if (!live) return { cancelled: 0 };
    this.stopsUnderWay += 1;
    try {
      return { cancelled: (await live.stop()) ? 1 : 0 };
    } finally {
      this.stopsUnderWay -= 1;
    }
  }

  /** Stops that found their request and wait for it to end (tests order a stop before what it waits for by it). */
  stopsUnderWay = 0;

  /** How many requests hold an id now (all models). */
  get size(): number {
    let n = 0;
    for (const ids of this.byModel.values()) n += ids.size;
    return n;
  }
}
