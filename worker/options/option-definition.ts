// What one option is, in one place: its flag, env variable, configuration-file key, kind (its check), default and
// help; how a rank of a cluster gets it; and which executor setting it becomes. The launcher derives its commander
// options, the file schema, `config print`, the ranks' argv and job scripts from these; the worker derives the
// executor's and a follower's settings (executor-options.ts). Types only.
import type { ExecutorOptions } from '../executor/executor.js';
import type { ServeOptions } from './serve-options.js';
import type { ValueKind } from './value-kinds.js';

export interface OptionDefinition<Name extends string = string> {
  readonly name: Name;                // the attribute commander sets: 'maxBatchSize'
  readonly flag: `--${string}`;       // '--max-batch-size'
  readonly placeholder?: string;      // '<n>', for kinds of the 'value' form
  readonly env?: string;              // 'TRTLLM_MAX_BATCH_SIZE'
  readonly kind: ValueKind;
  readonly default?: unknown;         // what applies when no flag, env or file sets it
  readonly defaultFrom?: () => unknown;  // a default read when the options are built (the bundled model's path)
  readonly help: string;
  readonly file?: FileKey;
  /** How a rank of a cluster gets it: 'argv' as a flag (when set); 'env' in its environment (a secret is not for
   * `ps`); 'grid' written by the launcher from its parallel plan (--tp, --pp). Absent: the launcher's own. */
  readonly rank?: 'argv' | 'env' | 'grid';
  /** A Slurm job script: 'rendered' by the script writer itself (model, grid, log dir, srun arguments), or 'never'
   * written into a file (the API key, --dry-run). Absent: forwarded when the user set it. */
  readonly job?: 'rendered' | 'never';
  readonly path?: true;               // a path relative to where it was given: made absolute for a job script
  readonly secret?: true;             // never printed (`config print` says "(set)")
  /** How the value lands in a rank's ServeOptions when not as is under its own name (seconds become milliseconds, a
   * rank picks its GPU from the list). Only for options ranks get. */
  readonly served?: (value: never, localRank: number) => Partial<ServeOptions>;
  readonly executor?: ExecutorBinding;
}

/** The option's key in a configuration file. */
export interface FileKey {
  readonly key: string;               // dotted: 'batching.max_batch_size'
  readonly unset?: string;            // what applies when nothing sets it (the executor's default), for `config print`
  /** Why a set value has no effect on the CPU backend; absent: it applies on every backend. */
  readonly cpuIgnores?: string;
}

/** The executor setting an option becomes (worker/options/executor-options.ts). */
export interface ExecutorBinding {
  readonly field: keyof ExecutorOptions;
  /** Followers load with it too: it picks their device or sizes their buffers (NativeLoadOptions). */
  readonly follower?: true;
  /** The ServeOptions field the value arrives in, when not the option's own name (a rank's pick of a list). */
  readonly from?: keyof ServeOptions;
}
