// Exports a Llama-architecture Hugging Face checkpoint directory (config.json + model.safetensors, or a sharded
// model.safetensors.index.json; f32/f16/bf16 tensors) to a GGUF v3 file that llama.cpp loads, for the benchmark
// that compares our CPU executor with llama.cpp on the same weights (bench/llama-cpp-compare.ts).
//
// What it writes:
//  - llama.* hyperparameters from config.json;
//  - tensors under llama.cpp's names (token_embd, blk.N.attn_q, ..., output_norm, output), in F32 or F16 (1-D norm
//    weights stay F32 either way); a tied lm_head is omitted, which llama.cpp's loader accepts (it then uses
//    token_embd for the output projection);
//  - q_proj / k_proj rows reordered per head from the Hugging Face "rotate half" RoPE layout (pair = dims i and
//    i + headDim/2) to llama.cpp's adjacent-pairs layout (pair = dims 2i and 2i + 1), so both compute the same model;
//  - llama3 RoPE scaling (rope_scaling.rope_type = "llama3") as the rope_freqs tensor of per-frequency factors;
//  - a synthetic SentencePiece-style ("llama") vocabulary of vocab_size tokens: <unk>, <s>, </s>, the 256 byte
//    tokens, then filler pieces. The benchmark feeds token ids, so the tokenizer only has to satisfy the loader.
//
//   node dist/bench/gguf-export.js <checkpoint-dir> <out.gguf> [--f16]
import { closeSync, existsSync, openSync, readFileSync, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';

// ---- GGUF constants (format facts: value types and tensor types as numbered by the GGUF spec) ----
const GGUF_MAGIC = 0x46554747;  // "GGUF" read as a little-endian uint32
const GGUF_VERSION = 3;
const ALIGNMENT = 32;
const enum VType { U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12 }
const GGML_F32 = 0;
const GGML_F16 = 1;
const FILE_TYPE_ALL_F32 = 0;
const FILE_TYPE_MOSTLY_F16 = 1;
const TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_BYTE = 6;

type MetaValue =
  | { t: 'u32'; v: number } | { t: 'i32'; v: number } | { t: 'f32'; v: number } | { t: 'bool'; v: boolean }
  | { t: 'str'; v: string } | { t: 'strs'; v: string[] } | { t: 'f32s'; v: Float32Array } | { t: 'i32s'; v: Int32Array };

/** Growable little-endian byte writer for the header part of the file. */
class ByteWriter {
  private buf = Buffer.alloc(1 << 16);
  length = 0;

  private ensure(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = Buffer.alloc(size);
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
  u32(v: number): void { this.ensure(4); this.buf.writeUInt32LE(v >>> 0, this.length); this.length += 4; }
  i32(v: number): void { this.ensure(4); this.buf.writeInt32LE(v | 0, this.length); this.length += 4; }
  u64(v: number | bigint): void { this.ensure(8); this.buf.writeBigUInt64LE(BigInt(v), this.length); this.length += 8; }
  f32(v: number): void { this.ensure(4); this.buf.writeFloatLE(v, this.length); this.length += 4; }
  u8(v: number): void { this.ensure(1); this.buf.writeUInt8(v, this.length); this.length += 1; }
  bytes(b: Uint8Array): void { this.ensure(b.length); this.buf.set(b, this.length); this.length += b.length; }
  str(s: string): void { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.bytes(b); }
  pad(alignment: number): void { while (this.length % alignment !== 0) this.u8(0); }
  result(): Buffer { return this.buf.subarray(0, this.length); }
}

function writeMeta(w: ByteWriter, key: string, m: MetaValue): void {
  w.str(key);
  switch (m.t) {
    case 'u32': w.u32(VType.U32); w.u32(m.v); break;
    case 'i32': w.u32(VType.I32); w.i32(m.v); break;
    case 'f32': w.u32(VType.F32); w.f32(m.v); break;
    case 'bool': w.u32(VType.BOOL); w.u8(m.v ? 1 : 0); break;
    case 'str': w.u32(VType.STRING); w.str(m.v); break;
    case 'strs': w.u32(VType.ARRAY); w.u32(VType.STRING); w.u64(m.v.length); for (const s of m.v) w.str(s); break;
    case 'f32s': w.u32(VType.ARRAY); w.u32(VType.F32); w.u64(m.v.length); for (const x of m.v) w.f32(x); break;
    case 'i32s': w.u32(VType.ARRAY); w.u32(VType.I32); w.u64(m.v.length); for (const x of m.v) w.i32(x); break;
  }
}

// ---- half precision conversion (no Float16Array in Node 20) ----
const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

export function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** Round-to-nearest-even float32 -> float16 bits. */
export function floatToHalf(x: number): number {
  f32Scratch[0] = x;
  const bits = u32Scratch[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  let mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && (half & 1))) half += 1;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1))) half += 1;  // a carry into the exponent is still correct
  return sign | half;
}

