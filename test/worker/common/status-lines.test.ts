// The lines ranks print for the supervisor: what they say exactly (users and the Slurm guide quote them) and that
// each parser reads back what its formatter wrote, and nothing else.
import t from 'tap';

import {
  hangLine, isReadyLine, isStalledLine, leaderExitLine, leaderPidLine, parseHangLine, parseLeaderExit, parseLeaderPid,
  parseRankFailure, parseSlurmStep, rankFailureLine, readyLine, resumedLine, slurmStepLine, stalledLine,
} from '../../../worker/common/status-lines.js';

t.test('each line as written, and read back', async (t) => {
  const ready = readyLine('llama', ['ensemble', 'tensorrt_llm']);
  t.equal(ready, 'ready: serving llama as ensemble, tensorrt_llm');
  t.ok(isReadyLine(ready));
  t.notOk(isReadyLine('[launcher] ready after 2.10 s: 2 rank(s)'));

  t.equal(leaderPidLine(4242, 'node-1.cluster'), 'leader pid 4242 on node-1.cluster');
  t.same(parseLeaderPid(leaderPidLine(4242, 'node-1.cluster')), { pid: 4242, host: 'node-1.cluster' });
  t.equal(parseLeaderPid('leader pid x on h'), undefined);

  t.equal(leaderExitLine(3), 'leader exit code 3');
  t.equal(parseLeaderExit(leaderExitLine(0)), 0, 'a clean exit reads back as 0, not as "no line"');
  t.equal(parseLeaderExit('the leader exit code 3'), undefined);

  const failure = rankFailureLine('rank', '--grpc-port 8001 on 0.0.0.0 cannot be bound (EADDRINUSE)');
  t.equal(failure, 'trtllm-launch rank: --grpc-port 8001 on 0.0.0.0 cannot be bound (EADDRINUSE)', 'the line a failed rank ends with');
  t.equal(parseRankFailure(failure), '--grpc-port 8001 on 0.0.0.0 cannot be bound (EADDRINUSE)');
  t.equal(parseRankFailure(rankFailureLine('orchestrated', '--fail-fast: model b failed: x')), '--fail-fast: model b failed: x');
  t.equal(parseRankFailure(rankFailureLine('serve', 'x')), undefined, 'one process serving alone is no rank of a cluster');

  const step = slurmStepLine({ jobId: '4242', stepId: '0', procId: 3, tasks: 16, node: 'node17', localId: 3, worldRank: 3, device: 'cuda:3' });
  t.equal(step, 'slurm step 4242.0: task 3 of 16 on node17 (local 3) = MPI rank 3, device cuda:3', 'as slurm/README.md quotes it');
  t.equal(parseSlurmStep(step), '4242.0');
  t.equal(parseSlurmStep('slurm step ?.0: task 0 of 1 on h (local 0) = MPI rank 0, device cpu'), undefined, 'no job id: nothing to signal');
});

t.test('the liveness lines: a stall, its end, a hang naming ranks or none', async (t) => {
  const self = { rank: 0, host: 'vm', iteration: 1234, step: 'forward', waitingFor: 'all-reduce', seconds: 15.04 };
  const stalled = stalledLine(self, 30_000);
  t.equal(stalled, 'stalled: no progress for 15.0 s in iteration 1234 (forward: all-reduce); not ready, asking the other ranks (--hang-timeout 30 s)');
  t.ok(isStalledLine(stalled));
  t.notOk(isStalledLine(resumedLine(self)));
  t.equal(resumedLine({ ...self, seconds: 16.5 }), 'resumed: progress again after 16.5 s in iteration 1234 (forward: all-reduce); ready');

  const one = hangLine({ culprits: [{ rank: 1, host: 'vm' }], self: { ...self, seconds: 30 }, waiting: [] });
  t.equal(one, 'hang: rank 1 on vm made no progress for 30.0 s in iteration 1234 (forward: all-reduce)', "as the issue's example");
  t.same(parseHangLine(one), { culprits: [{ rank: 1, host: 'vm' }], sentence: one.slice('hang: '.length) });
  const two = hangLine({ culprits: [{ rank: 1, host: 'node-a' }, { rank: 3, host: 'node-b.cluster' }], self: { ...self, seconds: 30 }, waiting: [] });
  t.same(parseHangLine(two)?.culprits, [{ rank: 1, host: 'node-a' }, { rank: 3, host: 'node-b.cluster' }]);
  const computing = hangLine({ culprits: [{ rank: 0, host: 'vm' }], self: { ...self, rank: 1, waitingFor: '', seconds: 60 }, waiting: [] });
  t.equal(computing, 'hang: rank 0 on vm made no progress for 60.0 s in iteration 1234 (forward)');
  const none = hangLine({ culprits: [], self: { ...self, seconds: 30 }, waiting: [{ ...self, rank: 1, waitingFor: 'recv from rank 2' }] });
  t.equal(none, 'hang: no rank made progress for 30.0 s in iteration 1234 (forward: all-reduce); every rank answered: rank 1 in iteration 1234 (forward: recv from rank 2)');
  t.same(parseHangLine(none)?.culprits, []);
  t.equal(parseHangLine('hang: up'), undefined, 'only what hangLine writes');
  t.equal(parseHangLine(`[rank 0] ${one}`), undefined, 'whole lines only');
});
