// What a request that brings its LoRA adapter as binary tensors (KServe binary data or gRPC raw_input_contents) costs
// the JS thread before the addon sees it: lora_weights decoded, checked and handed over as a Float32Array, for the
// Llama-3-8B shape's adapter in TensorRT-LLM's layout (32 layers x 7 modules, one row each, padded to the widest:
// rank x (14,336 + 4,096) columns). Baselines in the same run: the element-by-element decode into a JS array this
// path used before (each element read, converted and checked on its own, then copied into a Float32Array), and a
// plain copy of the same bytes (the floor). The event loop serves nothing else meanwhile.
//   node dist/bench/lora-weights-decode.js [--rank 16] [--runs 3] [--datatype FP16|BF16|FP32]
import { Command } from 'commander';

import { decodeRaw } from '../worker/frontend/grpc/tensor-codec.js';
import { readKserveLora } from '../worker/frontend/kserve-lora.js';
import { checkTensor, type NamedValues } from '../worker/frontend/named-values.js';

const opts = new Command()
  .option('--rank <n>', 'the adapter rank', '16')
  .option('--runs <n>', 'runs of each path (the median is printed)', '3')
  .option('--datatype <t>', 'FP16, BF16 or FP32', 'FP16')
  .parse()
  .opts<{ rank: string; runs: string; datatype: string }>();
const rank = Number(opts.rank), runs = Number(opts.runs), datatype = opts.datatype;
const size = datatype === 'FP32' ? 4 : 2;
const layers = 32, modules = 7, rows = layers * modules, cols = rank * (14336 + 4096);
const n = rows * cols;

// Small finite values of the datatype, varied so no path can take a shortcut.
const raw = Buffer.alloc(n * size);
for (let i = 0; i < n; i += 1) {
  if (datatype === 'FP32') raw.writeFloatLE(((i % 2001) - 1000) / 4096, i * 4);
  else if (datatype === 'BF16') raw.writeUInt16LE(0x3c00 + (i & 0x3ff), i * 2);
  else raw.writeUInt16LE(0x2c00 ^ (i & 0x83ff), i * 2);
}
const config: number[] = [];
for (let r = 0; r < rows; r += 1) config.push(1 + (r % modules), Math.floor(r / modules), rank);
const configTensor = checkTensor('lora_config', 'INT32', [1, rows, 3], config);

function now(): number {
  return performance.now();
}

// Today's path: decode (typed), check, and the request's adapter as the addon receives it.
function typedPath(): Float32Array {
  const weights = checkTensor('lora_weights', datatype, [1, rows, cols], decodeRaw(datatype, raw, 'lora_weights', 'raw'));
  const values: NamedValues = new Map([['lora_weights', weights], ['lora_config', configTensor],
    ['lora_task_id', { shape: [1], data: [7] }]]);
  return readKserveLora(values, 1)[0]!.weights!;
}

// The path before: one JS number per element, each decoded and checked on its own, then copied into a Float32Array.
function elementPath(): Float32Array {
  const view = new DataView(new ArrayBuffer(4));
  const out: number[] = new Array<number>(n);
  for (let i = 0; i < n; i += 1) {
    if (datatype === 'FP32') {
      out[i] = raw.readFloatLE(i * 4);
    } else {
      const h = raw.readUInt16LE(i * 2);
      if (datatype === 'BF16') {
        view.setUint32(0, h << 16);
        out[i] = view.getFloat32(0);
      } else {
        const e = (h >> 10) & 0x1f, f = h & 0x3ff, sign = h & 0x8000 ? -1 : 1;
        out[i] = e === 0x1f ? (f ? NaN : sign * Infinity) : e === 0 ? sign * f * 2 ** -24 : sign * (1 + f / 1024) * 2 ** (e - 15);
      }
    }
  }
  if (out.findIndex((x) => !Number.isFinite(x)) >= 0) throw new Error('not finite');
  const weights = new Float32Array(n);
  for (let i = 0; i < n; i += 1) weights[i] = out[i]!;
  return weights;
}

function copyPath(): Buffer {
  return Buffer.from(raw);
}

function median(fn: () => unknown): number {
  const times: number[] = [];
  for (let r = 0; r < runs; r += 1) {
    const t0 = now();
    fn();
    times.push(now() - t0);
  }
  return times.sort((a, b) => a - b)[Math.floor(times.length / 2)]!;
}

const a = typedPath(), b = elementPath();
for (let i = 0; i < n; i += 1) if (!Object.is(a[i], b[i])) throw new Error(`the paths differ at element ${i}: ${a[i]} vs ${b[i]}`);
const typed = median(typedPath), element = median(elementPath), copy = median(copyPath);
console.log(`lora_weights ${datatype}, rank ${rank}: ${rows} x ${cols} = ${(n / 1e6).toFixed(1)}M elements (${(raw.length / 2 ** 20).toFixed(0)} MiB), median of ${runs}`);
console.log(`  typed decode + check + hand-over: ${typed.toFixed(0)} ms`);
console.log(`  baseline, element by element:     ${element.toFixed(0)} ms  (typed is ${(element / typed).toFixed(1)}x faster)`);
console.log(`  floor, a copy of the bytes:       ${copy.toFixed(0)} ms  (typed is ${(typed / copy).toFixed(1)}x the copy)`);
