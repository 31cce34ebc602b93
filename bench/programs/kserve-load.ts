// A closed-loop load generator for the frontend benchmark, one tool for both wires so that HTTP and gRPC are driven
// alike: `node kserve-load.js <http|grpc> <host:port> <unary|stream> <connections> <seconds> <max_tokens>`.
// Keeps <connections> requests in flight (HTTP: keep-alive sockets, generate / generate_stream; gRPC: one channel,
// ModelInfer / ModelStreamInfer on ensemble, tensors as raw contents like tritonclient) and prints one JSON line:
// {"requests": n, "seconds": s, "errors": n, "tokens": n}.
import { Agent, request } from 'node:http';

import { GrpcClient, type GrpcRequest } from '../../launcher/client/grpc.js';

const [wire = 'http', address = '127.0.0.1:8000', mode = 'unary', connections = '16', seconds = '10', maxTokens = '1'] = process.argv.slice(2);
const PROMPT = 'What is machine learning?';
const n = Number(maxTokens);
const stream = mode === 'stream';

function httpOnce(agent: Agent): Promise<number> {
  const body = JSON.stringify({ text_input: PROMPT, max_tokens: n, bad_words: '', stop_words: '', ...(stream ? { stream: true } : {}) });
  const [host, port] = address.split(':');
  return new Promise((resolve, reject) => {
    const req = request({ host, port: Number(port), agent, method: 'POST', path: `/v2/models/ensemble/${stream ? 'generate_stream' : 'generate'}`,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      let events = 0;
      res.on('data', (chunk: Buffer) => { if (stream) events += chunk.toString().split('data: ').length - 1; });
      res.on('end', () => (res.statusCode === 200 ? resolve(stream ? events : n) : reject(new Error(`HTTP ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

function grpcRequest(): GrpcRequest {
  return { model: 'ensemble', inputs: [
    { name: 'text_input', datatype: 'BYTES', shape: [1, 1], data: [PROMPT] },
    { name: 'max_tokens', datatype: 'INT32', shape: [1, 1], data: [n] },
    ...(stream ? [{ name: 'stream', datatype: 'BOOL', shape: [1, 1], data: [true] }] : []),
  ] };
}

async function grpcOnce(client: GrpcClient): Promise<number> {
  if (!stream) {
    await client.infer(grpcRequest());
    return n;
  }
  const call = client.stream();
  call.send(grpcRequest());
  let responses = 0;
  for await (const r of call.responses) {
    if (r.outputs.length > 0) responses += 1;
    if (r.final) call.end();
  }
  return responses;
}

async function main(): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: Number(connections) });
  const client = wire === 'grpc' ? new GrpcClient(address) : undefined;
  const once = client ? () => grpcOnce(client) : () => httpOnce(agent);
  const end = performance.now() + Number(seconds) * 1000;
  let requests = 0;
  let errors = 0;
  let tokens = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: Number(connections) }, async () => {
    while (performance.now() < end) {
      try {
        tokens += await once();
        requests += 1;
      } catch {
        errors += 1;
      }
    }
  }));
  process.stdout.write(`${JSON.stringify({ requests, seconds: (performance.now() - t0) / 1000, errors, tokens })}\n`);
  client?.close();
  agent.destroy();
}

await main();
