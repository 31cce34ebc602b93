// Hostile guides through a real server and the real grammar engine: a grammar whose rules nest tens of thousands
// deep (each referring to the next) is served, and groups, regex groups and schemas nested past the engine's
// limits are 400s naming the limit — never a crash of the worker (such a chain once overflowed the stack in the
// grammar's recursive passes). The server keeps serving and its KV cache is free afterwards.
import t from 'tap';

import { localExecutor, postJson, startTestServer, waitFor } from '../../../helpers/serving.js';

t.test('deeply nested guides', async (t) => {
  const { base, server } = await startTestServer(t, { maxBodyBytes: 4 * 1024 * 1024 });
  const executor = localExecutor(server);
  const generate = (type: string, guide: string, maxTokens = 6) => postJson(`${base}/v2/models/ensemble/generate`, {
    text_input: 'The', max_tokens: maxTokens, exclude_input_in_output: true, guided_decoding_guide_type: type, guided_decoding_guide: guide,
  });

  t.test('a chain of 100,000 rules, each nesting the next, is served and followed', async (t) => {
    const n = 100_000;
    let g = 'root ::= r0\n';
    for (let i = 0; i < n; i += 1) g += `r${i} ::= "a" r${i + 1} | "b"\n`;
    g += `r${n} ::= "c"\n`;
    const r = await generate('ebnf_grammar', g);
    t.equal(r.status, 200, JSON.stringify(r.json).slice(0, 300));
    t.match(r.json.text_output, /^a*b?$/, 'the output is a prefix the chain accepts (a run of a, at most one b)');
  });

  t.test('nesting past the limits: a 400 naming it', async (t) => {
    const parens = `root ::= ${'('.repeat(100_000)}"a"${')'.repeat(100_000)}`;
    const p = await generate('ebnf_grammar', parens);
    t.equal(p.status, 400);
    t.match(p.json.error, /groups \( \.\.\. \) nested more than 1000 deep at line 1, column \d+; give inner groups rules of their own/);
    const regex = await generate('regex', `${'('.repeat(50_000)}a${')'.repeat(50_000)}`);
    t.equal(regex.status, 400);
    t.match(regex.json.error, /regex: groups nested more than 256 deep at offset \d+/);
    let schema: unknown = { type: 'integer' };
    for (let i = 0; i < 200; i += 1) schema = { type: 'array', items: schema };
    const s = await generate('json_schema', JSON.stringify(schema));
    t.equal(s.status, 400);
    t.match(s.json.error, /json_schema: schemas nested more than 128 deep \(each \$ref followed counts\)/);
  });

  t.test('still serving, nothing left held', async (t) => {
    const r = await postJson(`${base}/v2/models/ensemble/generate`, { text_input: 'The', max_tokens: 3 });
    t.equal(r.status, 200);
    t.ok(await waitFor(() => { const s = executor.kvCacheStats(); return s.freeNumBlocks === s.maxNumBlocks && executor.numActiveRequests() === 0; }));
  });
});
