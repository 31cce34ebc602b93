// A server's ports through its drain, shared by one-model serving (serve.ts) and the orchestrator: first every
// interface refuses new work while still listening (503 / UNAVAILABLE naming the drain, /v2/health/live still 200),
// then — once the caller's work has drained — the last answers are written and the ports close. The port closes
// after the answers, never on a timer: a request cut at the drain deadline still gets its error event out.
import type { Server } from 'node:http';

import type { RunningGrpcServer } from './grpc/server.js';
import type { OpenResponses } from './open-responses.js';

export interface DrainablePorts {
  http: Server;
  responses: OpenResponses;          // of `http`
  grpc: RunningGrpcServer | undefined;
  metrics: Server;
}

// A bound, not a wait: in every ordinary case the answers' own events end the wait at once. It only stops a client
// that neither finishes sending its request nor reads its answer from holding the process after the drain.
const ANSWERS_BOUND_MS = 5_000;

/** Stop admitting on every interface; the ports stay open (the models' readiness refuses with the same words). */
export function beginPortsDrain(ports: DrainablePorts, refusal: string): void {
  ports.responses.beginDrain();
  ports.grpc?.beginDrain(refusal);
}

/** After the work has drained: waits for the answers in flight to be written and ended, then closes every port.
 * `waitForAnswers` false: at once (a failed cluster stops without a drain; nothing would answer). */
export async function closePorts(ports: DrainablePorts, waitForAnswers = true): Promise<void> {
  if (waitForAnswers) await bounded(Promise.all([ports.responses.settled(), ports.grpc?.settled()]), ANSWERS_BOUND_MS);
  const closed = [closeServer(ports.http), closeServer(ports.metrics)];
  ports.http.closeAllConnections();
  ports.metrics.closeAllConnections();
  if (ports.grpc) {
    if (waitForAnswers) await bounded(ports.grpc.drain(), ANSWERS_BOUND_MS);
    ports.grpc.close();
  }
  await Promise.all(closed);
}

function closeServer(server: Server): Promise<void> {
  return new Promise((done) => server.close(() => done()));
}

async function bounded(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work, new Promise((resolve) => { timer = setTimeout(resolve, ms); })]);
  clearTimeout(timer);
}
