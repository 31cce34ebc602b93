// What the ranks' status lines mean to the supervisor (pure): the one place supervise.ts reads them — rank 0's about
// itself, and any rank's hang report. The lines themselves are written and parsed by worker/common/status-lines.ts,
// so the ranks and the supervisor cannot drift.
import {
  isReadyLine, parseHangLine, parseLeaderExit, parseLeaderPid, parseSlurmStep,
} from '../../worker/common/status-lines.js';
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

/** The supervisor event of a hang line, which any rank may print (the leader naming a follower, or a follower naming
 * the leader), if `text` is one. */
export function hangLineEvent(rank: number, text: string): SupervisorEvent | undefined {
  const hang = parseHangLine(text);
  return hang ? { type: 'rank-hang', reporter: rank, sentence: hang.sentence, culprits: hang.culprits.map((c) => c.rank) } : undefined;
}
