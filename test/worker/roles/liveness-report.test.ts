// What a rank writes for each event of its liveness watch (pure): the status line of a stall, its end, and a hang,
// with the culprits' hosts taken from the ranks the event lists.
import t from 'tap';

import type { LivenessEvent, RankActivity } from '../../../worker/binding/addon-types.js';
import { parseHangLine } from '../../../worker/common/status-lines.js';
import { livenessLine } from '../../../worker/roles/liveness-report.js';

const self: RankActivity = { rank: 0, host: 'vm', answered: true, iteration: 7, step: 'forward', waitingFor: 'all-reduce', seconds: 1.5 };
const silent: RankActivity = { rank: 2, host: 'node-b', answered: false, iteration: 0, step: '', waitingFor: '', seconds: 0 };
const idle: RankActivity = { rank: 1, host: 'vm', answered: true, iteration: 7, step: 'idle', waitingFor: 'the next plan', seconds: 0.2 };
const event = (e: Partial<LivenessEvent>): LivenessEvent => ({ kind: 'stalled', self, hangTimeoutMs: 3000, culprits: [], others: [], ...e });

t.test('one line per event', async (t) => {
  t.equal(livenessLine(event({})), 'stalled: no progress for 1.5 s in iteration 7 (forward: all-reduce); not ready, asking the other ranks (--hang-timeout 3 s)');
  t.equal(livenessLine(event({ kind: 'resumed', self: { ...self, seconds: 2 } })), 'resumed: progress again after 2.0 s in iteration 7 (forward: all-reduce); ready');
  const hang = livenessLine(event({ kind: 'hang', self: { ...self, seconds: 3 }, culprits: [2], others: [idle, silent] }));
  t.equal(hang, 'hang: rank 2 on node-b made no progress for 3.0 s in iteration 7 (forward: all-reduce)');
  t.same(parseHangLine(hang)?.culprits, [{ rank: 2, host: 'node-b' }], 'the supervisor reads back the rank and its host');
  const nobody = livenessLine(event({ kind: 'hang', self: { ...self, seconds: 3 }, others: [idle] }));
  t.equal(nobody, 'hang: no rank made progress for 3.0 s in iteration 7 (forward: all-reduce); every rank answered: rank 1 in iteration 7 (idle: the next plan)');
});
