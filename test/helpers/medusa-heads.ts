// Medusa heads for a checkpoint, written in the Medusa layout (config.json + medusa_lm_head.safetensors) as
// Medusa's training starts them: each head's vocabulary projection a copy of the model's LM head, its residual
// block zero. Such a head guesses exactly the token the LM head picks from the row it reads — the token just drawn
// — so a guess is kept exactly where the output repeats that token, which tests can count from the plain output.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

type Tensor = { dtype: string; shape: number[]; data_offsets: [number, number] };

const BYTES: Record<string, number> = { F32: 4, F16: 2, BF16: 2 };

export function writeEchoMedusaHeads(modelDir: string, outDir: string, numHeads: number): string {
  const buf = readFileSync(join(modelDir, 'model.safetensors'));
  const headerLen = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + headerLen).toString('utf8')) as Record<string, Tensor>;
  const head = header['lm_head.weight'] ?? header['model.embed_tokens.weight'];
  if (!head) throw new Error(`${modelDir}: no lm_head.weight or model.embed_tokens.weight`);
  const [, hidden] = head.shape as [number, number];
  const lmHead = buf.subarray(8 + headerLen + head.data_offsets[0], 8 + headerLen + head.data_offsets[1]);
  const width = BYTES[head.dtype];
  if (!width) throw new Error(`${modelDir}: LM head dtype ${head.dtype}`);
  const out: Record<string, Tensor> = {};
  const parts: Buffer[] = [];
  let offset = 0;
  const add = (name: string, shape: number[], bytes: Buffer) => {
    out[name] = { dtype: head.dtype, shape, data_offsets: [offset, offset + bytes.length] };
    parts.push(bytes);
    offset += bytes.length;
  };
  for (let k = 0; k < numHeads; ++k) {
    add(`${k}.0.linear.weight`, [hidden, hidden], Buffer.alloc(hidden * hidden * width));
    add(`${k}.0.linear.bias`, [hidden], Buffer.alloc(hidden * width));
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
