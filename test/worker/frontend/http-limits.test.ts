// What one client can do to the HTTP port, and what it gets: nesting too deep (400 naming the limit), a body of the
// wrong type (415 naming it and the header to send; the seeds' `curl -d` still served), methods not served (405 with
// Allow, CONNECT too), a body too large (the 413 delivered to a client that writes its whole body first, the
// connection still usable), a client that leaves mid-body (a debug line, not a server error), bearer auth in any case,
// and n choices or batch rows over 10 without Node's MaxListenersExceededWarning.
import { request } from 'node:http';

import { execa } from 'execa';
import t from 'tap';

import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../../worker/frontend/json-depth.js';
import { keptLog, RawConnection, responses, send } from '../../helpers/raw-http.js';
import { localExecutor, startTestServer, waitFor } from '../../helpers/serving.js';

const JSON_TYPE = { 'content-type': 'application/json' };
const GENERATE = '/v2/models/ensemble/generate';
const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
const portOf = (base: string) => Number(new URL(base).port);

t.test('nestsDeeperThan: brackets outside strings, against the limit', async (t) => {
  const bytes = (s: string) => Buffer.from(s);
  t.equal(nestsDeeperThan(bytes(nested(MAX_JSON_DEPTH)), MAX_JSON_DEPTH), false, 'at the limit');
  t.equal(nestsDeeperThan(bytes(nested(MAX_JSON_DEPTH + 1)), MAX_JSON_DEPTH), true, 'one past it');
  t.equal(nestsDeeperThan(bytes(`{"a":${'{"b":'.repeat(4)}1${'}'.repeat(4)}}`), 4), true, 'objects count');
  t.equal(nestsDeeperThan(bytes(`[${'[1],'.repeat(500)}[2]]`), 2), false, 'many brackets, shallow');
  t.equal(nestsDeeperThan(bytes(`{"s": "${'['.repeat(500)}"}`), 2), false, 'brackets in a string do not count');
  t.equal(nestsDeeperThan(bytes(`{"s": "\\"${'['.repeat(500)}"}`), 2), false, 'nor after an escaped quote');
  t.equal(nestsDeeperThan(bytes(`{"s": "\\\\", "t": ${nested(3)}}`), 3), true, 'an escaped backslash ends no string early');
  t.equal(nestsDeeperThan(bytes(`{"s": "é${'['.repeat(9)}"}`), 2), false, 'UTF-8 text in strings');
});

