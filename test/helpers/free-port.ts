// A port for a server that a test (or bench) starts through a command line — the launcher, slurmctld — which must
// still be free when that server binds it. A port the kernel hands out (listen on port 0) is not: it comes from the
// ephemeral range, the same range every outgoing connection on the machine takes its local port from, and on a busy
// machine one did take a port a test had just picked (port-taken.test: "--grpc-port 37883 is not free"). So the pick
// is below that range — where the kernel never places a connection by itself — at random, checked bindable, and
// never the same twice in one process.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const LOWEST = 10_000;
const given = new Set<number>();

/** The first port of the kernel's ephemeral range (net.ipv4.ip_local_port_range). */
function ephemeralStart(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > LOWEST + 1000 ? low : 32768;
  } catch {
    return 32768;
  }
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '0.0.0.0', () => s.close(() => resolve(true)));
  });
}

export async function freePort(): Promise<number> {
  const span = ephemeralStart() - LOWEST;
  for (let tries = 0; tries < 1000; tries++) {
    const port = LOWEST + Math.floor(Math.random() * span);
    if (given.has(port) || !(await bindable(port))) continue;
    given.add(port);
    return port;
  }
  throw new Error(`no free port between ${LOWEST} and ${LOWEST + span - 1} after 1000 tries`);
}
