// One hostile client for bench/frontend-hostile.ts, in a process of its own so that reading its answers never delays
// the bench's health probes: `node hostile-client.js <base url> <path> <body file> <seconds>` sends the body (one
// request at a time, back to back) until <seconds> have passed, reads each answer to the end without keeping it,
// and prints one JSON line: {"requests": n, "statuses": {"200": n, ...}, "bytes": n, "seconds": s, "error": "..."}.
// The first request goes out before the line "started" is printed, so the bench knows the load has begun.
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';

const [base = 'http://127.0.0.1:8000', path = '/', bodyFile = '', seconds = '10'] = process.argv.slice(2);
const body = readFileSync(bodyFile);
const agent = new Agent({ keepAlive: true, maxSockets: 1 });

function once(): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, {
      agent, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': body.length },
    }, (res) => {
      let bytes = 0;
      res.on('data', (chunk: Buffer) => { bytes += chunk.length; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function main(): Promise<void> {
  const started = performance.now();
  const end = started + Number(seconds) * 1000;
  const statuses: Record<string, number> = {};
  let requests = 0;
  let bytes = 0;
  let error: string | undefined;
  try {
    let first = true;
    do {
      const answer = once();
      if (first) { process.stdout.write('started\n'); first = false; }
      const r = await answer;
      requests += 1;
      bytes += r.bytes;
      statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    } while (performance.now() < end);
  } catch (e) {
    error = (e as Error).message;
  }
  agent.destroy();
  process.stdout.write(`${JSON.stringify({ requests, statuses, bytes, seconds: (performance.now() - started) / 1000, ...(error ? { error } : {}) })}\n`);
}

void main();
