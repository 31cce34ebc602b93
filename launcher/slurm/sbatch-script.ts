// The sbatch script of a serving job (pure): #SBATCH lines a cluster user can read and edit, each with a comment
// saying why it is there, then `exec` of the launcher, which runs the ranks with srun inside the allocation.
import { shellQuote } from '../cluster/mpirun-command.js';
import type { JobPlan } from './job-plan.js';

export interface ScriptInput {
  plan: JobPlan;
  /** How the job starts trtllm-launch on the node, as shell words ("trtllm-launch", "/usr/bin/node /opt/x/bin/trtllm-launch.js"). */
  launch: string;
  /** Model directory for --model; undefined: the launcher's default (its bundled model). */
  model?: string | undefined;
  /** --log-dir the user gave; undefined: one directory per job beside the output file. */
  logDir?: string | undefined;
  /** Further serve options, as argv (forwardedServeArgs): a flag, then its value unless the next word is a flag. */
  serveArgs: string[];
  /** The command that rendered this script, recorded in its header (without the program name). */
  renderedBy: string[];
}

function directive(on: boolean, text: string): string {
  return `${on ? '#SBATCH' : '##SBATCH'} ${text}`;
}

export function renderSbatchScript(input: ScriptInput): string {
  const { plan } = input;
  const { tp, pp, worldSize } = plan.serve.parallel;
  const dp = plan.serve.dp ?? 1;
  const perNode = plan.nodes === 1 ? `on 1 node` : `on ${plan.nodes} nodes, ${plan.tasksPerNode} per node`;
  const grid = dp > 1
    ? `${dp} replicas of tp ${tp} x pp ${pp} behind an orchestrator = ${1 + dp * worldSize} tasks`
    : `tp ${tp} x pp ${pp} = ${worldSize} rank${worldSize === 1 ? '' : 's'}`;
  const port = plan.serve.httpPort;
  const out = plan.outputDir;
  const lines: string[] = [
    '#!/bin/bash',
    `# trtllm-launch serving job: ${grid} ${perNode}.`,
    `# Rendered by: trtllm-launch ${shellQuote(input.renderedBy)}`,
    '#',
    `#   submit:  mkdir -p ${out} && sbatch <this file>`,
    '#            (`trtllm-launch slurm submit` with the same options writes, submits and follows it, then prints',
    '#            the endpoint, or the failure and the log lines that explain it)',
    `#   output:  ${out}/<job name>-<job id>.out holds the launcher's lines and every rank's, as "[rank N] ..."`,
    '#   stop:    trtllm-launch slurm stop <job id>   (= scancel --batch --signal=TERM <job id>: drains, then stops)',
    '#            A plain `scancel <job id>` stops at once: srun answers the SIGTERM Slurm sends it by killing the ranks.',
    `#   reach:   the output says "serving on http://<node>:${port}"; from a login node:`,
    `#              curl -X POST <node>:${port}/v2/models/ensemble/generate -d '{"text_input": "What is machine learning?", "max_tokens": 20}'`,
    `#            from your own machine, through the login node: ssh -L ${port}:<node>:${port} <login node>, then localhost:${port}`,
    '#',
    '# ---- What to ask Slurm for. Edit to your site; a line starting with ## is switched off. ----',
    directive(true, `--job-name=${plan.jobName}`),
    '# Your account and partition (`sacctmgr show associations user=$USER format=account,partition`, `sinfo -s`);',
    '# switched off, the site defaults apply.',
    directive(plan.account !== undefined, `--account=${plan.account ?? '<your account>'}`),
    directive(plan.partition !== undefined, `--partition=${plan.partition ?? '<your partition>'}`),
    '# One Slurm task per rank, the same number on every node. The launcher starts them itself with srun',
    '# (so no --ntasks here, and no srun below).',
    directive(true, `--nodes=${plan.nodes}`),
    ...(dp > 1 ? [plan.nodes === 1
      ? `# --dp ${dp}: one task more than the replicas' ${dp * worldSize} ranks: the orchestrator (task 0), which serves HTTP and routes.`
      : `# --dp ${dp}: one task slot a node more than its ${plan.tasksPerNode - 1} rank(s); the first node's runs the orchestrator (task 0), which\n`
        + '# serves HTTP and routes (the launcher lays the tasks out with srun --distribution=arbitrary; the others stay free).'] : []),
    directive(true, `--ntasks-per-node=${plan.tasksPerNode}`),
  ];
  if (plan.nodes > 1) {
    lines.push(plan.tasksPerNode % tp === 0
      ? `# Ranks fill the nodes in order, so each tensor-parallel group (${tp} consecutive ranks) stays inside one node and only${pp > 1 ? '\n# pipeline stages talk across nodes.' : '\n# the leader\'s iteration plan crosses nodes.'}`
      : `# Tensor-parallel groups (${tp} ranks) span nodes here (${plan.tasksPerNode} rank${plan.tasksPerNode === 1 ? '' : 's'} per node): their all-reduces cross the network.`);
  }
  if (plan.gpusPerNode !== undefined) {
    lines.push('# One GPU per rank; each rank takes the GPU at its local task number (SLURM_LOCALID).', directive(true, `--gpus-per-node=${plan.gpusPerNode}`));
  } else {
    lines.push('# No GPUs asked for: the ranks run the CPU backend. For GPU ranks add --gpus-per-node (one GPU per rank).', directive(false, `--gpus-per-node=${plan.tasksPerNode}`));
  }
  if (plan.cpusPerTask !== undefined) {
    lines.push('# CPU cores per rank; also the compute threads of each rank (unless --threads says otherwise).', directive(true, `--cpus-per-task=${plan.cpusPerTask}`));
  }
  lines.push('# Wall-clock limit.', directive(true, `--time=${plan.time}`));
  if (plan.signalSeconds !== undefined) {
    lines.push(
      `# ${plan.signalSeconds} s before the limit Slurm sends SIGTERM to this script, that is to the launcher (see exec below):`,
      `# it drains in-flight requests (up to --drain-timeout ${plan.serve.drainTimeout} s) and stops every rank before the limit`,
      '# kills anything. Slurm may send it up to a minute early.',
      directive(true, `--signal=B:TERM@${plan.signalSeconds}`),
    );
  }
  lines.push(
    '# Where the output goes, relative to the directory you submit from; the directory must exist (Slurm does not',
    '# create it) and be visible from the login node for `trtllm-launch slurm submit` to follow the job.',
    directive(true, `--output=${out}/%x-%j.out`),
  );
  if (plan.extraDirectives.length > 0) lines.push('# Site options (--sbatch-arg).', ...plan.extraDirectives.map((d) => directive(true, d)));

  const logDir = input.logDir !== undefined ? shellQuote([input.logDir]) : `${out}/"\${SLURM_JOB_NAME}-\${SLURM_JOB_ID}"`;
  // One option per line: a flag and its value (flags the renderer writes first, then the user's).
  const options: string[] = [`--tp ${tp} --pp ${pp}`];
  if (input.model !== undefined) options.push(`--model ${shellQuote([input.model])}`);
  options.push(`--log-dir ${logDir}`);
  for (const word of input.serveArgs) {
    if (word.startsWith('--') || options.length === 0) options.push(shellQuote([word]));
    else options[options.length - 1] += ` ${shellQuote([word])}`;
  }
  if (plan.srunArgs !== undefined) options.push(`--srun-args ${shellQuote([plan.srunArgs])}`);
  // --dp inside the allocation: srun starts every replica's ranks up front (Slurm's MPI plugins cannot spawn).
  if (dp > 1 && !input.serveArgs.includes('--no-spawn')) options.push('--no-spawn');
  lines.push(
    '',
    '# ---- The job: this part runs on the first node. ----',
    '# The launcher starts one rank per task with `srun --mpi=pmix` (pmi2 where this Slurm has no pmix plugin): Slurm\'s',
    ...(dp > 1 ? [
      '# task number (SLURM_PROCID) is the MPI rank, rank 0 is the orchestrator and serves HTTP on this node, replica r',
      `# is ranks 1 + r x ${worldSize} on. It prints the endpoint once the orchestrator answers, and stops every rank if the`,
      '# job fails (with --isolate-failures a dead replica is dropped instead).',
    ] : [
      '# task number (SLURM_PROCID) is the MPI rank, rank 0 is the leader and serves HTTP on this node, the others only',
      '# compute. It prints the endpoint once the leader answers /v2/health/ready, and stops every rank if one fails.',
    ]),
    '# `exec` makes it the job\'s main process, so the signals above reach it. Each rank\'s lines also go to',
    '# --log-dir/rank-N.log.',
  );
  if (plan.srunArgs !== undefined && /--container-image/.test(plan.srunArgs)) {
    lines.push('# The ranks run in a container (pyxis/enroot, through --srun-args); the launcher runs on the node itself. The image',
      '# needs node >= 20 on its PATH, and this package mounted at the same path as here (--container-mounts).');
  }
  lines.push('# TRTLLM_API_KEY, when set in the shell you submit from, reaches the job through sbatch\'s default --export=ALL.',
    'set -euo pipefail');
  lines.push(`exec ${input.launch} serve \\`);
  options.forEach((o, i) => lines.push(`  ${o}${i === options.length - 1 ? '' : ' \\'}`));
  return `${lines.join('\n')}\n`;
}
