// Tokenizing off the event loop: a few worker threads, each with its own copy of the checkpoint's tokenizer, encode
// prompts and decode id lists, so a long prompt (tokenizing runs at about a microsecond per byte) never delays the
// health checks and small requests that arrive meanwhile. A request's texts are cut into slices of bounded size and
// the threads take one slice of each waiting request in turn, so one request with a big batch only adds one slice
// to another's wait, whatever its size.
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

import { TrtllmError } from './common/errors.js';
import type { EncodedText, SliceRequest, ThreadData, ThreadMessage } from './tokenizer-thread.js';

// Threads: one per spare core, at most two — tokenizing is a small share of a request's time, and each thread
// holds a whole tokenizer (tens of MB for a large vocabulary).
export const DEFAULT_TOKENIZER_THREADS = Math.max(1, Math.min(2, availableParallelism() - 1));
// A slice: texts up to this many UTF-16 units (or id lists up to this many ids), about 20-50 ms of one thread.
const SLICE_UNITS = 32 * 1024;
const DEDUPLICATED_UNITS = 4096;

export interface TextToEncode {
  text: string;
  addSpecialTokens: boolean;
  limit?: number | undefined;   // more tokens than this: only their count comes back
}

/** A text's ids, or — over its limit — only their count. */
export type EncodeResult = { ids: number[] } | { count: number };

/** Why a job ended early: the request it tokenizes was abandoned. */
export class TokenizeAborted extends Error {
  constructor() {
    super('the request was abandoned while its text was being tokenized');
    this.name = 'TokenizeAborted';
  }
}

interface Job {
  items: readonly (string | readonly number[])[];
  special: readonly boolean[];        // encode only
  limits: readonly number[];          // encode only; -1: none
  decode: boolean;
  next: number;                       // the first item not yet sent
  inFlight: number;                   // slices sent and not answered
  results: unknown[];
  settle(error?: Error): void;
  done: boolean;
}

interface Thread {
  worker: Worker;
  ready: boolean;
  gone: boolean;
  slice: { id: number; job: Job; from: number } | undefined;
}

export class TokenizerPool {
  private readonly threads: Thread[] = [];
  private readonly waiting: Job[] = [];     // round robin: a job gives one slice, then goes to the back
  private readonly pending = new Set<Promise<unknown>>();
  private readonly hold = new Int32Array(new SharedArrayBuffer(4));
  private readonly heldWaiters: (() => void)[] = [];
  private readonly started: Promise<void>;
  private nextSliceId = 1;
  private held = 0;
  private failure: Error | undefined;
  private closed = false;

  constructor(private readonly modelDir: string, size = DEFAULT_TOKENIZER_THREADS) {
    if (!Number.isInteger(size) || size < 1) throw new TrtllmError(`Expected the tokenizer pool's "size" to be an integer >= 1, got ${String(size)}`, 'invalid_argument');
    this.started = Promise.all(Array.from({ length: size }, () => this.spawn())).then(() => undefined);
    // A failed start is reported by ready() and by every job; it must not also surface as an unhandled rejection.
    this.started.catch(() => {});
  }

  /** Resolves once every thread has loaded the tokenizer; rejects with why one could not. */
  ready(): Promise<void> {
    return this.started;
  }

  /** Jobs not yet answered (waiting or in a thread). */
  get jobs(): number {
    return this.pending.size;
  }

  /** Token ids of each text; a text with more tokens than its `limit` comes back as its count only. */
  async encode(texts: readonly TextToEncode[], signal?: AbortSignal): Promise<EncodeResult[]> {
    // The same short text twice (one stop-word list for every prompt of a batch) is tokenized once; long texts are
    // not hashed on the event loop to find a duplicate they are unlikely to have.
    const unique = new Map<string, number>();
    const items: string[] = [];
    const special: boolean[] = [];
    const limits: number[] = [];
    const slot = texts.map(({ text, addSpecialTokens, limit }) => {
      const key = text.length <= DEDUPLICATED_UNITS ? `${addSpecialTokens ? 1 : 0}${limit ?? -1} ${text}` : undefined;
      let i = key === undefined ? undefined : unique.get(key);
      if (i === undefined) {
        i = items.length;
        if (key !== undefined) unique.set(key, i);
        items.push(text);
        special.push(addSpecialTokens);
        limits.push(limit ?? -1);
      }
      return i;
    });
    const results = await this.run(items, { special, limits }, signal) as EncodedText[];
    return slot.map((i) => {
      const r = results[i]!;
      return r instanceof Int32Array ? { ids: Array.from(r) } : { count: r.count };
    });
  }

  /** The text of each id list (special tokens skipped, as TextTokenizer.decode). */
  async decode(lists: readonly (readonly number[])[], signal?: AbortSignal): Promise<string[]> {
    return await this.run(lists, undefined, signal) as string[];
  }

