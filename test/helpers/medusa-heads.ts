// Medusa heads for a checkpoint, written in the Medusa layout (config.json + medusa_lm_head.safetensors), each head's
// vocabulary projection a copy of the model's LM head. Without trained blocks, as Medusa's training starts them: the
// residual blocks zero, so a head guesses exactly the token the LM head picks from the row it reads — the token just
// drawn — and a guess is kept exactly where the output repeats that token, which tests can count from the plain
// output. With `blocks` (a safetensors file of `<head>.0.linear.weight|bias`, as scripts/train/train_medusa_heads.py
// writes them), the trained blocks.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

type Tensor = { dtype: string; shape: number[]; data_offsets: [number, number] };

const BYTES: Record<string, number> = { F32: 4, F16: 2, BF16: 2 };

function readTensors(path: string): { header: Record<string, Tensor>; bytes: (t: Tensor) => Buffer } {
  const buf = readFileSync(path);
  const headerLen = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + headerLen).toString('utf8')) as Record<string, Tensor>;
  return { header, bytes: (t) => buf.subarray(8 + headerLen + t.data_offsets[0], 8 + headerLen + t.data_offsets[1]) };
}

export function writeMedusaHeads(modelDir: string, outDir: string, numHeads: number, blocks?: string): string {
  const { header, bytes } = readTensors(join(modelDir, 'model.safetensors'));
  const trained = blocks === undefined ? undefined : readTensors(blocks);
  const head = header['lm_head.weight'] ?? header['model.embed_tokens.weight'];
  if (!head) throw new Error(`${modelDir}: no lm_head.weight or model.embed_tokens.weight`);
  const [, hidden] = head.shape as [number, number];
  const lmHead = bytes(head);
  const width = BYTES[head.dtype];
  if (!width) throw new Error(`${modelDir}: LM head dtype ${head.dtype}`);
  const out: Record<string, Tensor> = {};
  const parts: Buffer[] = [];
  let offset = 0;
  const add = (name: string, shape: number[], data: Buffer, dtype = head.dtype) => {
    out[name] = { dtype, shape, data_offsets: [offset, offset + data.length] };
    parts.push(data);
    offset += data.length;
  };
  const block = (name: string, shape: number[]) => {
    const t = trained?.header[name];
    if (trained && !t) throw new Error(`${blocks}: no tensor ${name}`);
    if (t) add(name, t.shape, trained!.bytes(t), t.dtype);
    else add(name, shape, Buffer.alloc(shape.reduce((a, b) => a * b, 1) * width));
  };
  for (let k = 0; k < numHeads; ++k) {
    block(`${k}.0.linear.weight`, [hidden, hidden]);
    block(`${k}.0.linear.bias`, [hidden]);
    add(`${k}.1.weight`, head.shape, lmHead);
  }
  const json = Buffer.from(JSON.stringify(out), 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'medusa_lm_head.safetensors'), Buffer.concat([len, json, ...parts]));
  writeFileSync(join(outDir, 'config.json'), JSON.stringify({ medusa_num_heads: numHeads, medusa_num_layers: 1, base_model_name_or_path: modelDir }, null, 2));
  return outDir;
}

/** The guesses echo heads get kept in an output of `maxTokens` tokens, `perStep` guesses a step: after each drawn
 * token x, up to perStep guesses of x are checked (never past the last token), kept while the next tokens are x. */
export function echoKept(output: readonly number[], maxTokens: number, perStep: number): number {
  let kept = 0;
  for (let n = 1; n < output.length;) {
    const room = Math.min(perStep, maxTokens - n - 1);
    let a = 0;
    while (a < room && output[n + a] === output[n - 1]) ++a;
    kept += a;
    n += a + 1;
  }
  return kept;
}
