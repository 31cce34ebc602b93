// The checks of --model that need no rank, made by the launcher before mpirun or srun starts anything: the directory
// is there, config.json reads and names a supported architecture, tokenizer.json is there, and the tp x pp grid
// can split the model. Without them a typo costs a whole cluster start and the error comes from inside the ranks.
// The config and grid checks are the engine's own code (the addon's readModelConfig and checkParallelLayout, what
// every rank runs when it loads), so the launcher cannot disagree with the ranks; it only adds the option's name.
import { statSync } from 'node:fs';
import { join, resolve } from 'node:path';

import { InvalidArgumentError } from 'commander';

import type { Addon } from '../worker/binding/addon-types.js';

export interface ModelPreflight {
  model: string;                 // --model as given
  tp: number;
  pp: number;
  ep?: number;                   // experts split over ep groups of the tp ranks (default 1)
  ppLayers?: string | undefined; // --pp-layers: layers per pipeline stage (default an even split)
  // The ranks may run on other hosts (--hosts, --hostfile): a directory missing here is theirs to look for.
  ranksElsewhere: boolean;
}

/** Throws InvalidArgumentError naming the option and value; returns a note to print when it could not look. */
export function checkModelBeforeLaunch(p: ModelPreflight, addon: Pick<Addon, 'readModelConfig' | 'checkParallelLayout'>): string | undefined {
  const dir = resolve(p.model);
  const stat = statSync(dir, { throwIfNoEntry: false });
  if (!stat) {
    if (p.ranksElsewhere) return `--model ${p.model}: no such directory on this host; the ranks will look for it at ${dir} on theirs`;
    throw new InvalidArgumentError(`--model ${p.model}: no such directory (${dir}); give a Hugging Face checkpoint directory (config.json, tokenizer.json, *.safetensors)`);
  }
  if (!stat.isDirectory()) throw new InvalidArgumentError(`--model ${p.model}: ${dir} is not a directory; give the checkpoint directory that holds config.json`);
  const engine = (what: () => void): string | undefined => {
    try {
      what();
      return undefined;
    } catch (error) {
      return (error as Error).message;
    }
  };
  const config = engine(() => addon.readModelConfig(dir));
  if (config !== undefined) throw new InvalidArgumentError(`--model ${p.model}: ${config}`);
  // The leader's frontend loads it whatever --load-format says (worker/tokenizer.ts): its text routes and request
  // defaults (end and pad ids) come from it, so a cluster without it would fail in rank 0 after every rank loaded.
  const tokenizer = join(dir, 'tokenizer.json');
  if (!statSync(tokenizer, { throwIfNoEntry: false })?.isFile()) {
    throw new InvalidArgumentError(`--model ${p.model}: ${tokenizer} is missing; the server needs the checkpoint's tokenizer.json (its text interface and default end/pad ids come from it)`);
  }
  const ep = p.ep ?? 1;
  const grid = engine(() => addon.checkParallelLayout(dir, p.tp, p.pp, ep, p.ppLayers));
  if (grid !== undefined) {
    throw new InvalidArgumentError(`--tp ${p.tp} x --pp ${p.pp}${ep > 1 ? ` with --ep ${ep}` : ''}${p.ppLayers ? ` and --pp-layers ${p.ppLayers}` : ''} cannot split --model ${p.model}: ${grid}`);
  }
  return undefined;
}
