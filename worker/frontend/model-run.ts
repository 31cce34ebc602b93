// What running a served model produces, whichever model it is: per batch element, a stream of output tensor sets.
// The models (kserve-text-model, kserve-token-model, kserve-processing) produce runs and the endpoints consume them;
// kserve-run.ts only picks the model. Kept apart from that dispatcher so no model module imports it back (a cycle).

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
}

export interface ModelRun {
  batchSize: number;
  events: AsyncIterable<ElementEvent>;
}

export interface RunOptions {
  signal: AbortSignal;
  requestId?: string;
  streamEndpoint: boolean;   // generate_stream / ModelStreamInfer: a response per iteration is possible
  streamByDefault?: boolean; // what a request without `stream` / `streaming` gets there (default true: generate_stream)
  /** A promise that settles once the caller is done with the outputs (its answer written, or the client gone),
   * asked for only by a run that holds logits budget, which it keeps until then. Absent: until the events end or the
   * signal aborts (logits-budget.ts). */
  settled?: () => Promise<unknown>;
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
