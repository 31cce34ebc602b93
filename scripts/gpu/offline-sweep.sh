#!/usr/bin/env bash
# Offline 1,000 x 128/128 on the Llama-3-8B shape (dummy weights) under several engine settings, one line each, with
# where each run's time went (cuda-bench's breakdown: iterations with prompt tokens, decode-only ones, time outside
# iterations). usage: OUT=dir scripts/gpu/offline-sweep.sh "fp8,fp8kv,512,8192" "bf16,auto,256,8192" ...
# Each run: weights (bf16 | fp8), KV dtype (auto | fp8kv), max batch, max tokens per iteration, and optionally one
# NAME=value for the engine's environment (e.g. TRTLLM_ATTN_DECODE_KERNEL=0: an A/B in one call).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpus.txt"
if ! { cmake -S native -B build-gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >"$out/configure.log" 2>&1 &&
       cmake --build build-gpu -j "$(nproc)" --target cuda-bench >"$out/build.log" 2>&1; }; then
  echo "BUILD FAILED"; tail -30 "$out/build.log"; exit 1
fi
for run in "$@"; do
  IFS=, read -r weights kv batch tokens env_set <<<"$run"
  args=(--max-batch "$batch" --max-num-tokens "$tokens")
  [[ $weights == fp8 ]] && args+=(--quantization fp8)
  [[ $kv == fp8kv ]] && args+=(--kv-cache-dtype fp8)
  log="$out/offline-$weights-$kv-$batch-$tokens${env_set:+-${env_set//[^A-Za-z0-9]/_}}.log"
  timeout 300 env ${env_set:-} build-gpu/cuda-bench bench/configs/llama-3-8b --dummy --batches "${BATCHES:-$batch}" --steps 10 \
    --requests "${REQUESTS:-1000}" "${args[@]}" >"$log" 2>&1 || echo "run $run failed: $(tail -3 "$log")"
  echo "== $run: $(grep -oE '= [0-9]+ output tokens/s' "$log") | $(grep -E '^offline breakdown' "$log")"
  grep -E "^\| [0-9]+ \|" "$log" | head -4
done
