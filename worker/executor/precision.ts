// Which precision a loaded model runs, in the words of the startup log and of trtllm_model_precision_info: its
// weights (the checkpoint's own quantization, --quantization fp8, or as stored) and its KV cache.
import type { ModelConfig } from '../binding/addon-types.js';

export interface Precision { weights: string; kvCache: string }

export function modelPrecision(config: ModelConfig, quantization: 'none' | 'fp8' | undefined): Precision {
  const weights = config.quantization !== '' ? config.quantization
    : quantization === 'fp8' ? 'fp8 (quantized at load, per-channel weight scales, dynamic per-token activations)'
      : 'as stored (16-bit)';
  return { weights, kvCache: config.kvCacheDtype };
}
