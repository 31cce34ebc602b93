// A rank's ServeOptions from the options it was started with (pure): every option ranks get (flags or env) under its
// own name, or as its definition's `served` says (seconds to milliseconds, the rank's GPU from the list); the grid
// from the parallel plan. One function for the in-process server, a rank of a cluster and a model of --multi-model.
import { SERVE_OPTIONS, type ServeCliOptions } from './serve-option-table.js';
import type { ServeOptions } from './serve-options.js';

export function serveOptions(options: Readonly<ServeCliOptions>, parallel: { tp: number; pp: number }, localRank = 0): ServeOptions {
  const serve: Record<string, unknown> = {};
  for (const d of SERVE_OPTIONS) {
    if (d.rank === 'grid') {
      serve[d.name] = parallel[d.name as keyof typeof parallel];
    } else if (d.rank === 'argv' || d.rank === 'env') {
      const value = options[d.name];
      if (value !== undefined) Object.assign(serve, d.served ? d.served(value as never, localRank) : { [d.name]: value });
    }
  }
  return serve as unknown as ServeOptions;
}
