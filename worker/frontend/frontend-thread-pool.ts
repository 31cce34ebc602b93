// The event loop's side of frontend-thread.ts: one thread, started on first use, holding the process open only
// while it has work. A thread that dies fails the tasks it held (callers fall back or answer an error); the next
// task starts a new one.
import { Worker } from 'node:worker_threads';

import { HttpError } from './http-errors.js';
import type { ThreadReply, ThreadTask } from './frontend-thread.js';

let thread: Worker | undefined;
let nextId = 1;
const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
/** Tasks sent to the thread so far, by kind (tests check which work went there). */
export const offloaded: Record<ThreadTask['kind'], number> = { parse: 0, print: 0 };

function start(): Worker {
  const w = new Worker(new URL('./frontend-thread.js', import.meta.url));
  w.on('message', (reply: ThreadReply) => {
    const waiter = waiting.get(reply.id);
    if (!waiter) return;
    waiting.delete(reply.id);
    if (waiting.size === 0) w.unref();
    if ('value' in reply) waiter.resolve(reply.value);
    else waiter.reject(new HttpError(reply.status, reply.message));
  });
  const fail = (error: Error) => {
    if (thread === w) thread = undefined;
    for (const [id, waiter] of waiting) {
      waiting.delete(id);
      waiter.reject(new Error(`the frontend's worker thread stopped: ${error.message}`));
    }
  };
  w.on('error', fail);
  w.on('exit', (code) => fail(new Error(`exit code ${code}`)));
  w.unref();  // idle (after the listeners: attaching 'message' refs the thread again)
  return w;
}

/** Runs `task` on the thread; `transfer` lists the buffers handed over (not copied). Tasks run in the order sent. */
export function offload<T>(task: ThreadTask, transfer: ArrayBuffer[]): Promise<T> {
  thread ??= start();
  const id = nextId++;
  offloaded[task.kind] += 1;
  return new Promise<T>((resolve, reject) => {
    if (waiting.size === 0) thread!.ref();  // a task in flight keeps the process alive until its answer
    waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
    thread!.postMessage({ id, task }, transfer);
  });
}
