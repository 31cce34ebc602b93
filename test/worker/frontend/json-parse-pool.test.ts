// Large bodies are parsed on the JSON thread with exactly parseJsonObject's checks and messages; small ones inline.
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

import t, { type Test } from 'tap';

import { parseJsonObject, readBody } from '../../../worker/frontend/http-body.js';
import { HttpError } from '../../../worker/frontend/http-errors.js';
import * as pool from '../../../worker/frontend/json-parse-pool.js';

const big = (text: string) => Buffer.from(text.padEnd(pool.PARSE_OFF_THREAD_BYTES + 10, ' '));

async function sameOutcome(t: Test, body: Buffer, name: string) {
  let inline: unknown;
  try {
    inline = { value: parseJsonObject(Buffer.from(body)) };
  } catch (error) {
    inline = { status: (error as HttpError).status, message: (error as Error).message };
  }
  let threaded: unknown;
  try {
    threaded = { value: await pool.parseJsonBody(body) };
  } catch (error) {
    t.ok(error instanceof HttpError, `${name}: an HttpError`);
    threaded = { status: (error as HttpError).status, message: (error as Error).message };
  }
  t.same(threaded, inline, `${name}: the same result as parsing inline`);
}

t.test('large bodies go to the thread and come back as parseJsonObject would give them', async (t) => {
  const before = pool.offThreadParses();
  await sameOutcome(t, big(JSON.stringify({ text_input: 'x'.repeat(300_000), max_tokens: 4 })), 'valid');
  await sameOutcome(t, big('{"text_input": "x", '), 'invalid JSON');
  await sameOutcome(t, big('['.repeat(100) + ']'.repeat(100)), 'too deep');
  await sameOutcome(t, big('[1, 2, 3]'), 'an array');
  t.equal(pool.offThreadParses() - before, 4, 'all four went to the thread');
});

t.test('a body sharing its memory is copied, not transferred: the sharer stays usable', async (t) => {
  const text = JSON.stringify({ a: 'y'.repeat(pool.PARSE_OFF_THREAD_BYTES) });
  const whole = Buffer.from('junk' + text + 'junk');
  const slice = whole.subarray(4, 4 + text.length);
  t.same(await pool.parseJsonBody(slice), JSON.parse(text));
  t.equal(whole.toString('utf8', 0, 4), 'junk', 'the larger buffer was not detached');
});

t.test('small bodies parse inline', async (t) => {
  const before = pool.offThreadParses();
  t.same(await pool.parseJsonBody(Buffer.from('{"a":1}')), { a: 1 });
  await t.rejects(pool.parseJsonBody(Buffer.from('')), { message: 'the request body is empty; expected a JSON object' });
  t.equal(pool.offThreadParses(), before, 'none went to the thread');
});

t.test('a large body with a Content-Length is read into one buffer of its own (handed to the thread without a copy)', async (t) => {
  const text = JSON.stringify({ text_input: 'z'.repeat(300_000) });
  const got = await new Promise<Buffer>((resolve, reject) => {
    const server = createServer((req, res) => {
      readBody(req, 1 << 20).then((body) => { res.end(); server.close(); resolve(body); }, reject);
    });
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      const req = request({ port, host: '127.0.0.1', method: 'POST', headers: { 'content-length': Buffer.byteLength(text) } }, (res) => res.resume());
      req.on('error', reject);
      // In pieces, as a network delivers it.
      for (let at = 0; at < text.length; at += 50_000) req.write(text.slice(at, at + 50_000));
      req.end();
    });
  });
  t.equal(got.toString(), text, 'the whole body, in order');
  t.equal(got.byteOffset, 0);
  t.equal(got.buffer.byteLength, got.length, 'its own memory');
  t.same(await pool.parseJsonBody(got), JSON.parse(text), 'and it parses on the thread');
});