// ---- safetensors reading ----
interface StEntry { file: string; dtype: string; shape: number[]; begin: number; end: number }

function readSafetensorsHeader(path: string): Map<string, StEntry> {
  const fd = openSync(path, 'r');
  try {
    const lenBuf = Buffer.alloc(8);
    readSync(fd, lenBuf, 0, 8, 0);
    const n = Number(lenBuf.readBigUInt64LE(0));
    const json = Buffer.alloc(n);
    readSync(fd, json, 0, n, 8);
    const header = JSON.parse(json.toString('utf8')) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
    const out = new Map<string, StEntry>();
    for (const [name, v] of Object.entries(header)) {
      if (name === '__metadata__') continue;
      out.set(name, { file: path, dtype: v.dtype, shape: v.shape, begin: 8 + n + v.data_offsets[0], end: 8 + n + v.data_offsets[1] });
    }
    return out;
  } finally {
    closeSync(fd);
  }
}

function listTensors(dir: string): Map<string, StEntry> {
  const index = join(dir, 'model.safetensors.index.json');
  if (existsSync(index)) {
    const map = (JSON.parse(readFileSync(index, 'utf8')) as { weight_map: Record<string, string> }).weight_map;
    const all = new Map<string, StEntry>();
    for (const file of new Set(Object.values(map))) for (const [k, v] of readSafetensorsHeader(join(dir, file))) all.set(k, v);
    return all;
  }
  return readSafetensorsHeader(join(dir, 'model.safetensors'));
}

function readTensorF32(e: StEntry): Float32Array {
  const bytes = Buffer.alloc(e.end - e.begin);
  const fd = openSync(e.file, 'r');
  try {
    let done = 0;
    while (done < bytes.length) done += readSync(fd, bytes, done, bytes.length - done, e.begin + done);
  } finally {
    closeSync(fd);
  }
  const n = e.shape.reduce((a, b) => a * b, 1);
  const out = new Float32Array(n);
  if (e.dtype === 'F32') {
    out.set(new Float32Array(bytes.buffer, bytes.byteOffset, n));  // Buffer.alloc: own ArrayBuffer, offset 0
  } else if (e.dtype === 'F16') {
    for (let i = 0; i < n; i += 1) out[i] = halfToFloat(bytes.readUInt16LE(i * 2));
  } else if (e.dtype === 'BF16') {
    const u = new Uint32Array(out.buffer);
    for (let i = 0; i < n; i += 1) u[i] = bytes.readUInt16LE(i * 2) << 16;
  } else {
    throw new Error(`unsupported safetensors dtype ${e.dtype}`);
  }
  return out;
}

/**
 * Reorders the rows of a q_proj/k_proj weight [numHeads*headDim, in] within each head: llama.cpp row 2i takes
 * Hugging Face row i, row 2i+1 takes row headDim/2 + i.
 */