  /**
   * Resolves once no job is left — and the requests they tokenized for have moved on (a turn of the event loop
   * after the last one) — or at `deadline` (epoch ms): a drain lets the requests already being tokenized reach
   * the executor before it waits for the executor's own.
   */
  async settled(deadline: number): Promise<void> {
    while (this.pending.size > 0 && Date.now() < deadline) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...this.pending]),
        new Promise((resolve) => { timer = setTimeout(resolve, Math.max(0, deadline - Date.now())); }),
      ]);
      clearTimeout(timer);
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** Test hold: every slice a thread takes from now waits in that thread, before tokenizing, until releaseTasks. */
  holdTasks(): void {
    Atomics.store(this.hold, 0, 1);
  }

  releaseTasks(): void {
    this.held = 0;
    Atomics.store(this.hold, 0, 0);
    Atomics.notify(this.hold, 0);
  }

  /** Resolves once a thread holds a slice (at once if one does): the text is in that thread, not yet tokenized. */
  awaitHeldTask(): Promise<void> {
    if (this.held > 0) return Promise.resolve();
    return new Promise((resolve) => this.heldWaiters.push(resolve));
  }

  /** Ends the threads; jobs still waiting fail. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.releaseTasks();
    this.failAll(new TrtllmError('the tokenizer pool has been closed', 'shutdown'));
    await Promise.all(this.threads.map((t) => t.worker.terminate()));
  }

  /** `encoding` undefined: the items are id lists to decode. */
  private run(
    items: readonly (string | readonly number[])[], encoding: { special: readonly boolean[]; limits: readonly number[] } | undefined,
    signal: AbortSignal | undefined,
  ): Promise<unknown[]> {
    if (this.closed) return Promise.reject(new TrtllmError('the tokenizer pool has been closed', 'shutdown'));
    if (this.failure) return Promise.reject(this.failure);
    if (signal?.aborted) return Promise.reject(new TokenizeAborted());
    if (items.length === 0) return Promise.resolve([]);
    const promise = new Promise<unknown[]>((resolve, reject) => {
      const job: Job = {
        items, special: encoding?.special ?? [], limits: encoding?.limits ?? [], decode: encoding === undefined, next: 0, inFlight: 0, results: new Array(items.length), done: false,
        settle: (error) => {
          if (job.done) return;
          job.done = true;
          signal?.removeEventListener('abort', onAbort);
          const at = this.waiting.indexOf(job);
          if (at >= 0) this.waiting.splice(at, 1);
          if (error) reject(error);
          else resolve(job.results);
        },
      };
      // An abandoned request's slices not yet sent are dropped; a slice a thread is running finishes unheard.
      const onAbort = () => job.settle(new TokenizeAborted());
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(job);
    });
    this.pending.add(promise);
    const forget = () => { this.pending.delete(promise); };
    promise.then(forget, forget);
    this.pump();
    return promise;
  }

  /** Gives each idle thread the next slice, taking jobs in turn. */
  private pump(): void {
    for (const thread of this.threads) {
      if (!thread.ready || thread.slice) continue;
      const job = this.waiting.shift();
      if (!job) return;
      const from = job.next;
      let units = 0;
      do {
        const item = job.items[job.next]!;
        units += item.length;
        job.next += 1;
      } while (job.next < job.items.length && units + job.items[job.next]!.length <= SLICE_UNITS);
      if (job.next < job.items.length) this.waiting.push(job);
      job.inFlight += 1;
      const id = this.nextSliceId++;
      thread.slice = { id, job, from };
      const request: SliceRequest = job.decode
        ? { id, decode: job.items.slice(from, job.next) as number[][] }
        : { id, encode: { texts: job.items.slice(from, job.next) as string[], special: job.special.slice(from, job.next), limits: job.limits.slice(from, job.next) } };
      thread.worker.postMessage(request);
    }
  }

  private spawn(): Promise<void> {
    const data: ThreadData = { modelDir: this.modelDir, hold: this.hold.buffer as SharedArrayBuffer };
    const worker = new Worker(new URL('./tokenizer-thread.js', import.meta.url), { workerData: data });
    worker.unref();  // an idle pool never keeps a process alive
    const thread: Thread = { worker, ready: false, gone: false, slice: undefined };
    this.threads.push(thread);
    return new Promise<void>((resolve, reject) => {
      // A thread that never loaded leaves the pool broken: the tokenizer is the model's, so another thread would
      // fail the same way, and every job fails with the cause rather than waiting. One that dies later fails only
      // the slice it held, and a new thread takes its place.
      const lost = (error: Error) => {
        if (this.closed || thread.gone) return;
        thread.gone = true;
        this.threads.splice(this.threads.indexOf(thread), 1);
        if (!thread.ready) {
          this.failure ??= error;
          this.failAll(this.failure);
          reject(this.failure);
          return;
        }
        thread.slice?.job.settle(error);
        this.spawn().catch(() => {});
      };
      worker.on('message', (m: ThreadMessage) => {
        switch (m.type) {
          case 'ready':
            thread.ready = true;
            resolve();
            this.pump();
            return;
          case 'failed':
            lost(new TrtllmError(`the tokenizer thread could not load ${this.modelDir}: ${m.message}`, 'bad_checkpoint'));
            return;
          case 'held':
            this.held += 1;
            for (const wake of this.heldWaiters.splice(0)) wake();
            return;
          case 'done':
          case 'error':
            this.answered(thread, m);
        }
      });
      worker.on('error', (error) => lost(new TrtllmError(`a tokenizer thread failed: ${error.message}`, 'internal')));
      worker.on('exit', (code) => lost(new TrtllmError(`a tokenizer thread exited (code ${code})`, 'internal')));
    });
  }

  private answered(thread: Thread, m: Extract<ThreadMessage, { type: 'done' | 'error' }>): void {
    const slice = thread.slice;
    if (!slice || slice.id !== m.id) return;
    thread.slice = undefined;
    const { job, from } = slice;
    job.inFlight -= 1;
    if (m.type === 'error') {
      job.settle(new TrtllmError(`tokenizing failed: ${m.message}`, 'internal'));
    } else {
      const out = m.encoded ?? m.decoded ?? [];
      for (let i = 0; i < out.length; i += 1) job.results[from + i] = out[i];
      if (job.next === job.items.length && job.inFlight === 0) job.settle();
    }
    this.pump();
  }

  private failAll(error: Error): void {
    for (const thread of this.threads) {
      if (thread.slice) thread.slice.job.settle(error);
      thread.slice = undefined;
    }
    for (const job of this.waiting.splice(0)) job.settle(error);
  }
}
