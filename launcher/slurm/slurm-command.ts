// `trtllm-launch slurm render|submit|stop`: the sbatch script of a serving job for the given serve options, the
// same script submitted and followed until the leader answers (endpoint printed) or the job fails (the log lines
// that explain it printed), and a stop that drains before the job ends.
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

import { type Command, InvalidArgumentError } from 'commander';

import { TrtllmError } from '../../worker/common/errors.js';
import { resolveExperts, resolveParallel } from '../cluster/parallel-plan.js';
import { resolveServeConfig } from '../config/resolve-serve-config.js';
import { planDataParallel } from '../multi-model/data-parallel.js';
import { addConfigSourceOptions, addServeOptions, type ServeCliOptions } from '../serve-options.js';
import { followJob, type FollowResult, nodeAddress, showJob, slurmCommand } from './follow-job.js';
import { isFinal } from './job-status.js';
import { type JobPlan, planJob } from './job-plan.js';
import { renderSbatchScript } from './sbatch-script.js';
import { forwardedServeArgs, givenArgv } from './serve-args.js';
import { addFollowOptions, addSlurmJobOptions, type FollowCliOptions, type SlurmCliOptions, thisInstallation } from './slurm-options.js';

const out = (line: string) => process.stdout.write(`${line}\n`);
const note = (line: string) => process.stderr.write(`trtllm-launch slurm: ${line}\n`);

interface RenderedJob {
  plan: JobPlan;
  script: string;
  apiKey?: string | undefined;
}

/** The job script for the options on `command` (serve options, config file, sbatch options). */
async function renderJob(command: Command, verb: string): Promise<RenderedJob> {
  const config = await resolveServeConfig(command);
  const o = config.options as ServeCliOptions & SlurmCliOptions;
  const dp = o.dp ?? 1;
  let parallel = resolveParallel(o);
  if (dp > 1) {
    // The replicas' plan, checked here as the job will check it (--router kv, devices, --world-size = dp x tp x pp).
    const { plan: replicas } = planDataParallel({ options: o, spawn: false, failFast: false, cpu: o.device === 'cpu', cores: Number.POSITIVE_INFINITY });
    const g0 = replicas.groups[0]!;
    parallel = { worldSize: g0.tp * g0.pp, tp: g0.tp, pp: g0.pp };
  }
  resolveExperts(parallel.tp, o);  // a bad --ep / --moe-tp fails here, not in the job (which resolves them again)
  const plan = planJob(o, {
    parallel, dp, device: o.device, threads: o.threads, drainTimeout: o.drainTimeout,
    httpPort: o.httpPort, metricsPort: o.metricsPort, srunArgs: o.srunArgs,
  });
  let model: string | undefined;
  const modelSource = command.getOptionValueSource('model');
  if (modelSource === 'cli' || modelSource === 'env') {
    model = resolve(o.model);
    if (!statSync(model, { throwIfNoEntry: false })?.isDirectory()) {
      note(`--model ${o.model}: no such directory here; the job expects it at ${model} on the compute nodes`);
    }
  }
  const logSource = command.getOptionValueSource('logDir');
  const logDir = (logSource === 'cli' || logSource === 'env') && o.logDir !== undefined ? resolve(o.logDir) : undefined;
  if (o.launchCommand !== undefined && (o.launchCommand.trim() === '' || /[\r\n]/.test(o.launchCommand))) {
    throw new InvalidArgumentError(`--launch-command must be one line of shell words, got "${o.launchCommand}"`);
  }
  if (verb === 'render' && o.apiKey !== undefined) {
    note('--api-key is not written into the script: export TRTLLM_API_KEY in the shell you run sbatch from (sbatch passes the environment on)');
  }
  const script = renderSbatchScript({
    plan, launch: o.launchCommand?.trim() ?? thisInstallation(), model, logDir,
    serveArgs: forwardedServeArgs(command, process.cwd()), renderedBy: ['slurm', verb, ...givenArgv(command)],
  });
  return { plan, script, apiKey: o.apiKey };
}