export function permuteForInterleavedRope(w: Float32Array, numHeads: number, rows: number, cols: number): Float32Array {
  const headDim = rows / numHeads;
  const half = headDim / 2;
  const out = new Float32Array(w.length);
  for (let h = 0; h < numHeads; h += 1) {
    for (let i = 0; i < half; i += 1) {
      const dstA = (h * headDim + 2 * i) * cols, srcA = (h * headDim + i) * cols;
      const dstB = (h * headDim + 2 * i + 1) * cols, srcB = (h * headDim + half + i) * cols;
      out.set(w.subarray(srcA, srcA + cols), dstA);
      out.set(w.subarray(srcB, srcB + cols), dstB);
    }
  }
  return out;
}

// ---- the export ----
interface HfLlamaConfig {
  vocab_size: number; hidden_size: number; num_hidden_layers: number; num_attention_heads: number;
  num_key_value_heads?: number; intermediate_size: number; max_position_embeddings: number; rms_norm_eps?: number;
  rope_theta?: number; head_dim?: number; tie_word_embeddings?: boolean; bos_token_id?: number; eos_token_id?: number | number[];
  model_type?: string; architectures?: string[];
  rope_scaling?: RopeScaling | null; rope_parameters?: RopeScaling & { rope_theta?: number };
  attention_bias?: boolean; mlp_bias?: boolean;
}
interface RopeScaling { rope_type?: string; type?: string; factor?: number; low_freq_factor?: number; high_freq_factor?: number; original_max_position_embeddings?: number }

export interface ExportOptions { f16?: boolean; name?: string }
export interface ExportResult { path: string; bytes: number; tensors: number; fileType: 'F32' | 'F16' }

/** Per-frequency divisors of llama3 RoPE scaling (the published llama3 rule), length headDim/2. */
function llama3RopeFactors(headDim: number, theta: number, s: RopeScaling): Float32Array {
  const factor = s.factor ?? 8, low = s.low_freq_factor ?? 1, high = s.high_freq_factor ?? 4;
  const oldCtx = s.original_max_position_embeddings ?? 8192;
  const lowWavelen = oldCtx / low, highWavelen = oldCtx / high;
  const out = new Float32Array(headDim / 2);
  for (let i = 0; i < headDim / 2; i += 1) {
    const freq = 1 / theta ** ((2 * i) / headDim);
    const wavelen = (2 * Math.PI) / freq;
    if (wavelen < highWavelen) out[i] = 1;
    else if (wavelen > lowWavelen) out[i] = factor;
    else {
      const smooth = (oldCtx / wavelen - low) / (high - low);
      out[i] = 1 / ((1 - smooth) / factor + smooth);
    }
  }
  return out;
}

