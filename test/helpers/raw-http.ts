// HTTP at the byte level, for what fetch will not send (CONNECT, a body shorter than its Content-Length, a client
// that writes a whole body before it reads) and what it hides (a reset, a second response on one connection); and
// a logger that keeps a server's lines, so a test can wait for one and assert on the rest.
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';

import { createLogger, type Logger } from '../../worker/log.js';

/** What a raw exchange saw: every byte the server sent (latin1), and the socket error if there was one. */
export interface RawResult {
  received: string;
  error: string | undefined;
}

/** A connection to 127.0.0.1:port, collecting what arrives until the server closes or a condition holds. */
export class RawConnection {
  readonly socket: Socket;
  received = '';
  error: string | undefined;
  private readonly closed: Promise<void>;
  private waiters: { check: (text: string) => boolean; resolve: () => void }[] = [];

  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.on('data', (d: Buffer) => {
      this.received += d.toString('latin1');
      this.wake();
    });
    this.socket.on('error', (e: NodeJS.ErrnoException) => { this.error = e.code ?? e.message; });
    this.closed = new Promise((resolve) => this.socket.on('close', () => {
      this.waiters.forEach((w) => w.resolve());
      this.waiters = [];
      resolve();
    }));
  }

  /** Writes `bytes`, waiting for the socket to take them (a server that reads nothing stalls it; an error ends it). */
  async write(bytes: string | Buffer): Promise<boolean> {
    if (this.socket.destroyed) return false;
    const ok = await new Promise<boolean>((resolve) => {
      if (this.socket.write(bytes)) resolve(true);
      else {
        const done = (v: boolean) => { this.socket.off('drain', onDrain); this.socket.off('close', onClose); resolve(v); };
        const onDrain = () => done(true);
        const onClose = () => done(false);
        this.socket.once('drain', onDrain);
        this.socket.once('close', onClose);
      }
    });
    return ok && !this.socket.destroyed;
  }

  /** `size` bytes of body in 64 KiB pieces; false when the connection broke first. */
  async writeBody(size: number, byte = 0x20): Promise<boolean> {
    const piece = Buffer.alloc(64 * 1024, byte);
    for (let left = size; left > 0; left -= piece.length) {
      if (!await this.write(left >= piece.length ? piece : piece.subarray(0, left))) return false;
    }
    return true;
  }

  /** Resolves once what arrived satisfies `check`, or the connection closed (then check the text yourself). */
  until(check: (text: string) => boolean): Promise<void> {
    if (check(this.received) || this.socket.destroyed) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ check, resolve }));
  }

  /** Resolves when the connection has closed. */
  close(): Promise<void> {
    return this.closed;
  }

  private wake(): void {
    const ready = this.waiters.filter((w) => w.check(this.received));
    this.waiters = this.waiters.filter((w) => !ready.includes(w));
    ready.forEach((w) => w.resolve());
  }
}

/** How many complete HTTP/1.1 responses (with Content-Length bodies) `text` holds, and their status codes. */
export function responses(text: string): { status: number; head: string; body: string }[] {
  const out: { status: number; head: string; body: string }[] = [];
  let rest = text;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) return out;
    const head = rest.slice(0, end);
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    if (rest.length < end + 4 + length) return out;
    out.push({ status, head, body: rest.slice(end + 4, end + 4 + length) });
    rest = rest.slice(end + 4 + length);
  }
}

/** One request through node:http, with exactly the headers given (no Content-Type unless named). */
export function send(port: number, method: string, path: string, headers: Record<string, string>, body?: string):
  Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string; json: any }> {
  return new Promise((resolve, reject) => {
    // A body goes with its Content-Length: node:http frames none by itself for GET, DELETE, OPTIONS, ...
    const framed = body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) };
    const req = request({ host: '127.0.0.1', port, method, path, headers: framed }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { text += d; });
      res.on('end', () => {
        let json: unknown;
        try { json = JSON.parse(text); } catch { /* not JSON */ }
        resolve({ status: res.statusCode!, headers: res.headers, text, json });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A debug-level logger that keeps every line, and resolves waits for a line matching a pattern (from line `from` on). */
export function keptLog(): { log: Logger; lines: string[]; next(pattern: RegExp, from?: number): Promise<string> } {
  const lines: string[] = [];
  let waiters: { pattern: RegExp; resolve: (line: string) => void }[] = [];
  const log = createLogger('debug', (line) => {
    lines.push(line);
    const hit = waiters.filter((w) => w.pattern.test(line));
    waiters = waiters.filter((w) => !hit.includes(w));
    hit.forEach((w) => w.resolve(line));
  });
  const next = (pattern: RegExp, from = 0) => {
    const seen = lines.slice(from).find((l) => pattern.test(l));
    return seen !== undefined ? Promise.resolve(seen) : new Promise<string>((resolve) => waiters.push({ pattern, resolve }));
  };
  return { log, lines, next };
}
