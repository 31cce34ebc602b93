// What a rank of a leader-mode cluster says when its liveness watch reports (native/engine/comm/liveness.h): one
// status line per event (worker/common/status-lines.ts; the supervisor reads the hang line as the root cause).
// Written synchronously: after a hang event the gang ends as soon as the handler returns, and a line still queued in
// a stream would die with the process.
import { writeSync } from 'node:fs';

import type { Addon, LivenessEvent } from '../binding/addon-types.js';
import { hangLine, resumedLine, stalledLine } from '../common/status-lines.js';

/** The status line of one event (pure). */
export function livenessLine(event: LivenessEvent): string {
  switch (event.kind) {
    case 'stalled': return stalledLine(event.self, event.hangTimeoutMs);
    case 'resumed': return resumedLine(event.self);
    case 'hang': {
      const hostOf = (rank: number) => event.others.find((o) => o.rank === rank)?.host ?? '?';
      return hangLine({
        culprits: event.culprits.map((rank) => ({ rank, host: hostOf(rank) })),
        self: event.self,
        waiting: event.others.filter((o) => o.answered),
      });
    }
  }
}

function writeLine(line: string): void {
  try {
    writeSync(2, `${line}\n`);
  } catch {
    process.stderr.write(`${line}\n`);  // a full pipe (EAGAIN): better late than never
  }
}

/** From now on every event of this process's watch is a line on stderr. */
export function reportLiveness(addon: Addon, write: (line: string) => void = writeLine): void {
  addon.watchLiveness((event) => write(livenessLine(event)));
}