export function exportGguf(dir: string, outPath: string, options: ExportOptions = {}): ExportResult {
  const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as HfLlamaConfig;
  const arch = cfg.architectures?.[0] ?? '';
  if (cfg.model_type !== 'llama' && arch !== 'LlamaForCausalLM' && cfg.model_type !== 'mistral') {
    throw new Error(`only Llama-architecture checkpoints are supported, got model_type=${cfg.model_type} (${arch})`);
  }
  if (cfg.attention_bias || cfg.mlp_bias) throw new Error('attention/MLP biases are not supported by this exporter');
  const numHeads = cfg.num_attention_heads;
  const numKvHeads = cfg.num_key_value_heads ?? numHeads;
  const headDim = cfg.head_dim ?? cfg.hidden_size / numHeads;
  const ropeTheta = cfg.rope_theta ?? cfg.rope_parameters?.rope_theta ?? 10000;
  const scaling = cfg.rope_scaling ?? cfg.rope_parameters;
  const scalingType = scaling?.rope_type ?? scaling?.type;
  if (scalingType && scalingType !== 'default' && scalingType !== 'llama3') throw new Error(`unsupported rope scaling ${scalingType}`);
  const tied = cfg.tie_word_embeddings ?? false;
  const f16 = options.f16 ?? false;
  const vocab = cfg.vocab_size;

  // Tensor plan: GGUF name, source, transform.
  const src = listTensors(dir);
  interface Plan { name: string; dims: number[]; type: number; data: () => Float32Array }
  const plan: Plan[] = [];
  const take = (hf: string): StEntry => {
    const e = src.get(hf);
    if (!e) throw new Error(`tensor ${hf} is missing from the checkpoint`);
    return e;
  };
  const add = (name: string, hf: string, permuteHeads?: number): void => {
    const e = take(hf);
    const is1d = e.shape.length === 1;
    // GGUF dims run fastest-first: a row-major [rows, cols] weight is ne = [cols, rows].
    const dims = [...e.shape].reverse();
    plan.push({
      name, dims, type: f16 && !is1d ? GGML_F16 : GGML_F32,
      data: () => {
        const d = readTensorF32(e);
        return permuteHeads ? permuteForInterleavedRope(d, permuteHeads, e.shape[0]!, e.shape[1]!) : d;
      },
    });
  };
  add('token_embd.weight', 'model.embed_tokens.weight');
  for (let i = 0; i < cfg.num_hidden_layers; i += 1) {
    const p = `model.layers.${i}.`;
    add(`blk.${i}.attn_norm.weight`, `${p}input_layernorm.weight`);
    add(`blk.${i}.attn_q.weight`, `${p}self_attn.q_proj.weight`, numHeads);
    add(`blk.${i}.attn_k.weight`, `${p}self_attn.k_proj.weight`, numKvHeads);
    add(`blk.${i}.attn_v.weight`, `${p}self_attn.v_proj.weight`);
    add(`blk.${i}.attn_output.weight`, `${p}self_attn.o_proj.weight`);
    add(`blk.${i}.ffn_norm.weight`, `${p}post_attention_layernorm.weight`);
    add(`blk.${i}.ffn_gate.weight`, `${p}mlp.gate_proj.weight`);
    add(`blk.${i}.ffn_up.weight`, `${p}mlp.up_proj.weight`);
    add(`blk.${i}.ffn_down.weight`, `${p}mlp.down_proj.weight`);
  }
  add('output_norm.weight', 'model.norm.weight');
  if (!tied && src.has('lm_head.weight')) add('output.weight', 'lm_head.weight');
  if (scalingType === 'llama3') {
    const factors = llama3RopeFactors(headDim, ropeTheta, scaling!);
    plan.push({ name: 'rope_freqs.weight', dims: [factors.length], type: GGML_F32, data: () => factors });
  }

  // Metadata.
  const meta: [string, MetaValue][] = [
    ['general.architecture', { t: 'str', v: 'llama' }],
    ['general.name', { t: 'str', v: options.name ?? 'trtllm-launch export' }],
    ['general.file_type', { t: 'u32', v: f16 ? FILE_TYPE_MOSTLY_F16 : FILE_TYPE_ALL_F32 }],
    ['general.alignment', { t: 'u32', v: ALIGNMENT }],
    ['llama.vocab_size', { t: 'u32', v: vocab }],
    ['llama.context_length', { t: 'u32', v: cfg.max_position_embeddings }],
    ['llama.embedding_length', { t: 'u32', v: cfg.hidden_size }],
    ['llama.block_count', { t: 'u32', v: cfg.num_hidden_layers }],
    ['llama.feed_forward_length', { t: 'u32', v: cfg.intermediate_size }],
    ['llama.attention.head_count', { t: 'u32', v: numHeads }],
    ['llama.attention.head_count_kv', { t: 'u32', v: numKvHeads }],
    ['llama.attention.key_length', { t: 'u32', v: headDim }],
    ['llama.attention.value_length', { t: 'u32', v: headDim }],
    ['llama.rope.freq_base', { t: 'f32', v: ropeTheta }],
    ['llama.rope.dimension_count', { t: 'u32', v: headDim }],
    ['llama.attention.layer_norm_rms_epsilon', { t: 'f32', v: cfg.rms_norm_eps ?? 1e-5 }],
  ];
  // Synthetic vocabulary: <unk>, <s>, </s>, then byte tokens <0x00>..<0xFF> when they fit, then fillers.
  const tokens: string[] = [], types = new Int32Array(vocab), scores = new Float32Array(vocab);
  const special = ['<unk>', '<s>', '</s>'];
  for (let id = 0; id < vocab; id += 1) {
    let piece: string, type: number;
    if (id < 3) { piece = special[id]!; type = id === 0 ? TOKEN_UNKNOWN : TOKEN_CONTROL; }
    else if (id < 259 && vocab >= 259 + 8) { piece = `<0x${(id - 3).toString(16).toUpperCase().padStart(2, '0')}>`; type = TOKEN_BYTE; }
    else { piece = `\u2581t${id}`; type = TOKEN_NORMAL; }
    tokens.push(piece);
    types[id] = type;
    scores[id] = type === TOKEN_NORMAL ? -id : 0;
  }
  const eos = Array.isArray(cfg.eos_token_id) ? cfg.eos_token_id[0] : cfg.eos_token_id;
  meta.push(
    ['tokenizer.ggml.model', { t: 'str', v: 'llama' }],
    ['tokenizer.ggml.tokens', { t: 'strs', v: tokens }],
    ['tokenizer.ggml.scores', { t: 'f32s', v: scores }],
    ['tokenizer.ggml.token_type', { t: 'i32s', v: types }],
    ['tokenizer.ggml.unknown_token_id', { t: 'u32', v: 0 }],
    ['tokenizer.ggml.bos_token_id', { t: 'u32', v: cfg.bos_token_id ?? 1 }],
    ['tokenizer.ggml.eos_token_id', { t: 'u32', v: eos ?? 2 }],
    ['tokenizer.ggml.add_bos_token', { t: 'bool', v: false }],
    ['tokenizer.ggml.add_eos_token', { t: 'bool', v: false }],
  );

  // Header + tensor infos, with data offsets aligned to ALIGNMENT relative to the data section.
  const w = new ByteWriter();
  w.u32(GGUF_MAGIC);
  w.u32(GGUF_VERSION);
  w.u64(plan.length);
  w.u64(meta.length);
  for (const [k, v] of meta) writeMeta(w, k, v);
  let offset = 0;
  const offsets: number[] = [];
  for (const t of plan) {
    offset = Math.ceil(offset / ALIGNMENT) * ALIGNMENT;
    offsets.push(offset);
    w.str(t.name);
    w.u32(t.dims.length);
    for (const d of t.dims) w.u64(d);
    w.u32(t.type);
    w.u64(offset);
    offset += t.dims.reduce((a, b) => a * b, 1) * (t.type === GGML_F16 ? 2 : 4);
  }
  w.pad(ALIGNMENT);

  const fd = openSync(outPath, 'w');
  let written = 0;
  try {
    const head = w.result();
    writeSync(fd, head);
    written = head.length;
    const dataStart = written;
    for (let i = 0; i < plan.length; i += 1) {
      const t = plan[i]!;
      const want = dataStart + offsets[i]!;
      if (want > written) { writeSync(fd, Buffer.alloc(want - written)); written = want; }
      const data = t.data();
      let out: Buffer;
      if (t.type === GGML_F16) {
        out = Buffer.alloc(data.length * 2);
        for (let j = 0; j < data.length; j += 1) out.writeUInt16LE(floatToHalf(data[j]!), j * 2);
      } else {
        out = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
      }
      writeSync(fd, out);
      written += out.length;
    }
  } finally {
    closeSync(fd);
  }
  return { path: outPath, bytes: written, tensors: plan.length, fileType: f16 ? 'F16' : 'F32' };
}

// CLI
if (process.argv[1] && /gguf-export\.js$/.test(process.argv[1])) {
  const [dir, out] = process.argv.slice(2).filter((a) => !a.startsWith('--'));
  if (!dir || !out) {
    process.stderr.write('usage: node dist/bench/gguf-export.js <checkpoint-dir> <out.gguf> [--f16]\n');
    process.exit(2);
  }
  const r = exportGguf(dir, out, { f16: process.argv.includes('--f16') });
  process.stdout.write(`${r.path}: ${r.tensors} tensors, ${(r.bytes / 2 ** 20).toFixed(1)} MiB, ${r.fileType}\n`);
}
