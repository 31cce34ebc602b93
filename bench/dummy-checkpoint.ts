// Writes a Hugging Face checkpoint of a given Llama shape with random ("dummy") weights, as vLLM's
// --load-format dummy does: real architecture, real file formats, meaningless outputs. For benchmarks only.
import { mkdirSync, openSync, writeSync, closeSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';

export interface LlamaShape {
  vocabSize: number;
  hiddenSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  intermediateSize: number;
  maxPositionEmbeddings: number;
}

/** The benchmark shape of the issue: a ~22M-parameter Llama (GQA 8/4, head_dim 64, tied embeddings). */
export const BENCH_SHAPE: LlamaShape = {
  vocabSize: 8192, hiddenSize: 512, numLayers: 6, numHeads: 8, numKvHeads: 4, intermediateSize: 1408,
  maxPositionEmbeddings: 2048,
};

function tensorList(s: LlamaShape): [string, number[]][] {
  const headDim = s.hiddenSize / s.numHeads;
  const kv = s.numKvHeads * headDim;
  const list: [string, number[]][] = [['model.embed_tokens.weight', [s.vocabSize, s.hiddenSize]]];
  for (let i = 0; i < s.numLayers; i += 1) {
    const p = `model.layers.${i}.`;
    list.push(
      [`${p}input_layernorm.weight`, [s.hiddenSize]],
      [`${p}self_attn.q_proj.weight`, [s.hiddenSize, s.hiddenSize]],
      [`${p}self_attn.k_proj.weight`, [kv, s.hiddenSize]],
      [`${p}self_attn.v_proj.weight`, [kv, s.hiddenSize]],
      [`${p}self_attn.o_proj.weight`, [s.hiddenSize, s.hiddenSize]],
      [`${p}post_attention_layernorm.weight`, [s.hiddenSize]],
      [`${p}mlp.gate_proj.weight`, [s.intermediateSize, s.hiddenSize]],
      [`${p}mlp.up_proj.weight`, [s.intermediateSize, s.hiddenSize]],
      [`${p}mlp.down_proj.weight`, [s.hiddenSize, s.intermediateSize]],
    );
  }
  list.push(['model.norm.weight', [s.hiddenSize]]);
  return list;
}

export function parameterCount(s: LlamaShape): number {
  return tensorList(s).reduce((n, [, shape]) => n + shape.reduce((a, b) => a * b, 1), 0);
}

/** Writes config.json + model.safetensors (f32) into `dir` unless they already exist; returns `dir`. */
export function writeDummyLlama(dir: string, s: LlamaShape, seed = 1): string {
  if (existsSync(join(dir, 'model.safetensors'))) return dir;
  mkdirSync(dir, { recursive: true });
  const tensors = tensorList(s);
  const header: Record<string, unknown> = { __metadata__: { format: 'pt', note: 'dummy weights' } };
  let offset = 0;
  for (const [name, shape] of tensors) {
    const bytes = shape.reduce((a, b) => a * b, 1) * 4;
    header[name] = { dtype: 'F32', shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const fd = openSync(join(dir, 'model.safetensors'), 'w');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeSync(fd, len);
  writeSync(fd, Buffer.from(json, 'utf8'));
  let state = seed >>> 0 || 1;
  for (const [name, shape] of tensors) {
    const n = shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    const isNorm = name.endsWith('layernorm.weight') || name === 'model.norm.weight';
    const scale = isNorm ? 0 : 1 / Math.sqrt(shape[shape.length - 1]!);
    for (let i = 0; i < n; i += 1) {
      state ^= state << 13; state ^= state >>> 17; state ^= state << 5; state >>>= 0;  // xorshift32
      data[i] = isNorm ? 1 : ((state / 4294967296) * 2 - 1) * scale * 1.7;
    }
    writeSync(fd, Buffer.from(data.buffer));
  }
  closeSync(fd);
  writeFileSync(join(dir, 'config.json'), JSON.stringify({
    architectures: ['LlamaForCausalLM'], model_type: 'llama', vocab_size: s.vocabSize, hidden_size: s.hiddenSize,
    num_hidden_layers: s.numLayers, num_attention_heads: s.numHeads, num_key_value_heads: s.numKvHeads,
    intermediate_size: s.intermediateSize, max_position_embeddings: s.maxPositionEmbeddings, rms_norm_eps: 1e-5,
    rope_theta: 10000.0, hidden_act: 'silu', tie_word_embeddings: true, bos_token_id: 1, eos_token_id: 2,
    torch_dtype: 'float32',
  }, null, 1));
  return dir;
}