function printFailure(jobId: string, result: FollowResult, what: string): void {
  const state = result.info ? `${result.info.state} (exit code ${result.info.exitCode}${result.info.reason !== 'None' ? `, ${result.info.reason}` : ''})` : 'gone from Slurm';
  out(`job ${jobId} ended ${what}: ${state}`);
  if (result.output.lines.length === 0) {
    out(`  no output at ${result.stdoutPath ?? '(Slurm gave no StdOut path)'}: the output directory must exist before the job starts and be shared between the nodes and this machine`);
    return;
  }
  out('  the lines that explain it:');
  for (const line of result.output.explanation()) out(`    ${line}`);
}

async function submit(command: Command): Promise<number> {
  const { plan, script, apiKey } = await renderJob(command, 'submit');
  const follow = command.opts<FollowCliOptions>();
  mkdirSync(plan.outputDir, { recursive: true });
  // The key reaches the job through sbatch's --export=ALL, never through the script file.
  const env: Record<string, string> | undefined = apiKey ? { TRTLLM_API_KEY: apiKey } : undefined;
  const sbatch = await slurmCommand('sbatch', ['--parsable'], script, env);
  if (sbatch.exitCode !== 0) {
    out(`sbatch refused the job: ${(sbatch.all ?? '').trim()}`);
    out('  check --account, --partition and --time against `sinfo -s` and `sacctmgr show associations user=$USER`; `trtllm-launch slurm render` with the same options prints the script');
    return 1;
  }
  const jobId = sbatch.stdout.trim().split(';')[0]!;
  const saved = join(plan.outputDir, `${plan.jobName}-${jobId}.sbatch`);
  writeFileSync(saved, script);
  const { tp, pp, worldSize } = plan.serve.parallel;
  const dp = plan.serve.dp ?? 1;
  out(`submitted batch job ${jobId}: ${dp > 1 ? `${dp} replicas of tp ${tp} x pp ${pp} + the orchestrator = ${1 + dp * worldSize} tasks` : `tp ${tp} x pp ${pp} = ${worldSize} rank(s)`} on ${plan.nodes} node(s); script ${saved}`);
  if (!follow.follow) {
    out(`  follow it: tail -f ${join(plan.outputDir, `${plan.jobName}-${jobId}.out`)}; stop it: trtllm-launch slurm stop ${jobId}`);
    return 0;
  }
  const result = await followJob({ jobId, until: 'ready', timeoutMs: follow.followTimeout * 1000, out });
  if (result.outcome === 'ready') {
    const e = result.output.endpoint!;
    const addr = await nodeAddress(e.host);
    out(`job ${jobId} is serving: endpoint ${e.host}:${e.port}${addr ? ` (address ${addr}:${e.port})` : ''}, metrics ${e.metricsHost}:${e.metricsPort}`);
    out(`  curl -X POST ${e.host}:${e.port}/v2/models/ensemble/generate -d '{"text_input": "What is machine learning?", "max_tokens": 20, "bad_words": "", "stop_words": ""}'`);
    out(`  where ${e.host} cannot be reached directly: ssh -L ${e.port}:${e.host}:${e.port} <login node>, then localhost:${e.port}`);
    out(`  stop it (drains first): trtllm-launch slurm stop ${jobId}`);
    return 0;
  }
  if (result.outcome === 'ended') {
    printFailure(jobId, result, 'before the leader was ready');
    return 1;
  }
  const state = result.info?.state ?? 'unknown';
  out(`stopped following job ${jobId} (${result.outcome === 'timeout' ? `--follow-timeout ${follow.followTimeout} s` : 'Ctrl-C'}); it is ${state} and stays so: ` +
    `trtllm-launch slurm stop ${jobId} ends it`);
  return 1;
}

