// The client's pure parts: flag checks, request bodies, SSE framing and the seeds' print formats.
import t from 'tap';

import { checkProtocol, defaultUrl, modelKind, parseTokenList, prompts, type ClientOptions } from '../../../launcher/client/client-options.js';
import { grpcAddress } from '../../../launcher/client/grpc.js';
import { finishOf, formatElement, formatIds, formatShape, previewValues } from '../../../launcher/client/client-output.js';
import { generateBody, inferBody, padRows } from '../../../launcher/client/client-request.js';
import { normalizeUrl } from '../../../launcher/client/http.js';
import { splitSseEvents } from '../../../launcher/client/sse.js';

const base: ClientOptions = {
  url: 'localhost:8000', protocol: 'http', modelName: 'tensorrt_llm', text: 'a', requestOutputLen: 5, streaming: false,
  returnLogProbs: false, returnContextLogits: false, returnGenerationLogits: false, excludeInputInOutput: false,
};

t.test('flags: protocol, model names, token lists, batch prompts, URLs', async (t) => {
  t.doesNotThrow(() => checkProtocol('http'));
  t.doesNotThrow(() => checkProtocol('grpc'));
  t.throws(() => checkProtocol('udp'), /-i\/--protocol must be http or grpc, got "udp"/);
  t.same([defaultUrl('http'), defaultUrl('grpc')], ['localhost:8000', 'localhost:8001'], "Triton's ports");
  t.equal(modelKind('tensorrt_llm'), 'tokens');
  t.equal(modelKind('tensorrt_llm_bls'), 'text');
  t.throws(() => modelKind('preprocessing'), /--model-name must be tensorrt_llm .*got "preprocessing"/);
  t.same(parseTokenList('1, 2,3'), [1, 2, 3]);
  t.same(parseTokenList('[4, 5]'), [4, 5]);
  t.throws(() => parseTokenList('1,x'), /--input-tokens must be a list of non-negative token ids .*got "1,x"/);
  t.same(prompts({ text: 'x', batchInputs: '["a","b"]' }), ['a', 'b']);
  t.same(prompts({ text: '["c"]', batchInputs: true }), ['c'], 'the flag alone reads --text as the list');
  t.throws(() => prompts({ text: 'x', batchInputs: 'nope' }), /--batch-inputs must be a JSON list of non-empty prompts/);
  t.equal(normalizeUrl('localhost:8000'), 'http://localhost:8000');
  t.equal(normalizeUrl('https://h:1/'), 'https://h:1');
  t.throws(() => normalizeUrl('grpc://h:1'), /--url must use http or https, got "grpc:\/\/h:1" \(for gRPC, add -i grpc/);
  t.equal(grpcAddress('localhost:8001'), 'localhost:8001');
  t.equal(grpcAddress('grpc://h:9/'), 'h:9');
  t.equal(grpcAddress('h'), 'h:8001', 'the gRPC port by default');
  t.throws(() => grpcAddress('http://h:8001'), /--url for -i grpc must be host:port \(or grpc:\/\/host:port\), got "http:\/\/h:8001"/);
});

t.test('request bodies: Triton names per model, padded batches, infer tensors', async (t) => {
  const o = { ...base, topK: 3, topP: 0.5, lengthPenalty: 1.2, returnLogProbs: true, endId: 7 };
  t.same(generateBody(o, 'tokens', { rows: [[1, 2]] }, true, 'r1'), {
    id: 'r1', input_ids: [1, 2], streaming: true, request_output_len: 5, end_id: 7, runtime_top_k: 3, runtime_top_p: 0.5,
    len_penalty: 1.2, return_log_probs: true,
  });
  t.match(generateBody(o, 'text', { prompts: ['p', 'q'] }, false, undefined), { text_input: ['p', 'q'], stream: false, max_tokens: 5, top_k: 3, length_penalty: 1.2 });
  t.same(padRows([[1, 2, 3], [4]], 0), { ids: [[1, 2, 3], [4, 0, 0]], lengths: [3, 1] });
  const infer = inferBody(base, 'tokens', { rows: [[1, 2, 3], [4]] }, undefined) as { inputs: { name: string; shape: number[]; data: unknown[] }[] };
  t.same(infer.inputs.map((i) => [i.name, i.shape]), [['input_ids', [2, 3]], ['input_lengths', [2, 1]], ['request_output_len', [2, 1]]]);
  t.same(infer.inputs[2]!.data, [5, 5]);
});

t.test('SSE framing across partial chunks', async (t) => {
  t.same(splitSseEvents('data: {"a":1}\n\ndata: {"b"'), { events: ['{"a":1}'], rest: 'data: {"b"' });
  t.same(splitSseEvents(': comment\r\n\r\ndata: x\r\ndata: y\r\n\r\n').events, ['x\ny']);
});

t.test("the seeds' print formats", async (t) => {
  t.equal(formatIds([28524, 287]), '[28524, 287]');
  t.equal(formatShape([1, 12, 50257]), '(1, 12, 50257)');
  t.equal(formatShape([5]), '(5,)');
  t.equal(previewValues([1, 2, 3, 4, 5, 6, 7]), '[1 2 3 ... 5 6 7]');
  t.equal(finishOf(5, 5, true), 'length', 'all tokens: length even if a stop was sent late');
  t.equal(finishOf(3, 5, true), 'cancelled');
  t.equal(finishOf(3, 5, false), 'end_id');
  const lines = formatElement({ batchIndex: 0, inputText: 'Hi', outputText: ' there', outputIds: [5, 6], generated: 2, finish: 'length',
    contextLogits: { shape: [1, 1, 2], data: [0.5, 1] } }, 'tokens', 2, false);
  t.same(lines, ['Input: Hi', 'Output beam 0:  there', 'Output sequence: [5, 6]', 'context_logits.shape: (1, 1, 2)',
    'context_logits: [0.500000 1]', 'Finish: length (generated 2 of 2 tokens)']);
});
