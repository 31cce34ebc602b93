// What rank 0's status lines mean to the supervisor (pure): the one place supervise.ts reads them. The lines
// themselves are written and parsed by worker/common/status-lines.ts, so the ranks and the supervisor cannot drift.
import { isReadyLine, parseLeaderExit, parseLeaderPid, parseSlurmStep } from '../../worker/common/status-lines.js';
import type { SupervisorEvent } from './supervisor-state.js';

/** The supervisor event a line of rank 0 carries, if any. */
export function leaderLineEvent(text: string): SupervisorEvent | undefined {
  const exit = parseLeaderExit(text);
  if (exit !== undefined) return { type: 'leader-exit-code', code: exit };
  const pid = parseLeaderPid(text);
  if (pid) return { type: 'leader-pid', pid: pid.pid, host: pid.host };
  const step = parseSlurmStep(text);
  if (step !== undefined) return { type: 'leader-step', step };
  // The leader says when it listens: the supervisor checks at once rather than up to a poll interval later.
  if (isReadyLine(text)) return { type: 'leader-listening' };
  return undefined;
}
