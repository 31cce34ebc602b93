// What rank 0's status lines mean to the supervisor (pure): the one place supervise.ts reads them. The ranks print
// them (launcher/serve-command.ts, worker/serve.ts, worker/rank.ts, worker/orchestrator/roles.ts).
import type { SupervisorEvent } from './supervisor-state.js';

/** The supervisor event a line of rank 0 carries, if any. */
export function leaderLineEvent(text: string): SupervisorEvent | undefined {
  const exit = /^leader exit code (\d+)$/.exec(text);
  if (exit) return { type: 'leader-exit-code', code: Number(exit[1]) };
  const pid = /^leader pid (\d+) on (\S+)$/.exec(text);
  if (pid) return { type: 'leader-pid', pid: Number(pid[1]), host: pid[2]! };
  const step = /^slurm step (\d+\.\d+): /.exec(text);
  if (step) return { type: 'leader-step', step: step[1]! };
  // The leader says when it listens: the supervisor checks at once rather than up to a poll interval later.
  if (text.startsWith('ready: serving ')) return { type: 'leader-listening' };
  return undefined;
}
