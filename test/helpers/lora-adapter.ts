// A LoRA adapter for the tiny-llama fixture, written by the test that needs it: a Hugging Face PEFT directory
// (adapter_config.json + adapter_model.safetensors in f32, what --lora-modules reads) and the same adapter as
// TensorRT-LLM's request tensors (lora_weights + lora_config, what a KServe request sends), so a test can serve one
// adapter both ways. q_proj and v_proj of both layers, rank 4, lora_alpha = r (scaling 1: B is the same in both).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

// tiny-llama's widths (test/fixtures/models/tiny-llama/config.json): hidden 64, 4 heads and 2 KV heads of 16.
const HIDDEN = 64;
const LAYERS = 2;
const RANK = 4;
// TensorRT-LLM's module ids (native/engine/lora/lora-adapter.h) and each module's output width.
const MODULES = [{ hf: 'q_proj', id: 1, out: 64 }, { hf: 'v_proj', id: 3, out: 32 }] as const;

export interface TinyAdapter {
  dir: string;
  /** lora_weights [rows, cols]: per (layer, module) A [r, in] then B [out, r], zero-padded. */
  weights: Float32Array;
  weightsShape: [number, number];
  /** lora_config [rows, 3]: (module_id, layer_idx, r). */
  config: Int32Array;
  configShape: [number, number];
}

/** A small deterministic generator (mulberry32), so an adapter is the same every run. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let x = Math.imul(s ^ (s >>> 15), 1 | s);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/** safetensors: an 8-byte little-endian header length, the JSON header (padded to 8 bytes), the f32 data. */
function safetensorsF32(tensors: { name: string; shape: number[]; data: Float32Array }[]): Buffer {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: 'F32', shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([length, Buffer.from(json), ...tensors.map((t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength))]);
}

/** Writes adapter `name` under `parent`; `scale`: the size of its values (uniform in ±scale), 0 for an adapter that
 * changes nothing (B all zeros). */
export function writeTinyLlamaAdapter(parent: string, name: string, options: { seed?: number; scale?: number } = {}): TinyAdapter {
  const next = random(options.seed ?? 1);
  const scale = options.scale ?? 0.05;
  const value = (size: number) => (next() * 2 - 1) * size;
  const tensors: { name: string; shape: number[]; data: Float32Array }[] = [];
  const cols = Math.max(...MODULES.map((m) => RANK * HIDDEN + m.out * RANK));
  const rows = LAYERS * MODULES.length;
  const weights = new Float32Array(rows * cols);
  const config = new Int32Array(rows * 3);
  let row = 0;
  for (let layer = 0; layer < LAYERS; layer += 1) {
    for (const m of MODULES) {
      // A zero adapter still has an A (a real one's, of size 0.05): only B, what the delta is scaled by, is zero.
      const a = Float32Array.from({ length: RANK * HIDDEN }, () => value(scale || 0.05));
      const b = Float32Array.from({ length: m.out * RANK }, () => value(scale));
      const prefix = `base_model.model.model.layers.${layer}.self_attn.${m.hf}`;
      tensors.push({ name: `${prefix}.lora_A.weight`, shape: [RANK, HIDDEN], data: a });
      tensors.push({ name: `${prefix}.lora_B.weight`, shape: [m.out, RANK], data: b });
      weights.set(a, row * cols);
      weights.set(b, row * cols + a.length);
      config.set([m.id, layer, RANK], row * 3);
      row += 1;
    }
  }
  const dir = join(parent, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'adapter_config.json'), JSON.stringify({
    peft_type: 'LORA', task_type: 'CAUSAL_LM', base_model_name_or_path: 'tiny-llama', r: RANK, lora_alpha: RANK,
    lora_dropout: 0, target_modules: MODULES.map((m) => m.hf), bias: 'none', use_rslora: false, fan_in_fan_out: false,
  }, null, 2));
  writeFileSync(join(dir, 'adapter_model.safetensors'), safetensorsF32(tensors));
  return { dir, weights, weightsShape: [rows, cols], config, configShape: [rows, 3] };
}
