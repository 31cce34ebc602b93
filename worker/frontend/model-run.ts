// What running a served model produces, whichever model it is: per batch element, a stream of output tensor sets.
// The models (kserve-text-model, kserve-token-model, kserve-processing) produce runs and the endpoints consume them;
// kserve-run.ts only picks the model. Kept apart from that dispatcher so no model module imports it back (a cycle).
import type { FinishReason } from '../binding/addon-types.js';
import type { RequestHandle } from '../executor/request-handle.js';
import type { RequestId, StopOutcome } from './live-requests.js';

export interface OutputTensor {
  name: string;
  datatype: 'BYTES' | 'INT32' | 'FP32' | 'BOOL';
  shape: number[];     // of one batch element
  data: unknown[] | Float32Array;  // logits stay the engine's Float32Array: never a JS array of a number per value
  pad?: unknown;       // fills ragged elements when a batch is stacked into one tensor
}

export interface ElementEvent {
  batchIndex: number;
  outputs: OutputTensor[];
  final: boolean;      // the last event of this batch element
  finishReason?: FinishReason | undefined;   // on the final event: how the element ended ('cancelled': by a stop)
}

export interface ModelRun {
  batchSize: number;
  events: AsyncIterable<ElementEvent>;
  stop?: Promise<StopOutcome>;   // a stop request's answer (it has no events): what it cancelled
}

export interface RunOptions {
  signal: AbortSignal;
  requestId?: RequestId;
  streamEndpoint: boolean;   // generate_stream / ModelStreamInfer: a response per iteration is possible
  streamByDefault?: boolean; // what a request without `stream` / `streaming` gets there (default true: generate_stream)
  onEnqueued?: (handle: RequestHandle) => void;  // each executor request, as it is enqueued (a stop by id cancels them)
  /** A promise that settles once the caller is done with the outputs (its answer written, or the client gone),
   * asked for only by a run that holds logits budget, which it keeps until then. Absent: until the events end or the
   * signal aborts (logits-budget.ts). */
  settled?: () => Promise<unknown>;
}

/** The final events' finish reasons of a run's elements as they pass, so a whole answer can say which ended
 * cancelled once the events are consumed. */
export function watchFinish(events: AsyncIterable<ElementEvent>): { events: AsyncIterable<ElementEvent>; reasons: (FinishReason | undefined)[] } {
  const reasons: (FinishReason | undefined)[] = [];
  return {
    reasons,
    events: (async function* () {
      for await (const e of events) {
        if (e.final) reasons[e.batchIndex] = e.finishReason;
        yield e;
      }
    })(),
  };
}

/** Wraps already-computed element results (pre/postprocessing) as a run. */
export function immediateRun(elements: OutputTensor[][]): ModelRun {
  return {
    batchSize: elements.length,
    events: (async function* () {
      for (let i = 0; i < elements.length; i += 1) yield { batchIndex: i, outputs: elements[i]!, final: true };
    })(),
  };
}
