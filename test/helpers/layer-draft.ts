// A draft model for speculative-decoding tests: a checkpoint's first `layers` decoder layers with its embeddings,
// final norm and LM head (an early exit of the model itself — LayerSkip's self-speculative draft), written as a
// checkpoint of its own with the same tokenizer. Its guesses agree with the model's often but not always, which is
// what a draft model's test needs.
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

type Header = Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] } | Record<string, string>>;

export function writeLayerDraft(modelDir: string, outDir: string, layers: number): string {
  const buf = readFileSync(join(modelDir, 'model.safetensors'));
  const headerLen = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + headerLen).toString('utf8')) as Header;
  const kept: Header = {};
  const parts: Buffer[] = [];
  let offset = 0;
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const layer = /^model\.layers\.(\d+)\./.exec(name);
    if (layer && Number(layer[1]) >= layers) continue;
    const { dtype, shape, data_offsets: [from, to] } = t as { dtype: string; shape: number[]; data_offsets: [number, number] };
    parts.push(buf.subarray(8 + headerLen + from, 8 + headerLen + to));
    kept[name] = { dtype, shape, data_offsets: [offset, offset + (to - from)] };
    offset += to - from;
  }
  const json = Buffer.from(JSON.stringify(kept), 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(join(outDir, 'model.safetensors'), Buffer.concat([len, json, ...parts]));
  const config = JSON.parse(readFileSync(join(modelDir, 'config.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(outDir, 'config.json'), JSON.stringify({ ...config, num_hidden_layers: layers }, null, 2));
  for (const file of ['tokenizer.json', 'tokenizer_config.json', 'generation_config.json']) {
    if (existsSync(join(modelDir, file))) copyFileSync(join(modelDir, file), join(outDir, file));
  }
  return outDir;
}