async function stop(jobId: string, command: Command): Promise<number> {
  if (!/^\d+$/.test(jobId)) throw new InvalidArgumentError(`job id must be a number such as 1234, got "${jobId}"`);
  const follow = command.opts<FollowCliOptions>();
  const info = await showJob(jobId);
  if (info === undefined) {
    out(`job ${jobId} is not known to Slurm (it ended a while ago, or the id is wrong)`);
    return 1;
  }
  if (isFinal(info.state)) {
    out(`job ${jobId} already ended: ${info.state} (exit code ${info.exitCode})`);
    return 0;
  }
  if (info.state === 'PENDING') {
    const r = await slurmCommand('scancel', [jobId]);
    out(r.exitCode === 0 ? `job ${jobId} was still pending: cancelled` : `scancel ${jobId} failed: ${(r.all ?? '').trim()}`);
    return r.exitCode === 0 ? 0 : 1;
  }
  // Only the batch shell — the launcher, exec'd by the script — gets the signal: it drains the leader, which then
  // releases the followers. Signalling srun as well (plain scancel) would make srun kill the ranks at once.
  const r = await slurmCommand('scancel', ['--batch', '--signal=TERM', jobId]);
  if (r.exitCode !== 0) {
    out(`scancel --batch --signal=TERM ${jobId} failed: ${(r.all ?? '').trim()}`);
    return 1;
  }
  out(`asked job ${jobId} to drain and stop (scancel --batch --signal=TERM ${jobId})`);
  if (!follow.follow) return 0;
  const result = await followJob({ jobId, until: 'end', timeoutMs: follow.followTimeout * 1000, out, fromEnd: true });
  if (result.outcome === 'ended' && result.output.stoppedCleanly && (result.info === undefined || result.info.exitCode === '0:0')) {
    out(`job ${jobId} stopped cleanly: ${result.info?.state ?? 'ended'}${result.info ? `, exit code ${result.info.exitCode}` : ''}`);
    return 0;
  }
  if (result.outcome === 'ended') {
    printFailure(jobId, result, 'without a clean stop');
    return 1;
  }
  out(`stopped following job ${jobId} (${result.outcome === 'timeout' ? `--follow-timeout ${follow.followTimeout} s` : 'Ctrl-C'}); it is ${result.info?.state ?? 'unknown'}; scancel ${jobId} ends it at once`);
  return 1;
}

function action(command: Command, run: () => Promise<number>) {
  return async () => {
    try {
      process.exitCode = await run();
    } catch (error) {
      if (error instanceof InvalidArgumentError) command.error(`error: ${error.message}`, { exitCode: 2 });
      if (error instanceof TrtllmError) {
        process.stderr.write(`trtllm-launch slurm: ${error.message}\n`);
        process.exitCode = 2;
        return;
      }
      throw error;
    }
  };
}

export function registerSlurm(program: Command): void {
  const slurm = program.command('slurm').description('run the serving cluster as a Slurm job (sbatch + srun)');
  const render = addSlurmJobOptions(addConfigSourceOptions(addServeOptions(slurm.command('render')
    .description('print the sbatch script of a serving job for these options (see slurm/README.md)'))));
  render.action(action(render, async () => {
    process.stdout.write((await renderJob(render, 'render')).script);
    return 0;
  }));
  const sub = addFollowOptions(addSlurmJobOptions(addConfigSourceOptions(addServeOptions(slurm.command('submit')
    .description('write and submit that script, then follow the job until the leader is ready and print the endpoint')))), 'until the leader is ready');
  sub.action(action(sub, () => submit(sub)));
  const stopCommand = addFollowOptions(slurm.command('stop').argument('<job-id>', 'the Slurm job id')
    .description('drain and stop a serving job (scancel --batch --signal=TERM), following it until it ends'), 'until it ends');
  stopCommand.action(action(stopCommand, () => stop(stopCommand.args[0]!, stopCommand)));
}
