// The exact mpirun command line for a cluster (pure): Open MPI's or MPICH hydra's spelling, the rank program and
// the environment every rank needs forwarded. Snapshot-tested; printed verbatim by --dry-run.
export type MpiFlavor = 'openmpi' | 'mpich';

export interface MpirunInput {
  flavor: MpiFlavor;
  mpirun: string;               // the mpirun found on PATH
  np: number;
  isRoot: boolean;              // Open MPI refuses root without --allow-run-as-root
  oversubscribe: boolean;
  hostfile?: string | undefined;
  hosts?: string | undefined;   // "a,b" or "a:2,b:2"
  forwardEnv: string[];         // variable names every rank must see
  rankArgv: string[];           // node <bin> rank <options...>
  // Orchestrator mode: a process that dies must not take the job down (the orchestrator isolates its group).
  survive?: boolean;
}

export interface MpirunCommand {
  file: string;
  args: string[];
}

/** Which MPI `mpirun --version` belongs to. */
export function mpiFlavor(versionText: string): MpiFlavor {
  return /HYDRA|MPICH/i.test(versionText) && !/Open MPI|OpenRTE/i.test(versionText) ? 'mpich' : 'openmpi';
}

export function mpirunCommand(input: MpirunInput): MpirunCommand {
  const args: string[] = [];
  if (input.flavor === 'openmpi') {
    // When a rank dies, Open MPI by default waits 1 s after SIGCONT and again after SIGTERM before it kills the
    // others: 2 s in which a gang that cannot serve anyway holds its ports. The leader's drain does not go through
    // mpirun (the launcher signals the leader itself), so nothing is lost by killing at once.
    args.push('-np', String(input.np), '--tag-output', '--bind-to', 'none', '--mca', 'odls_base_sigkill_timeout', '0');
    if (input.oversubscribe) args.push('--oversubscribe');
    if (input.isRoot) args.push('--allow-run-as-root');
    if (input.survive) args.push('--enable-recovery');
    if (input.hostfile) args.push('--hostfile', input.hostfile);
    if (input.hosts) args.push('--host', input.hosts);
    for (const name of input.forwardEnv) args.push('-x', name);
  } else {
    args.push('-n', String(input.np), '-prepend-rank');
    if (input.survive) args.push('-disable-auto-cleanup');
    if (input.hostfile) args.push('-f', input.hostfile);
    if (input.hosts) args.push('-hosts', input.hosts);
    if (input.forwardEnv.length > 0) args.push('-genvlist', input.forwardEnv.join(','));
  }
  return { file: input.mpirun, args: [...args, ...input.rankArgv] };
}

/** A shell-pasteable rendering of a command. */
export function shellQuote(parts: string[]): string {
  return parts.map((p) => (/^[\w@%+=:,./-]+$/.test(p) ? p : `'${p.replace(/'/g, `'\\''`)}'`)).join(' ');
}

export interface SrunInput {
  srun: string;
  np: number;
  mpiPlugin: string;            // what `srun --mpi=list` offers: pmix preferred, else pmi2
  cpusPerTask?: number | undefined;  // the job's --cpus-per-task: srun no longer inherits it (Slurm >= 22.05)
  extraArgs?: string[] | undefined;  // --srun-args: site flags such as pyxis's --container-image
  rankArgv: string[];
  survive?: boolean;            // orchestrator mode: keep the step when one task fails
}

/** Inside a Slurm allocation: one task per rank, labelled output, the whole step killed when one task fails. */
export function srunCommand(input: SrunInput): MpirunCommand {
  const args = [`--mpi=${input.mpiPlugin}`, '-n', String(input.np)];
  if (input.cpusPerTask !== undefined) args.push(`--cpus-per-task=${input.cpusPerTask}`);
  args.push('--label', `--kill-on-bad-exit=${input.survive ? 0 : 1}`, '--export=ALL', ...(input.extraArgs ?? []));
  return { file: input.srun, args: [...args, ...input.rankArgv] };
}

/** Splits --srun-args the way a shell would split unquoted words, keeping '...' and "..." groups (pure). */
export function splitArgs(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/(?:[^\s'"]+|'[^']*'|"[^"]*")+/g)) out.push(m[0].replace(/'([^']*)'|"([^"]*)"/g, '$1$2'));
  return out;
}

/** The MPI plugin to ask srun for, from `srun --mpi=list`'s output (pure). */
export function srunMpiPlugin(listOutput: string): string {
  if (/\bpmix\b/.test(listOutput)) return 'pmix';
  if (/\bpmi2\b/.test(listOutput)) return 'pmi2';
  return 'none';
}

export type LauncherKind = 'auto' | 'mpirun' | 'srun' | 'none';

/** `--launcher auto`: srun inside a Slurm allocation, else mpirun for several ranks, else one in-process rank. */
export function chooseLauncher(kind: LauncherKind, worldSize: number, env: NodeJS.ProcessEnv): Exclude<LauncherKind, 'auto'> {
  if (kind !== 'auto') return kind;
  if (worldSize === 1) return 'none';
  return env.SLURM_JOB_ID !== undefined ? 'srun' : 'mpirun';
}
