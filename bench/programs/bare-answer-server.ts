// The floor for frontend-hostile.ts's (c, binary) phase: a bare node:http server, nothing of ours, in a process of
// its own, that reads each POST body to its end and answers it with <answer bytes> bytes (one buffer made at start,
// written at once, as the binary infer answer is), and answers GET with a small JSON. What health checks suffer from
// it is what moving that many bytes through Node and loopback costs on this machine.
//   node bare-answer-server.js <answer bytes>    prints "listening <port>" once it listens on 127.0.0.1
import { createServer } from 'node:http';

const answer = Buffer.alloc(Number(process.argv[2] ?? 0), 1);
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    if (req.method === 'POST') {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': answer.length });
      res.end(answer);
    } else {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    }
  });
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === 'object' && address ? address.port : 0}\n`);
});
