// Test hooks on the leader's HTTP port, only where the environment has TRTLLM_TEST_HOOKS=1: a test that drives a
// cluster from outside (an mpirun job, a Slurm job) holds the executor's loop between iterations, so what it
// asserts — "every request was queued when the drain began" — happens in that order on any machine. The same
// hold that in-process tests call on the Executor (holdIterations); never enabled by a flag or a config key.
//   POST /test/hold {"iterations": n}   run at most n more iterations, then hold (n < 0: release); with
//                                       "through_drain": true the hold outlasts a drain's start (Executor.holdIterations)
//   POST /test/await-held               200 once the loop holds (409 if it stopped, or did not within a minute)
import { badRequest } from './http-errors.js';
import { type Route, sendJson } from './http-server.js';

/** What the hooks drive: the local executor's hold (worker/executor/executor.ts). */
export interface IterationHold {
  holdIterations(n: number, options?: { throughDrain?: boolean }): void;
  awaitHeld(): Promise<boolean>;
}

export const TEST_HOOKS_ENV = 'TRTLLM_TEST_HOOKS';

export function testHooksEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return env[TEST_HOOKS_ENV] === '1';
}

export function testHookRoutes(hold: IterationHold): Route[] {
  return [
    {
      method: 'POST', path: /^\/test\/hold$/, style: 'kserve',
      handle: async (c) => {
        const body = await c.json();
        const n = body.iterations;
        const throughDrain = body.through_drain ?? false;
        if (typeof n !== 'number' || !Number.isInteger(n)) throw badRequest(`iterations must be an integer (< 0 releases), got ${JSON.stringify(n)}`);
        if (typeof throughDrain !== 'boolean') throw badRequest(`through_drain must be a boolean, got ${JSON.stringify(throughDrain)}`);
        hold.holdIterations(n, { throughDrain });
        sendJson(c.res, 200, {});
      },
    },
    {
      method: 'POST', path: /^\/test\/await-held$/, style: 'kserve',
      handle: async (c) => {
        const held = await hold.awaitHeld();
        sendJson(c.res, held ? 200 : 409, { held });
      },
    },
  ];
}
