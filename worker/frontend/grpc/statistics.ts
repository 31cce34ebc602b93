// ModelStatistics: Triton's per-model counters, read back from the Prometheus registry that already counts them
// (nv_inference_* in microseconds), so the gRPC answer and the metrics port can never disagree.
import type { Counter } from 'prom-client';

import { MODEL_VERSION } from '../metrics.js';
import type { ModelCatalog } from '../model-catalog.js';
import type { ServingContext } from '../serving-context.js';

const COUNTERS = [
  'nv_inference_request_success', 'nv_inference_request_failure', 'nv_inference_count', 'nv_inference_exec_count',
  'nv_inference_request_duration_us', 'nv_inference_queue_duration_us', 'nv_inference_compute_input_duration_us',
  'nv_inference_compute_infer_duration_us', 'nv_inference_compute_output_duration_us',
] as const;
type CounterName = (typeof COUNTERS)[number];

async function valuesByModel(ctx: ServingContext): Promise<Map<string, Record<CounterName, number>>> {
  const out = new Map<string, Record<CounterName, number>>();
  for (const name of COUNTERS) {
    const metric = ctx.metrics.registry.getSingleMetric(name) as Counter | undefined;
    for (const v of (await metric?.get())?.values ?? []) {
      const model = String(v.labels.model);
      const row = out.get(model) ?? (Object.fromEntries(COUNTERS.map((c) => [c, 0])) as Record<CounterName, number>);
      row[name] += v.value;
      out.set(model, row);
    }
  }
  return out;
}

/** The statistics of one model (name given) or of every served model (name empty). */
export async function modelStatistics(catalog: ModelCatalog, name: string, version: string): Promise<{ model_stats: unknown[] }> {
  // Every model's counters live in one registry (orchestrator mode shares it), so any context reads them all.
  const names = name === '' ? catalog.index().map((m) => m.name) : [catalog.resolve(name, version).model.name];
  const ctx = catalog.contexts()[0];
  const values = ctx ? await valuesByModel(ctx) : new Map<string, Record<CounterName, number>>();
  const ns = (us: number) => Math.round(us * 1000);
  return {
    model_stats: names.map((model) => {
      const v = values.get(model) ?? (Object.fromEntries(COUNTERS.map((c) => [c, 0])) as Record<CounterName, number>);
      const ok = v.nv_inference_request_success;
      const exec = v.nv_inference_exec_count;
      return {
        name: model,
        version: MODEL_VERSION,
        last_inference: 0,
        inference_count: v.nv_inference_count,
        execution_count: exec,
        inference_stats: {
          success: { count: ok, ns: ns(v.nv_inference_request_duration_us) },
          fail: { count: v.nv_inference_request_failure, ns: 0 },
          queue: { count: ok, ns: ns(v.nv_inference_queue_duration_us) },
          compute_input: { count: exec, ns: ns(v.nv_inference_compute_input_duration_us) },
          compute_infer: { count: exec, ns: ns(v.nv_inference_compute_infer_duration_us) },
          compute_output: { count: exec, ns: ns(v.nv_inference_compute_output_duration_us) },
          cache_hit: { count: 0, ns: 0 },
          cache_miss: { count: 0, ns: 0 },
        },
        batch_stats: [],
      };
    }),
  };
}