t.test('the HTTP port against hostile clients', async (t) => {
  const kept = keptLog();
  const { base, metricsBase, server } = await startTestServer(t, { maxBodyBytes: 64 * 1024, apiKey: 'sekret', authMetrics: true }, kept.log);
  const port = portOf(base);
  const auth = { authorization: 'Bearer sekret' };
  const executor = localExecutor(server);
  const allFree = () => { const s = executor.kvCacheStats(); return s.freeNumBlocks === s.maxNumBlocks && executor.numActiveRequests() === 0; };
  const hello = JSON.stringify({ text_input: 'Hi', max_tokens: 2 });

  t.test('JSON nested deeper than the limit: 400 naming it, on every endpoint that reads JSON', async (t) => {
    const deep = nested(10_000);
    const cases: [string, string][] = [
      [GENERATE, `{"text_input": ${deep}, "max_tokens": 2}`],
      [GENERATE, `{"text_input": "x", "max_tokens": 2, "x": ${deep}}`],
      [GENERATE, `{"text_input": "x", "a": ${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}}`],
      ['/v2/models/tensorrt_llm/infer', `{"inputs": [{"name": "input_ids", "datatype": "INT32", "shape": [1, 3], "data": ${deep}}]}`],
      ['/v2/models/tensorrt_llm/generate', `{"input_ids": ${deep}, "request_output_len": 2}`],
      ['/v1/completions', `{"model": "tiny-gpt2", "prompt": ${deep}}`],
      ['/v1/chat/completions', `{"model": "tiny-gpt2", "messages": ${deep}}`],
      [GENERATE, nested(30_000)],
    ];
    for (const [path, body] of cases) {
      const r = await send(port, 'POST', path, { ...JSON_TYPE, ...auth }, body);
      t.equal(r.status, 400, `${path} ${body.slice(0, 50)}`);
      const message = path.startsWith('/v1') ? r.json?.error?.message : r.json?.error;
      t.match(message, new RegExp(`more than ${MAX_JSON_DEPTH} levels deep \\(the limit\\)`));
    }
    const withParameters = (depth: number) => `{"text_input": "Hi", "max_tokens": 1, "parameters": ${nested(depth - 1)}}`;
    t.equal((await send(port, 'POST', GENERATE, { ...JSON_TYPE, ...auth }, withParameters(MAX_JSON_DEPTH))).status, 200, 'nesting at the limit is served');
    t.equal((await send(port, 'POST', GENERATE, { ...JSON_TYPE, ...auth }, withParameters(MAX_JSON_DEPTH + 1))).status, 400, 'one level more is not');
    const inString = await send(port, 'POST', GENERATE, { ...JSON_TYPE, ...auth }, JSON.stringify({ text_input: 'Hi', max_tokens: 1, parameters: { note: '['.repeat(4 * MAX_JSON_DEPTH) } }));
    t.equal(inString.status, 200, `brackets inside a string are text ${inString.text.slice(0, 200)}`);
  });

  t.test('Content-Type: JSON always; untyped and curl -d\'s form type unless a browser sent them; others 415', async (t) => {
    const served = ['application/json', 'application/json; charset=utf-8', 'Application/JSON', 'application/vnd.api+json', undefined,
      'application/x-www-form-urlencoded'];
    for (const type of served) {
      const r = await send(port, 'POST', GENERATE, { ...auth, ...(type === undefined ? {} : { 'content-type': type }) }, hello);
      t.equal(r.status, 200, `${type ?? 'no Content-Type'}: served`);
    }
    const refused = ['text/plain', 'text/plain;charset=UTF-8', 'multipart/form-data; boundary=x', 'application/xml', 'text/json', 'application/jsonx'];
    for (const type of refused) {
      const r = await send(port, 'POST', GENERATE, { ...auth, 'content-type': type }, hello);
      t.equal(r.status, 415, `${type}: 415`);
      t.equal(r.json?.error, `${GENERATE} reads a JSON body, got Content-Type ${JSON.stringify(type)}: send the header `
        + '"Content-Type: application/json" (curl: -H \'Content-Type: application/json\'), or start the server with --allow-any-content-type');
    }
    const longType = `text/${'x'.repeat(500)}`;
    const long = await send(port, 'POST', GENERATE, { ...auth, 'content-type': longType }, hello);
    t.equal(long.status, 415, 'a long Content-Type: 415');
    t.match(long.json?.error, `got Content-Type ${JSON.stringify(`${longType.slice(0, 200)}… (505 characters)`)}:`, 'echoed cut at 200 characters, its length said');
    const fromPage = await send(port, 'POST', GENERATE, { ...auth, 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example' }, hello);
    t.equal(fromPage.status, 415, 'curl -d\'s type from a browser page: 415');
    t.match(fromPage.json?.error, /got Content-Type "application\/x-www-form-urlencoded" from a browser page \(Origin "https:\/\/evil.example"\)/);
    t.equal((await send(port, 'POST', GENERATE, { ...auth, origin: 'null' }, hello)).status, 415, 'untyped from a sandboxed page: 415');
    t.equal((await send(port, 'POST', GENERATE, { ...auth, 'sec-fetch-site': 'cross-site' }, hello)).status, 415, 'Sec-Fetch-Site marks a browser too');
    t.equal((await send(port, 'POST', GENERATE, { ...auth, ...JSON_TYPE, origin: 'https://app.example' }, hello)).status, 200,
      'JSON from a page (it passed a preflight) is served');
    const openai = await send(port, 'POST', '/v1/completions', { ...auth, 'content-type': 'text/plain' }, JSON.stringify({ model: 'tiny-gpt2', prompt: 'Hi', max_tokens: 1 }));
    t.equal(openai.status, 415);
    t.match(openai.json?.error, { type: 'BadRequestError', code: 415, message: /\/v1\/completions reads a JSON body, got Content-Type "text\/plain"/ });
    const fetched = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: auth, body: JSON.stringify({ model: 'tiny-gpt2', messages: [{ role: 'user', content: 'Hi' }] }) });
    t.equal(fetched.status, 415, 'fetch() with a string body and no type sends text/plain: 415, saying what to add');

    // The newcomer's commands, as curl sends them.
    const curl = (...args: string[]) => execa('curl', ['-s', '-X', 'POST', `localhost:${port}${GENERATE}`, '-H', 'Authorization: Bearer sekret', ...args, '-d', hello]);
    t.match(JSON.parse((await curl()).stdout), { model_name: 'ensemble' }, 'curl -d as documented: served');
    t.match(JSON.parse((await curl('-H', 'Content-Type: application/json')).stdout), { model_name: 'ensemble' }, 'with the JSON type: served');
    t.match(JSON.parse((await curl('-H', 'Content-Type: text/plain')).stdout).error, /send the header "Content-Type: application\/json" \(curl: -H 'Content-Type: application\/json'\)/);
  });

  t.test('methods not served: 405 with Allow, CONNECT included', async (t) => {
    for (const method of ['PUT', 'DELETE', 'PATCH', 'OPTIONS', 'GET', 'PROPFIND']) {
      const r = await send(port, method, GENERATE, auth);
      t.equal(r.status, 405, `${method} ${GENERATE}`);
      t.equal(r.headers.allow, 'POST');
      t.match(r.json?.error, new RegExp(`method ${method} is not allowed on ${GENERATE}; allowed: POST`));
    }
    const post = await send(port, 'POST', '/v2/health/ready', {});
    t.equal(post.status, 405);
    t.equal(post.headers.allow, 'GET');
    const connect = new RawConnection(port);
    await connect.write('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    await connect.close();
    const [answer] = responses(connect.received);
    t.equal(answer?.status, 405, 'CONNECT: 405, not a silent close');
    t.same(JSON.parse(answer?.body ?? '{}'), { error: 'method CONNECT is not allowed: this server is not a proxy' });
    t.equal((await send(port, 'GET', '/v2/health/live', {})).status, 200, 'still serving');
    const metricsConnect = new RawConnection(portOf(metricsBase));
    await metricsConnect.write('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    await metricsConnect.close();
    t.equal(responses(metricsConnect.received)[0]?.status, 405, 'CONNECT on the metrics port: 405 too');
    const metricsPost = await send(portOf(metricsBase), 'POST', '/metrics', auth);
    t.same([metricsPost.status, metricsPost.headers.allow], [405, 'GET'], 'POST /metrics: 405, Allow: GET');
  });

  t.test('a body over --max-body-bytes: the 413 reaches a client that writes it all first; the connection goes on', async (t) => {
    const next = `GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n`;
    for (let i = 0; i < 12; i += 1) {
      const c = new RawConnection(port);
      await c.write(`POST ${GENERATE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer sekret\r\nContent-Length: ${4 * 1024 * 1024}\r\n\r\n`);
      const wrote = await c.writeBody(4 * 1024 * 1024);
      await c.write(next);
      await c.until((text) => responses(text).length === 2);
      c.socket.destroy();
      const seen = responses(c.received);
      t.same({ wrote, error: c.error, statuses: seen.map((r) => r.status) }, { wrote: true, error: undefined, statuses: [413, 200] },
        `declared size, try ${i + 1}: the whole body written, the 413, then the next request's answer`);
      if (i === 0) t.match(JSON.parse(seen[0]?.body ?? '{}').error, /request body of 4194304 bytes exceeds the limit of 65536 bytes \(--max-body-bytes\)/);
    }
    const chunked = new RawConnection(port);
    await chunked.write(`POST ${GENERATE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer sekret\r\nTransfer-Encoding: chunked\r\n\r\n`);
    for (let i = 0; i < 64; i += 1) await chunked.write(`10000\r\n${' '.repeat(0x10000)}\r\n`);
    await chunked.write(`0\r\n\r\n${next}`);
    await chunked.until((text) => responses(text).length === 2);
    chunked.socket.destroy();
    t.same(responses(chunked.received).map((r) => r.status), [413, 200], 'chunked, no declared size: the 413, then the next answer');

    // Expect: 100-continue: refused by its declared size, the body is never asked for, and the connection ends.
    const expecting = new RawConnection(port);
    await expecting.write(`POST ${GENERATE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer sekret\r\nContent-Length: ${1024 * 1024}\r\nExpect: 100-continue\r\n\r\n`);
    await expecting.close();
    t.notMatch(expecting.received, /100 Continue/, 'no 100 Continue for a body that would be refused');
    t.match(expecting.received, /^HTTP\/1\.1 413 [^]*\r\nconnection: close\r\n/i, '413, connection: close');
    const small = new RawConnection(port);
    await small.write(`POST ${GENERATE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer sekret\r\nContent-Length: ${hello.length}\r\nExpect: 100-continue\r\n\r\n`);
    await small.until((text) => text.includes('100 Continue'));
    await small.write(hello);
    await small.until((text) => / 200 OK/.test(text) && responses(text.slice(text.indexOf(' 200 OK') - 8)).length === 1);
    small.socket.destroy();
    t.match(small.received, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 OK/, 'a body that will be read: 100 Continue, then the answer');
  });

  t.test('a client that leaves mid-body: a debug line, not a server error, a count; the server goes on', async (t) => {
    const disconnects = async () => Number(/^trtllm_http_client_disconnects_total\{stage="request_body"\} (\S+)$/m
      .exec(await (await fetch(`${metricsBase}/metrics`, { headers: auth })).text())?.[1]);
    const before = await disconnects();
    t.ok(Number.isFinite(before), 'the counter is there from the start');
    for (const leave of ['reset', 'half-close'] as const) {
      const from = kept.lines.length;
      const c = new RawConnection(port);
      // The 100 Continue says the server is reading the body (sent as it starts to): the client leaves after that.
      await c.write(`POST ${GENERATE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer sekret\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n`);
      await c.until((text) => text.includes('100 Continue'));
      await c.write('{"text_input": "What is');
      if (leave === 'reset') c.socket.resetAndDestroy();
      else c.socket.end();
      const line = await kept.next(/client gone|ERROR/, from);
      t.match(line, /DEBUG client gone: POST \/v2\/models\/ensemble\/generate: the request body ended early: the connection closed after 23 bytes of the 1000 declared/, leave);
      await c.close();
      t.notMatch(c.received, /HTTP\/1\.1 5\d\d/, `${leave}: no 5xx sent`);
    }
    t.equal((await send(port, 'POST', GENERATE, { ...JSON_TYPE, ...auth }, hello)).status, 200, 'still serving');
    // Counted where the debug line is written, which each loop above waited for.
    t.equal(await disconnects() - before, 2, 'trtllm_http_client_disconnects_total counted both');
  });

  t.test('bearer auth: the scheme in any case (RFC 9110), the key exactly', async (t) => {
    for (const header of ['Bearer sekret', 'bearer sekret', 'BEARER sekret', 'Bearer   sekret']) {
      t.equal((await send(port, 'GET', '/v2/models/ensemble/config', { authorization: header })).status, 200, header);
    }
    for (const header of ['Basic sekret', 'Bearersekret', 'bearer sekret2', 'bearer Sekret', 'sekret']) {
      t.equal((await send(port, 'GET', '/v2/models/ensemble/config', { authorization: header })).status, 401, header);
    }
    t.equal((await fetch(`${metricsBase}/metrics`, { headers: { authorization: 'bearer sekret' } })).status, 200, '/metrics too');
  });

  t.test('n choices and batch rows over 10: no MaxListenersExceededWarning; a client leaving cancels them all', async (t) => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    const completions = await send(port, 'POST', '/v1/completions', { ...JSON_TYPE, ...auth }, JSON.stringify({ model: 'tiny-gpt2', prompt: 'Hi', n: 16, max_tokens: 2 }));
    t.equal(completions.json?.choices?.length, 16, 'n = 16');
    const chat = await send(port, 'POST', '/v1/chat/completions', { ...JSON_TYPE, ...auth },
      JSON.stringify({ model: 'tiny-gpt2', messages: [{ role: 'user', content: 'Hi' }], n: 12, max_tokens: 2, stream: true }));
    t.equal(chat.status, 200, 'chat, n = 12, streamed');
    const texts = await send(port, 'POST', GENERATE, { ...JSON_TYPE, ...auth }, JSON.stringify({ text_input: Array.from({ length: 16 }, () => ['Hi']), max_tokens: 2 }));
    t.equal(texts.status, 200, 'a batch of 16 texts');
    const rows = await send(port, 'POST', '/v2/models/tensorrt_llm/generate', { ...JSON_TYPE, ...auth },
      JSON.stringify({ input_ids: Array.from({ length: 16 }, () => [1, 2, 3]), request_output_len: 2 }));
    t.equal(rows.status, 200, `a batch of 16 token rows ${rows.text.slice(0, 200)}`);
    // Warnings are delivered in the order they were emitted: once this one arrives, any earlier one has.
    const sentinel = new Promise<void>((resolve) => process.on('warning', function seen(w) { if (w.name === 'HttpLimitsSentinel') { process.off('warning', seen); resolve(); } }));
    process.emitWarning('sentinel', 'HttpLimitsSentinel');
    await sentinel;
    process.off('warning', onWarning);
    t.same(warnings.filter((w) => /MaxListeners/.test(w)), [], 'no MaxListenersExceededWarning');

    // The loop runs every choice's first iteration and holds: only the client leaving can end them meanwhile.
    executor.holdIterations(1);
    await new Promise<void>((resolve) => {
      const req = request(`${base}/v1/completions`, { method: 'POST', headers: { ...JSON_TYPE, ...auth } }, (res) => {
        res.on('data', () => req.destroy());
        res.on('close', () => resolve());
      });
      req.on('error', () => resolve());
      req.end(JSON.stringify({ model: 'tiny-gpt2', prompt: 'Hi', n: 12, max_tokens: 100, stream: true }));
    });
    t.ok(await waitFor(allFree), 'all 12 choices cancelled and their KV blocks freed while the loop holds');
    executor.holdIterations(-1);
  });

  t.test('no line of the log is an error', async (t) => {
    t.same(kept.lines.filter((l) => / ERROR /.test(l)), []);
  });
});

t.test('--allow-any-content-type reads every body as JSON', async (t) => {
  const { base } = await startTestServer(t, { allowAnyContentType: true });
  const port = portOf(base);
  const hello = JSON.stringify({ text_input: 'Hi', max_tokens: 1 });
  const cases: Record<string, string>[] = [{ 'content-type': 'text/plain' }, { 'content-type': 'multipart/form-data; boundary=x' },
    { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://page.example' }];
  for (const headers of cases) {
    t.equal((await send(port, 'POST', GENERATE, headers, hello)).status, 200, JSON.stringify(headers));
  }
});
