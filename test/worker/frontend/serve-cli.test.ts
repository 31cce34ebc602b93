// The start command as users type it: a real process, ready lines, a real curl, SIGTERM → exit 0.
import { join } from 'node:path';

import { execa } from 'execa';
import t from 'tap';

import { packageRoot } from '../../../worker/common/package-root.js';
import { fixtureDir } from '../../helpers/fixtures.js';

const bin = join(packageRoot(), 'bin', 'trtllm-launch.js');

t.test('trtllm-launch --model --world-size 1 --http-port --grpc-port --metrics-port serves until SIGTERM', async (t) => {
  const child = execa('node', [bin, '--model', fixtureDir('tiny-llama'), '--world-size', '1', '--http-port', '0', '--grpc-port', '0', '--metrics-port', '0', '--threads', '1'], { reject: false });
  let out = '';
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (/metrics: curl/.test(out)) resolve();
    });
    void child.then((r) => reject(new Error(`exited early (${r.exitCode}): ${r.stderr}`)));
  });
  await ready;
  const port = /Started HTTPService at 0\.0\.0\.0:(\d+)/.exec(out)![1];
  const metricsPort = /Started Metrics Service at 0\.0\.0\.0:(\d+)/.exec(out)![1];
  t.match(out, /Started GRPCInferenceService at 0\.0\.0\.0:\d+\n/, "Triton's line for the gRPC port");
  t.match(out, /curl -X POST localhost:\d+\/v2\/models\/ensemble\/generate -d/, 'prints how to query it');
  const r = await execa('curl', ['-s', '-X', 'POST', `localhost:${port}/v2/models/ensemble/generate`, '-d',
    '{"text_input": "What is machine learning?", "max_tokens": 20, "bad_words": "", "stop_words": ""}']);
  t.match(JSON.parse(r.stdout), { model_name: 'ensemble', text_output: /^What is machine learning\?/ });
  const m = await execa('curl', ['-s', `localhost:${metricsPort}/metrics`]);
  t.match(m.stdout, /nv_trt_llm_request_metrics\{/);
  child.kill('SIGTERM');
  const result = await child;
  t.equal(result.exitCode, 0, 'SIGTERM → exit 0');
  t.match(result.stderr, /SIGTERM: draining/);
});

t.test('world size > 1 without a launcher is refused clearly; bad ports name the option', async (t) => {
  const r = await execa('node', [bin, 'serve', '--world-size', '2', '--launcher', 'none', '--model', fixtureDir('tiny-gpt2')], { reject: false });
  t.equal(r.exitCode, 2);
  t.match(r.stderr, /--launcher none runs one rank in this process; --world-size 2 needs --launcher mpirun/);
  const p = await execa('node', [bin, '--http-port', '70000'], { reject: false });
  t.not(p.exitCode, 0);
  t.match(p.stderr, /--http-port must be a port number in \[0, 65535\], got "70000"/);
  const env = await execa('node', [bin, '--model', fixtureDir('tiny-gpt2')], { reject: false, env: { TRTLLM_WORLD_SIZE: '3', TRTLLM_TP: '2' } });
  t.match(env.stderr, /--world-size 3 is not a multiple of --tp 2/, 'env fallbacks TRTLLM_WORLD_SIZE and TRTLLM_TP');
});
