// One request in flight, as the frontend holds it: the executor (or, in orchestrator mode, the proxy of a worker
// group's executor) pushes each response in; the frontend iterates them (streaming) or awaits the final one.
import type { NativeResponse } from '../binding/addon-types.js';
import { TrtllmError } from '../common/errors.js';

/** One request in flight: iterate its responses, or await its final one. */
export class RequestHandle implements AsyncIterable<NativeResponse> {
  readonly id: number;
  private readonly pending: NativeResponse[] = [];
  private waiter: (() => void) | undefined;
  private finished = false;
  private readonly done: Promise<NativeResponse[]>;
  private resolveDone!: (all: NativeResponse[]) => void;
  private readonly all: NativeResponse[] = [];

  constructor(id: number, private readonly onCancel: (id: number) => void) {
    this.id = id;
    this.done = new Promise((resolve) => { this.resolveDone = resolve; });
  }

  /** Called by the executor's router with each response for this request. */
  push(response: NativeResponse): void {
    this.pending.push(response);
    this.all.push(response);
    if (response.isFinal) {
      this.finished = true;
      this.resolveDone(this.all);
    }
    this.waiter?.();
  }

  cancel(): void {
    if (!this.finished) this.onCancel(this.id);
  }

  /** Every response of the request, once the final one arrived. */
  responses(): Promise<NativeResponse[]> {
    return this.done;
  }

  /** The final response; rejects with a TrtllmError if the engine failed the request. */
  async result(): Promise<NativeResponse> {
    const all = await this.done;
    const last = all[all.length - 1]!;
    if (last.error) throw new TrtllmError(last.error.message, last.error.code);
    return last;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<NativeResponse> {
    for (;;) {
      while (this.pending.length > 0) {
        const next = this.pending.shift()!;
        if (next.error) throw new TrtllmError(next.error.message, next.error.code);
        yield next;
        if (next.isFinal) return;
      }
      if (this.finished) return;
      await new Promise<void>((resolve) => { this.waiter = resolve; });
      this.waiter = undefined;
    }
  }
}
