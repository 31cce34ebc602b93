// The CLI's generate command, run as a user would: a real process, real stdout, real exit codes.
import { join } from 'node:path';

import { execa } from 'execa';
import t from 'tap';

import { packageRoot } from '../../worker/common/package-root.js';
import { fixtureDir, referenceCases } from '../helpers/fixtures.js';

const bin = join(packageRoot(), 'bin', 'trtllm-launch.js');

t.test('generate prints the prompt and a greedy continuation', async (t) => {
  const result = await execa('node', [bin, 'generate', '--model', fixtureDir('tiny-gpt2'), '--prompt', 'What is machine learning?', '--max-tokens', '8', '--threads', '1'], { reject: false });
  t.equal(result.exitCode, 0, result.stderr);
  t.ok(result.stdout.startsWith('What is machine learning?'), 'echoes the prompt');
  t.ok(result.stdout.length > 'What is machine learning?'.length, 'then the continuation');
  t.match(result.stderr, /Loading weights: 100%/);
  t.match(result.stderr, /8 tokens in .* finish reason: length/);
  t.ok(referenceCases('tiny-gpt2').length > 0);
});

t.test('bad options name the option and value', async (t) => {
  const r1 = await execa('node', [bin, 'generate', '--max-tokens', '0'], { reject: false });
  t.not(r1.exitCode, 0);
  t.match(r1.stderr, /--max-tokens must be an integer >= 1, got "0"/);
  const r2 = await execa('node', [bin, 'generate', '--model', '/nonexistent'], { reject: false });
  t.equal(r2.exitCode, 2);
  t.match(r2.stderr, /\/nonexistent/);
});
