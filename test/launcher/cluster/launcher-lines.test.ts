// The launcher's lines that `slurm submit` reads back: every line written is recognised by its parser, with the
// exact text users and the tests see.
import t from 'tap';

import {
  isNotReadyLine, isReadyAfterLine, isStoppedCleanlyLine, notReadyLine, parseServingLine, readyAfterLine, servingLine,
  stoppedCleanlyLine,
} from '../../../launcher/cluster/launcher-lines.js';

t.test('written and read back', async (t) => {
  t.equal(readyAfterLine(2.104, '2 rank(s)'), '[launcher] ready after 2.10 s: 2 rank(s)');
  t.ok(isReadyAfterLine(readyAfterLine(0.5, '1 rank(s) + 3 spawned')));
  t.equal(notReadyLine(300), '[launcher] not ready after 300 s (--startup-timeout): stopping every rank');
  t.ok(isNotReadyLine(notReadyLine(5)));
  const serving = servingLine('h1', 8000, 2, 1, 8002);
  t.equal(serving, 'serving on http://h1:8000 (tp 2 x pp 1), metrics on http://h1:8002/metrics');
  t.same(parseServingLine(serving), { host: 'h1', port: 8000, metricsHost: 'h1', metricsPort: 8002 });
  t.equal(parseServingLine('[rank 0] serving on nothing'), undefined);
  t.equal(stoppedCleanlyLine(true), '[launcher] all ranks stopped cleanly (the leader was asked to stop directly)');
  t.ok(isStoppedCleanlyLine(stoppedCleanlyLine(false)));
  t.notOk(isReadyAfterLine('[rank 0] [launcher] ready after 1 s'), 'a rank echoing the text is not the launcher');
});
