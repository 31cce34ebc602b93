#!/usr/bin/env bash
# The GPU machine's one script (the device tool; see ../shared/device/README.md): builds native/ with the CUDA
# backend, checks it against transformers on the same GPU, and times it, writing full logs to $OUT (or ./gpu-out).
#   scripts/gpu/check.sh single   one GPU: cuda-attention, cuda-model and cuda-sampling tests, transformers comparison, decode / offline bench vs the
#                                 copy bandwidth and transformers' generate() on the Llama-3-8B shape
#   scripts/gpu/check.sh tp2      two GPUs: tp=2 and pp=2 against one GPU (dense, MoE (also with ep=2) and Gemma 2
#                                 shapes; the all-reduce paths against each other), then decode steps and offline
#                                 128/128 on the 8B shape before / after issue 30 and on one GPU (SKIP_PBENCH=1: not;
#                                 AR_SWEEP=1: the all-reduce paths from 16 KiB to 32 MiB, AR_SWEEP_BLOCKS=16,32,64:
#                                 with each peer grid; SKIP_PCHECK=1: only the benches); MOE_BENCH=<config>:
#                                 that MoE shape at tp=2 with ep=1 and ep=2 (decode steps, offline 128/128)
#   scripts/gpu/check.sh tp4      four GPUs: tp=4 and tp=2 x pp=2 against one GPU, then the benches as tp2's on those
#                                 grids (BENCH_GRIDS="4 1,2 1,1 1": the benches' grids instead)
#   scripts/gpu/check.sh x2       both of the above on a two-GPU machine (single-GPU parts on GPU 0), then the
#                                 addon (node-api headers from node_modules, no cmake-js) and `trtllm-launch bench
#                                 --offline` on the 8B shape (needs node on PATH, node_modules and dist/)
#   scripts/gpu/check.sh fp8      one GPU: the cuda-fp8 test (FP8 GEMV / cuBLASLt GEMM against references, tiny-llama
#                                 quantized per channel against the CPU model), then the 8B-shape bench in bf16 and
#                                 with --quantization fp8 (decode steps vs the copy bandwidth, offline 128/128)
#   scripts/gpu/check.sh kvfp8    one GPU: --kv-cache-dtype fp8: cuda-attention (e4m3 pools among its cases), cuda-model
#                                 (dummy shapes with fp8 KV against the CPU model's fp8 KV), the bundled model's
#                                 perplexity / top-1 agreement with fp8 KV against bf16 KV, then the 8B shape with bf16
#                                 and fp8 KV: the pool's tokens, offline 128/128, and a KV-bound load (LONG_REQUESTS x
#                                 1024/1024, max batch 512; SKIP_LONG=1: not) — SKIP_TESTS=1 / SKIP_BENCH=1 skip halves
#   scripts/gpu/check.sh moe      one GPU: cuda-model (the MoE fixtures against transformers, dummy MoE shapes against the
#                                 CPU model), then the Qwen3-30B-A3B shape (dummy bf16): decode steps against the bytes a
#                                 step reads (the chosen experts only) and offline 128/128 (HF=1: transformers' generate()
#                                 on the same shape after it); MOE_CONFIG=bench/configs/mixtral-8x7b for Mixtral (93 GB:
#                                 an H200)
#   scripts/gpu/check.sh window     one GPU: makes the sliding-window / Gemma 2 / longrope fixtures
#                                 (scripts/fixtures/make_window_fixtures.py, into test/fixtures/models, tarred to
#                                 $OUT/window-fixtures.tgz) while it builds, then cuda-attention and cuda-model
#   scripts/gpu/check.sh serve    two or four GPUs, through `trtllm-launch` (needs node on PATH, node_modules and dist/):
#                                 the bundled model at tp 1, tp 2 and pp 2; with four GPUs tiny-llama at tp 1, tp 4 and
#                                 tp 2 x pp 2 pipelined and not; each a rate-limited bench, then 24 greedy completions
#                                 compared with one GPU's token for token (scripts/gpu/served-greedy.js)
#   scripts/gpu/check.sh kill4    four GPUs: `trtllm-launch --world-size 4 --tp 4` under load, kill -9 of one rank
#   scripts/gpu/check.sh dpcpu    the machine's CPUs (any kind): the CPU addon and bench/data-parallel.js (--dp 2 against
#                                 one rank and two independent servers; the routers on a multi-turn trace); DP_ARGS: its flags
#   scripts/gpu/check.sh guided     one GPU: cuda-sampling (guide masks among its cases) and the addon; offline 128/128
#                                 on the 8B shape (dummy weights), max batch 64, unconstrained against every request
#                                 constrained to a JSON Schema (GUIDED_SCHEMAS, default the todo-list and weather
#                                 fixtures; each output checked against it) over a synthesized 128,256-id vocabulary,
#                                 against unconstrained runs of the same output lengths (bench/guided-throughput.ts);
#                                 BENCH_OFFLINE=1: also `bench --offline` against full-length unconstrained requests
#   scripts/gpu/check.sh speculative  one GPU: cuda-sampling, then on the Llama-3-8B shape (dummy weights) a
#                                 speculative step's check for K = VERIFY (default 1,2,3,4,6,8) guesses against one decode
#                                 step at batch 1 and 64, and offline 128/128 at max batch 64 without and with prompt
#                                 lookup (its cost under load); then the addon and bench/speculative-ngram.js on the
#                                 bundled model on the GPU (prompt lookup, and its first 2 layers as a draft model)
#   scripts/gpu/check.sh medusa   one GPU: cuda-medusa (token trees and Medusa heads against the CPU model, the executor
#                                 with heads = its plain greedy output), cuda-attention and cuda-model (nothing else
#                                 moved), then on the Llama-3-8B shape (dummy weights) a Medusa step at batch 1 with
#                                 MEDUSA (default 3) heads for trees of TREES (default 4,8,16,32,64) tokens against one
#                                 decode step (the bundled model with its trained heads is among cuda-medusa's checks)
#   scripts/gpu/check.sh lora     one GPU: cuda-lora (multi-LoRA batches against the CPU model), then on the Llama-3-8B
#                                 shape (dummy weights) decode steps at batch 1 and 64 (BATCHES) and offline 128/128 at
#                                 max batch 64 (REQUESTS, default 640), with --lora 0 and with --lora 8,16 (8 adapters of
#                                 rank LORA_RANK on all 7 modules, rows round-robin): each with its base figures measured
#                                 in the same run, the summary gives the throughput ratios
# Prints a short summary last. Expects CUDA_HOME / NCCL_ROOT (the device prelude exports them).
set -uo pipefail
mode=${1:-single}
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
summary=()
note() { summary+=("$1"); echo "== $1"; }
jobs=$(nproc)
export PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpus.txt"
(cat COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null) | tee "$out/commit.txt"

gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
if [[ $mode == dpcpu ]]; then
  # The machine's CPUs, not its GPU: the addon without CUDA, then bench/data-parallel.js (needs node on PATH,
  # node_modules and dist/ with dist/bench and dist/test/helpers). The bundled model's weights may have been left
  # behind to fit the device tool's tree limit: then its shape with random weights (speed does not depend on them).
  m=examples/models/brown-llama-17m
  [[ -f $m/model.safetensors ]] || python3 -c "
import torch, transformers
c = transformers.AutoConfig.from_pretrained('$m')
torch.manual_seed(0)
transformers.AutoModelForCausalLM.from_config(c, dtype=torch.float32).save_pretrained('/tmp/random-brown')
" >"$out/random-weights.log" 2>&1 && cp /tmp/random-brown/model.safetensors $m/ && note "random weights for $m"
  if cmake -S native -B build-cpu "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DENGINE_CUDA=OFF -DENGINE_TESTS=OFF -DCMAKE_JS_VERSION=8 \
       -DCMAKE_JS_INC="$PWD/node_modules/node-api-headers/include" >"$out/configure.log" 2>&1 &&
     cmake --build build-cpu -j "$jobs" --target trtllm_native >"$out/build.log" 2>&1; then
    mkdir -p build/native/Release && cp build-cpu/trtllm_native.node build/native/Release/
  else
    note "ADDON BUILD FAILED"; tail -20 "$out/build.log"; exit 1
  fi
  note "$(nproc) cores: $(lscpu | grep 'Model name' | sed 's/ \+/ /g')"
  node dist/bench/data-parallel.js ${DP_ARGS:-} 2>"$out/data-parallel.err" | tee "$out/data-parallel.log"
  note "data-parallel: $(grep -E '^dp2 / dp1' "$out/data-parallel.log") $(grep -E '^later-turn TTFT p50' "$out/data-parallel.log")"
  printf '\n%s\n' "--- summary ($mode)"; printf '%s\n' "${summary[@]}"
  exit 0
fi
targets=(); [[ $mode == fp8 ]] && targets=(--target cuda-fp8 cuda-bench)  # what the mode runs, nothing else
[[ $mode == moe ]] && targets=(--target cuda-moe cuda-model cuda-bench)
[[ $mode == window ]] && targets=(--target cuda-attention cuda-model)
[[ $mode == kvfp8 ]] && targets=(--target cuda-attention cuda-model cuda-bench quantization-quality)
if [[ $mode == window ]]; then
  python3 scripts/fixtures/make_window_fixtures.py --models test/fixtures/models >"$out/fixtures.log" 2>&1 &
  fixtures_pid=$!
fi
[[ $mode == tp2 || $mode == tp4 ]] && targets=(--target cuda-parallel)
[[ $mode == guided ]] && targets=(--target engine cuda-sampling)  # the addon is built below
[[ $mode == speculative ]] && targets=(--target engine cuda-sampling cuda-bench)
[[ $mode == lora ]] && targets=(--target cuda-lora cuda-bench)
[[ $mode == medusa ]] && targets=(--target engine cuda-medusa cuda-attention cuda-model cuda-bench)
t0=$(date +%s)
if cmake -S native -B build-gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >"$out/configure.log" 2>&1 &&
   cmake --build build-gpu -j "$jobs" "${targets[@]}" >"$out/build.log" 2>&1; then
  note "build ok in $(( $(date +%s) - t0 )) s: $(grep -o 'engine: CUDA backend[^$]*' "$out/configure.log" | head -1)"
else
  note "BUILD FAILED (configure.log / build.log)"; tail -30 "$out/build.log" "$out/configure.log"; printf '%s\n' "${summary[@]}"; exit 1
fi

if [[ $mode == window ]]; then
  if wait "$fixtures_pid"; then note "window fixtures: $(tail -1 "$out/fixtures.log")"; else note "WINDOW FIXTURES FAILED"; tail -30 "$out/fixtures.log"; fi
  (cd test/fixtures/models && tar czf "$out/window-fixtures.tgz" tiny-mistral-window tiny-qwen2-window tiny-gemma2 tiny-phi3-longrope 2>/dev/null)
  for t in cuda-attention cuda-model; do
    if timeout 200 build-gpu/$t "$PWD" >"$out/$t.log" 2>&1; then note "$t: $(tail -1 "$out/$t.log")"
    else note "$t FAILED: $(tail -1 "$out/$t.log")"; grep -i "fail\|error" "$out/$t.log" | head -30; fi
  done
  grep -E "rel err|greedy" "$out/cuda-model.log" | head -40
fi
if [[ $mode == x2 || $mode == serve || $mode == offline512 || $mode == kill4 || $mode == guided || $mode == speculative ]]; then
  # The addon, built by plain CMake with the node-api headers cmake-js would pass.
  if cmake -S native -B build-gpu -DCMAKE_JS_VERSION=8 -DCMAKE_JS_INC="$PWD/node_modules/node-api-headers/include" \
       >>"$out/configure.log" 2>&1 && cmake --build build-gpu -j "$jobs" --target trtllm_native >>"$out/build.log" 2>&1; then
    mkdir -p build/native/Release && cp build-gpu/trtllm_native.node build/native/Release/
    note "addon ok: $(node -e "const a=require('./build/native/Release/trtllm_native.node'); const b=a.buildInfo(); console.log(b.backends.join(','), b.cudaDevices, 'GPU(s)')")"
  else
    note "ADDON BUILD FAILED"; tail -20 "$out/build.log"
  fi
fi
if [[ $mode == single || $mode == x2 ]]; then
  if timeout 150 build-gpu/cuda-attention "$PWD" >"$out/cuda-attention.log" 2>&1; then
    note "cuda-attention (kernels vs float64): $(tail -1 "$out/cuda-attention.log")"
  else
    note "cuda-attention FAILED: $(tail -1 "$out/cuda-attention.log")"; grep -i "fail" "$out/cuda-attention.log" | head -20
  fi
  mkdir -p /tmp/dump
  if CUDA_MODEL_DUMP=/tmp/dump timeout 150 build-gpu/cuda-model "$PWD" >"$out/cuda-model.log" 2>&1; then
    note "cuda-model: $(tail -1 "$out/cuda-model.log")"
  else
    note "cuda-model FAILED: $(tail -1 "$out/cuda-model.log")"; grep -i "fail\|error" "$out/cuda-model.log" | head -20
  fi
  grep -E "rel err|greedy|executor" "$out/cuda-model.log" | head -40
  if timeout 150 build-gpu/cuda-sampling "$PWD" >"$out/cuda-sampling.log" 2>&1; then
    note "cuda-sampling (GPU sampling = host sampler): $(tail -1 "$out/cuda-sampling.log")"
  else
    note "cuda-sampling FAILED: $(tail -1 "$out/cuda-sampling.log")"; grep -i "fail" "$out/cuda-sampling.log" | head -20
  fi
  grep -E "draws equal" "$out/cuda-sampling.log"
  if timeout 300 python3 scripts/gpu/hf_compare.py "$PWD" /tmp/dump >"$out/hf-compare.log" 2>&1; then
    note "transformers comparison: $(tail -1 "$out/hf-compare.log")"
  else
    note "transformers comparison FAILED: $(tail -1 "$out/hf-compare.log")"
  fi
  cat "$out/hf-compare.log" | tail -14
  timeout 300 build-gpu/cuda-bench bench/configs/llama-3-8b --dummy --batches ${BATCHES:-1,8,64,256} \
    --requests ${REQUESTS:-1000} --json "$out/bench.json" 2>&1 | tee "$out/bench.log" | tail -14
  note "bench: $(grep -E '^offline' "$out/bench.log" | head -1)"
  [[ ${SKIP_HF:-0} == 1 ]] || timeout 300 python3 bench/hf-generate.py bench/configs/llama-3-8b --batches ${HF_BATCHES:-1,64,256} \
    >"$out/hf-generate.log" 2>&1
  note "transformers: $(tail -1 "$out/hf-generate.log")"
  grep "generate()" "$out/hf-generate.log"
fi
if [[ $mode == x2 ]]; then
  # Figure 2 through the launcher: the executor in the bench's process, on GPU 0, the 8B shape with dummy weights.
  if [[ -f build/native/Release/trtllm_native.node ]]; then
    timeout 240 node bin/trtllm-launch.js bench token-norm-dist --offline --device cuda --load-format dummy \
      --model bench/configs/llama-3-8b --num-requests ${REQUESTS:-1000} --input-mean 128 --output-mean 128 \
      --max-batch-size 256 --warmup-requests 8 --vocab-size 128256 --no-progress >"$out/bench-offline.log" 2>&1
    note "bench --offline: $(grep -E 'OP tokens/sec|failed requests' "$out/bench-offline.log" | tr '\n' ' ')"
    tail -25 "$out/bench-offline.log"
  fi
fi
if [[ $mode == offline512 ]]; then
  # Offline throughput with room for 512 sequences per iteration (the 128/128 traffic of figure 2).
  timeout 200 build-gpu/cuda-bench bench/configs/llama-3-8b --dummy --batches 512 --requests ${REQUESTS:-1000} \
    --max-batch 512 --json "$out/bench-512.json" >"$out/bench-512.log" 2>&1
  grep -E "^\| 512|^offline" "$out/bench-512.log"
  timeout 200 node bin/trtllm-launch.js bench token-norm-dist --offline --device cuda --load-format dummy \
    --model bench/configs/llama-3-8b --num-requests ${REQUESTS:-1000} --input-mean 128 --output-mean 128 \
    --max-batch-size 512 --warmup-requests 8 --no-progress >"$out/bench-offline-512.log" 2>&1
  note "bench --offline, max batch 512: $(grep -E 'OP tokens/sec|failed requests' "$out/bench-offline-512.log" | tr '\n' ' ')"
fi
if [[ $mode == guided ]]; then
  # The device sampler under guide masks against the host sampler, then the throughput: each guided run's outputs
  # are decoded and checked against the schema by the bench itself ("Guided outputs valid ...").
  if timeout 200 build-gpu/cuda-sampling "$PWD" >"$out/cuda-sampling.log" 2>&1; then note "cuda-sampling: $(tail -1 "$out/cuda-sampling.log")"
  else note "cuda-sampling FAILED: $(tail -1 "$out/cuda-sampling.log")"; grep -i "fail\|error" "$out/cuda-sampling.log" | head -20; fi
  grep "guided" "$out/cuda-sampling.log" | head -6
  node dist/bench/grammar-mask.js --write-vocab "$out/vocab.bin"
  schemas=${GUIDED_SCHEMAS:-test/fixtures/json-schemas/09-todo-list.json test/fixtures/json-schemas/07-weather-tool-args.json}
  for schema in $schemas; do  # guided against unconstrained runs of the same output lengths (bench/guided-throughput.ts)
    name=$(basename "$schema" .json)
    timeout ${RUN_TIMEOUT:-240} node dist/bench/guided-throughput.js --model bench/configs/llama-3-8b --load-format dummy \
      --device cuda --vocab "$out/vocab.bin" --schema "$schema" --requests ${REQUESTS:-640} >"$out/guided-throughput-$name.log" 2>&1
    note "guided-throughput ($name): $(grep -E '^round|^\| [0-9]' "$out/guided-throughput-$name.log" | tr '\n' ' ')"
  done
  [[ ${BENCH_OFFLINE:-0} == 1 ]] || schemas=""  # bench --offline: guided against unconstrained full-length requests
  for schema in $schemas; do
    name=$(basename "$schema" .json)
    for run in plain guided plain guided; do
      extra=(); [[ $run == guided ]] && extra=(--guided-json-schema "$schema")
      log="$out/bench-$name-$run.log"; [[ $run == plain ]] && log="$out/bench-plain.log"
      timeout ${RUN_TIMEOUT:-240} node bin/trtllm-launch.js bench token-norm-dist --offline --device cuda --load-format dummy \
        --model bench/configs/llama-3-8b --num-requests ${REQUESTS:-640} --input-mean 128 --output-mean 128 \
        --max-batch-size 64 --warmup-requests 8 --no-progress --guided-vocab "$out/vocab.bin" "${extra[@]}" \
        >>"$log" 2>&1
      note "offline 128/128, max batch 64, $run ($name): $(grep -E 'OP tokens/sec|OP tokens per request|TPOT|failed requests|Guided outputs' "$log" | tail -5 | tr -s ' ' | tr '\n' ' ')"
    done
  done
fi
if [[ $mode == speculative ]]; then
  if timeout 200 build-gpu/cuda-sampling "$PWD" >"$out/cuda-sampling.log" 2>&1; then note "cuda-sampling: $(tail -1 "$out/cuda-sampling.log")"
  else note "cuda-sampling FAILED: $(tail -1 "$out/cuda-sampling.log")"; grep -i "fail\|error" "$out/cuda-sampling.log" | head -20; fi
  timeout 200 build-gpu/cuda-bench bench/configs/llama-3-8b --dummy --batches ${BATCHES:-1,16,32,64} --steps 20 --requests 0 \
    --verify ${VERIFY:-1,2,3,4,6,8} >"$out/verify.log" 2>&1
  grep -E "^\| ([0-9]+|batch) \|" "$out/verify.log"
  note "verify: $(grep -cE '^\| [0-9]+ \| [0-9]+ \| ' "$out/verify.log") rows (verify.log)"
  offline_runs="0 ${NGRAM:-4} 0 ${NGRAM:-4}"; [[ ${SKIP_OFFLINE:-0} == 1 ]] && offline_runs=""
  for k in $offline_runs; do  # the cost under load, twice: random prompts, dummy weights (few guesses hold)
    timeout 200 build-gpu/cuda-bench bench/configs/llama-3-8b --dummy --batches 64 --steps 5 --requests ${REQUESTS:-1000} \
      --max-batch 64 --ngram $k >"$out/offline-ngram.log" 2>&1
    note "offline 128/128, max batch 64, --ngram $k: $(grep -E '^offline|^prompt lookup' "$out/offline-ngram.log" | tr '\n' ' ')"
  done
  timeout ${RUN_TIMEOUT:-240} node dist/bench/speculative-ngram.js --device cuda --threads 8 --drafts 2,4,8 --layer-draft 2 \
    --draft-tokens 2,4 >"$out/speculative-bundled.log" 2>&1
  tail -24 "$out/speculative-bundled.log"
  note "bundled model on the GPU: $(grep -cE 'yes \|$' "$out/speculative-bundled.log") rows with outputs equal, $(grep -cE 'NO \|$' "$out/speculative-bundled.log") not"
  # Sampled requests: every checked row drawn by the device sampler (step, step + 1, ...), as the plain steps are.
  timeout ${RUN_TIMEOUT:-240} node dist/bench/speculative-ngram.js --device cuda --threads 8 --drafts 4 --sampled \
    >"$out/speculative-sampled.log" 2>&1
  tail -12 "$out/speculative-sampled.log"
  note "bundled model on the GPU, sampled: $(grep -cE 'yes \|$' "$out/speculative-sampled.log") rows with outputs equal, $(grep -cE 'NO \|$' "$out/speculative-sampled.log") not"
fi
if [[ $mode == medusa ]]; then
  for t in cuda-medusa cuda-attention cuda-model; do
    if timeout 300 build-gpu/$t "$PWD" >"$out/$t.log" 2>&1; then note "$t: $(tail -1 "$out/$t.log")"
    else note "$t FAILED: $(tail -1 "$out/$t.log")"; grep -iE "fail|error" "$out/$t.log" | head -30; fi
  done
  grep -E "rel err|top-k|heads|executor" "$out/cuda-medusa.log" | head -40
  timeout 300 build-gpu/cuda-bench bench/configs/llama-3-8b --dummy --batches 1 --steps 60 --requests 0 \
    --medusa ${MEDUSA:-3} --trees ${TREES:-4,8,16,32,64} >"$out/medusa-bench.log" 2>&1
  grep -E "^\| |Medusa heads|batch-1 roofline" "$out/medusa-bench.log"
  note "medusa bench: $(grep -cE '^\| [0-9]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+x' "$out/medusa-bench.log") tree rows (medusa-bench.log)"
fi
if [[ $mode == lora ]]; then
  if timeout 300 build-gpu/cuda-lora "$PWD" >"$out/cuda-lora.log" 2>&1; then note "cuda-lora: $(tail -1 "$out/cuda-lora.log")"
  else note "cuda-lora FAILED: $(tail -1 "$out/cuda-lora.log")"; grep -iE "fail|error|  .*: row [0-9]+ " "$out/cuda-lora.log" | head -40; fi
  grep -E "rel err|bitwise|moved|fp8" "$out/cuda-lora.log" | head -60
  for larg in 0 8,${LORA_RANK:-16}; do
    tag=${larg//,/x}
    timeout 420 build-gpu/cuda-bench bench/configs/llama-3-8b --dummy --batches ${BATCHES:-1,64} --steps ${STEPS:-30} \
      --requests ${REQUESTS:-640} --max-batch 64 --lora "$larg" --json "$out/bench-lora-$tag.json" 2>&1 |
      tee "$out/bench-lora-$tag.log" | grep -vE "^\|---" | tail -22
    note "bench --lora $larg: decode $(grep -E '^\| [0-9]+ \| [0-9.]+ \| [0-9]+ \|' "$out/bench-lora-$tag.log" | cut -d'|' -f2,3 | tr -s ' ' | tr '\n' ' ')$(grep -oE '= [0-9]+ output tokens/s' "$out/bench-lora-$tag.log" | head -1)"
    while read -r line; do note "$line"; done < <(grep -E "^lora (decode|offline)" "$out/bench-lora-$tag.log")
  done
fi
if [[ $mode == serve ]]; then
  # Served through the HTTP frontend on the GPU: the bundled checkpoint (a real model with a tokenizer) at a fixed
  # request rate, one rank on GPU 0, then tp = 2 over both GPUs (launch -> ready timed by the launcher).
  model=${SERVE_MODEL:-examples/models/brown-llama-17m}
  serve_bench() {  # <label> <launcher args...>
    local label=$1; shift
    node bin/trtllm-launch.js --model "$model" --host 127.0.0.1 --http-port 18000 --metrics-port 18002 --device cuda \
      "$@" >"$out/serve-$label.log" 2>&1 &
    local pid=$!
    for _ in $(seq 1 240); do grep -q "ready:\|ready after" "$out/serve-$label.log" && break; sleep 0.5; done
    note "serve $label: $(grep -m1 -o 'ready after [0-9.]* s' "$out/serve-$label.log") $(grep -m1 -o 'loaded .* in [0-9.]* s' "$out/serve-$label.log")"
    timeout 120 node bin/trtllm-launch.js bench token-norm-dist -u 127.0.0.1:18000 --num-requests ${SERVED_REQUESTS:-300} \
      --request-rate ${RATE:-20} --input-mean 128 --output-mean 64 --warmup-requests 4 --no-progress \
      >"$out/served-$label.log" 2>&1
    grep -A8 "Latency (ms)" "$out/served-$label.log"; grep -E "OP tokens/sec|failed requests" "$out/served-$label.log"
    curl -s 127.0.0.1:18002/metrics 2>/dev/null | grep -m3 "memory_type=\"gpu\"" || true
    timeout 60 node scripts/gpu/served-greedy.js capture 18000 "$out/greedy-$label.json"
    grep -m1 -o "pipeline parallelism: .*" "$out/serve-$label.log" || true
    kill -INT $pid; wait $pid
  }
  serve_bench tp1 --world-size 1
  serve_bench tp2 --world-size 2 --tp 2
  serve_bench pp2 --world-size 2 --pp 2
  greedy=(tp2 pp2)
  if (( $(nvidia-smi -L | wc -l) >= 4 )); then
    # tp = 4 splits tiny-llama's 4 heads (the bundled model has 6); tp = 2 x pp = 2 pipelined and not.
    model=test/fixtures/models/tiny-llama
    serve_bench tiny-tp1 --world-size 1
    serve_bench tp4 --world-size 4 --tp 4
    serve_bench tp2pp2 --world-size 4 --tp 2 --pp 2
    serve_bench tp2pp2-mb1 --world-size 4 --tp 2 --pp 2 --pp-micro-batches 1
    greedy+=(tp4 tp2pp2 tp2pp2-mb1)
  fi
  # Each layout's greedy completions against one GPU's (and pipelined against the same grid unpipelined).
  for label in "${greedy[@]}"; do
    ref=tp1; [[ $label == tp4 || $label == tp2pp2* ]] && ref=tiny-tp1
    note "$(node scripts/gpu/served-greedy.js compare "$out/greedy-$ref.json" "$out/greedy-$label.json")"
  done
  [[ -f $out/greedy-tp2pp2.json ]] &&
    note "$(node scripts/gpu/served-greedy.js compare "$out/greedy-tp2pp2-mb1.json" "$out/greedy-tp2pp2.json")"
fi
if [[ $mode == tp2 || $mode == x2 || $mode == tp4 ]]; then
  np=2; grids=("2 1" "1 2")
  [[ $mode == tp4 ]] && { np=4; grids=("4 1" "2 2"); }
  mpi=(mpirun -np $np --allow-run-as-root -x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH)
  checks=("${grids[@]}"); [[ ${SKIP_PCHECK:-0} == 1 ]] && checks=()  # SKIP_PCHECK=1: the benches alone
  for grid in "${checks[@]}"; do
    set -- $grid
    timeout 300 "${mpi[@]}" build-gpu/cuda-parallel "$PWD" $1 $2 >"$out/parallel-tp$1-pp$2.log" 2>&1
    rc=$?
    if [[ $rc -eq 0 ]]; then
      note "tp=$1 pp=$2 vs one GPU: $(tail -1 "$out/parallel-tp$1-pp$2.log")"
    elif [[ $rc -eq 77 ]]; then
      note "tp=$1 pp=$2 SKIPPED: $(grep -m1 SKIP "$out/parallel-tp$1-pp$2.log")"
    else
      note "tp=$1 pp=$2 FAILED: $(tail -3 "$out/parallel-tp$1-pp$2.log" | tr '\n' ' ')"
    fi
    grep -iE "rel err|all-reduce|fail" "$out/parallel-tp$1-pp$2.log"
  done
  # MOE_BENCH=<config dir>: that mixture-of-experts shape at tp = all GPUs, each expert's columns split (ep 1) and
  # whole experts per GPU (ep = tp): decode steps, then offline 128/128 in leader mode.
  if [[ -n ${MOE_BENCH:-} ]]; then
    for ep in 1 $np; do
      timeout 300 "${mpi[@]}" build-gpu/cuda-parallel "$PWD" $np 1 --bench "$MOE_BENCH" --offline ${REQUESTS:-1000} \
        --ep $ep >"$out/moe-tp$np-ep$ep.log" 2>&1
      note "$(basename "$MOE_BENCH") tp=$np ep=$ep: $(grep -E '^bench|^offline' "$out/moe-tp$np-ep$ep.log" | tr '\n' ' ')"
    done
  fi
  # The 8B shape on each grid: decode steps with each all-reduce path's time, then offline 128/128 in leader mode,
  # as before issue 30 (NCCL, no graphs), NCCL inside graphs, and the default (graphs, the peer all-reduce by
  # size; AR_SWEEP=1 there: the paths from 16 KiB to 32 MiB), and with the sums skipped (TRTLLM_ALL_REDUCE=skip:
  # what the all-reduces cost the step); pp grids at tp = 1 without the NCCL-in-graphs and skip runs (no all-reduce
  # to compare); every pp grid also with the stages one after the other (unpipelined: --micro-batches 1); then one GPU
  # alone, also with a max batch of 512 (what a pipelined pp = 2 run keeps in flight at 256 per micro-batch)
  # (SKIP_PBENCH=1: the correctness grids only).
  [[ ${SKIP_PBENCH:-0} == 1 ]] && grids=()
  (( ${#grids[@]} )) && grids+=("1 1")
  [[ -n ${BENCH_GRIDS:-} ]] && IFS=, read -ra grids <<<"$BENCH_GRIDS"  # e.g. BENCH_GRIDS="4 1,2 1,1 1"
  for grid in "${grids[@]}"; do
    set -- $grid
    variants=("before TRTLLM_CUDA_GRAPHS=0 TRTLLM_ALL_REDUCE=nccl" "nccl-graphs TRTLLM_ALL_REDUCE=nccl" "after TRTLLM_ALL_REDUCE=auto"
              "no-all-reduce TRTLLM_ALL_REDUCE=skip")
    (( $1 == 1 )) && variants=("before TRTLLM_CUDA_GRAPHS=0 TRTLLM_ALL_REDUCE=nccl" "after TRTLLM_ALL_REDUCE=auto"
                              "unpipelined TRTLLM_ALL_REDUCE=auto")
    (( $1 > 1 && $2 > 1 )) && variants+=("unpipelined TRTLLM_ALL_REDUCE=auto")
    (( $1 == 1 && $2 == 1 )) && variants=("after TRTLLM_ALL_REDUCE=auto" "max512 TRTLLM_ALL_REDUCE=auto")
    # VARIANTS="b64 TRTLLM_PEER_BLOCKS=64;b128 TRTLLM_PEER_BLOCKS=128": these on the multi-GPU grids instead
    [[ -n ${VARIANTS:-} ]] && (( $1 * $2 > 1 )) && IFS=';' read -ra variants <<<"$VARIANTS"
    for v in "${variants[@]}"; do
      set -- $grid $v
      name=$3; xs=(); for e in "${@:4}"; do xs+=(-x "$e"); done
      [[ $name == after && -n ${AR_SWEEP:-} ]] && xs+=(-x AR_SWEEP=1)
      [[ $name == after && -n ${AR_SWEEP_BLOCKS:-} ]] && xs+=(-x AR_SWEEP_BLOCKS)  # (16,32,64: grids to sweep)
      log="$out/bench-tp$1-pp$2-$name.log"
      offline=(--offline ${REQUESTS:-1000}); [[ $name == no-all-reduce ]] && offline=()  # (its outputs are wrong)
      [[ $name == unpipelined ]] && offline+=(--micro-batches 1)
      [[ $name == max512 ]] && offline+=(--max-batch 512)
      timeout 420 mpirun -np $(( $1 * $2 )) --allow-run-as-root -x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH "${xs[@]}" \
        build-gpu/cuda-parallel "$PWD" $1 $2 --bench bench/configs/llama-3-8b "${offline[@]}" >"$log" 2>&1
      note "tp=$1 pp=$2 8B $name: $(grep -E '^bench|^offline' "$log" | sed -E 's/[0-9.]+ GB of weights per rank, load [0-9.]+ s, //' | tr '\n' ' ')"
      grep "^all-reduce sweep" "$log"
    done
  done
fi
if [[ $mode == fp8 ]]; then
  if timeout 200 build-gpu/cuda-fp8 "$PWD" >"$out/cuda-fp8.log" 2>&1; then
    note "cuda-fp8: $(tail -1 "$out/cuda-fp8.log")"
  else
    note "cuda-fp8 FAILED: $(tail -1 "$out/cuda-fp8.log")"; grep -i "fail\|error" "$out/cuda-fp8.log" | head -20
  fi
  grep -E "rel err|tiny-llama|greedy|quantization kernel|widened" "$out/cuda-fp8.log" | head -60
  # bf16 and FP8 weights of the 8B shape in the same run, each next to the copy bandwidth measured with it.
  for q in bf16 fp8; do
    qarg=(); [[ $q == fp8 ]] && qarg=(--quantization fp8)
    timeout 240 build-gpu/cuda-bench bench/configs/llama-3-8b --dummy --batches ${BATCHES:-1,64,256} \
      --requests ${REQUESTS:-1000} --max-batch ${MAX_BATCH:-256} "${qarg[@]}" --json "$out/bench-$q.json" 2>&1 |
      tee "$out/bench-$q.log" | grep -vE "^\|---" | tail -12
    note "bench $q: $(grep -E '^loaded' "$out/bench-$q.log" | grep -oE '[0-9.]+ GB read per decode step') $(grep -E '^\| 1 \|' "$out/bench-$q.log" | head -1) $(grep -oE '= [0-9]+ output tokens/s' "$out/bench-$q.log")"
  done
fi
if [[ $mode == kvfp8 ]]; then
  if [[ ${SKIP_TESTS:-0} != 1 ]]; then
    for t in cuda-attention cuda-model; do
      if timeout 240 build-gpu/$t "$PWD" >"$out/$t.log" 2>&1; then note "$t: $(tail -1 "$out/$t.log")"
      else note "$t FAILED: $(tail -1 "$out/$t.log")"; grep -i "fail\|error" "$out/$t.log" | head -20; fi
    done
    grep -E "fp8-kv" "$out/cuda-attention.log" | awk '{print $NF}' | sort -g | tail -1 | sed 's/^/largest fp8-kv attention rel err: /'
    grep -E "^fp8-kv" "$out/cuda-model.log" | head -40
    timeout 200 build-gpu/quantization-quality examples/models/brown-llama-17m test/fixtures/quality/brown-heldout-ids.json \
      --device cuda --base-device cuda --quantization "" --kv-cache-dtype fp8 --windows 170 >"$out/quality-kv.log" 2>&1
    note "fp8 KV vs bf16 KV (bundled model, GPU): $(tail -1 "$out/quality-kv.log")"
  fi
  if [[ ${SKIP_BENCH:-0} != 1 ]]; then
    for kv in auto fp8; do
      timeout 240 build-gpu/cuda-bench bench/configs/llama-3-8b --dummy --batches ${BATCHES:-1,64,256} --ctx ${CTX:-1024} \
        --requests ${REQUESTS:-1000} --max-batch 256 --kv-cache-dtype $kv --json "$out/bench-kv-$kv.json" 2>&1 |
        tee "$out/bench-kv-$kv.log" | grep -vE "^\|---" | tail -14
      note "bench kv $kv: $(grep -E '^KV pool' "$out/bench-kv-$kv.log") $(grep -E '^\| (1|64|256) \|' "$out/bench-kv-$kv.log" | cut -d'|' -f2,3 | tr '\n' ' ') $(grep -oE '= [0-9]+ output tokens/s' "$out/bench-kv-$kv.log")"
    done
  fi
  if [[ ${SKIP_LONG:-0} != 1 ]]; then
    for kv in auto fp8; do
      timeout 280 build-gpu/cuda-bench bench/configs/llama-3-8b --dummy --batches 1 --steps 5 --requests ${LONG_REQUESTS:-1000} \
        --input 1024 --output 1024 --max-batch 512 --kv-cache-dtype $kv --json "$out/bench-long-$kv.json" 2>&1 |
        tee "$out/bench-long-$kv.log" | grep -E "^KV pool|^offline"
      note "KV-bound ${LONG_REQUESTS:-1000} x 1024/1024, kv $kv: $(grep -E '^KV pool' "$out/bench-long-$kv.log") $(grep -oE '= [0-9]+ output tokens/s' "$out/bench-long-$kv.log")"
    done
  fi
fi
if [[ $mode == moe ]]; then
  timeout 60 build-gpu/cuda-moe "$PWD" >"$out/cuda-moe.log" 2>&1
  note "cuda-moe (routing / permutation kernels against the host): $(tail -1 "$out/cuda-moe.log")"
  grep -i "fail" "$out/cuda-moe.log" | head -10
  if [[ ${SKIP_MODEL:-0} != 1 ]]; then
    if timeout 200 build-gpu/cuda-model "$PWD" >"$out/cuda-model.log" 2>&1; then
      note "cuda-model: $(tail -1 "$out/cuda-model.log")"
    else
      note "cuda-model FAILED: $(tail -1 "$out/cuda-model.log")"; grep -i "fail\|error" "$out/cuda-model.log" | head -20
    fi
    grep -E "moe|mixtral" "$out/cuda-model.log" | grep -E "rel err|greedy" | head -60
  fi
  if [[ ${SKIP_BENCH:-0} != 1 ]]; then
    timeout 400 build-gpu/cuda-bench ${MOE_CONFIG:-bench/configs/qwen3-30b-a3b} --dummy --batches ${BATCHES:-1,8,64,256} \
      --requests ${REQUESTS:-1000} --max-batch ${MAX_BATCH:-256} --json "$out/bench-moe.json" 2>&1 |
      tee "$out/bench-moe.log" | grep -vE "^\|---" | tail -16
    note "bench moe: $(grep -E '^loaded' "$out/bench-moe.log" | grep -oE '[0-9.]+ GB read per decode step') $(grep -E '^\| 1 \|' "$out/bench-moe.log" | head -1) $(grep -oE '= [0-9]+ output tokens/s' "$out/bench-moe.log")"
  fi
  if [[ ${HF:-0} == 1 ]]; then
    timeout 500 python3 bench/hf-generate.py ${MOE_CONFIG:-bench/configs/qwen3-30b-a3b} --batches ${HF_BATCHES:-1,64,256} \
      >"$out/hf-generate-moe.log" 2>&1
    note "transformers moe: $(tail -1 "$out/hf-generate-moe.log")"
    grep "generate()\|built" "$out/hf-generate-moe.log"
  fi
fi
if [[ $mode == kill4 ]]; then
  # `trtllm-launch --world-size 4 --tp 4` on four GPUs, under load, then kill -9 of one rank: the launcher must
  # exit non-zero with every rank and mpirun gone (found through /proc's environment, as the CPU tests do).
  model=test/fixtures/models/tiny-llama
  node bin/trtllm-launch.js --model "$model" --host 127.0.0.1 --http-port 18000 --metrics-port 18002 --grpc-port 18001 \
    --device cuda --world-size 4 --tp 4 >"$out/kill4-serve.log" 2>&1 &
  launcher=$!
  for _ in $(seq 1 240); do grep -q "ready after" "$out/kill4-serve.log" && break; sleep 0.5; done
  note "kill4: $(grep -m1 -o 'ready after [0-9.]* s' "$out/kill4-serve.log")"
  pids_with() { for e in /proc/[0-9]*/environ; do { tr '\0' '\n' <"$e"; } 2>/dev/null | grep -qx "$1" && basename "$(dirname "$e")"; done; }
  ranks() { pids_with 'OMPI_COMM_WORLD_RANK=[0-9]*'; }
  rank_pid() { pids_with "OMPI_COMM_WORLD_RANK=$1" | head -1; }
  note "kill4: rank processes before: $(ranks | wc -l)"
  timeout 120 node bin/trtllm-launch.js bench token-norm-dist -u 127.0.0.1:18000 --num-requests 400 --request-rate 40 \
    --input-mean 64 --output-mean 64 --no-progress >"$out/kill4-bench.log" 2>&1 &
  bench=$!
  sleep 4
  victim=$(rank_pid 2)
  t_kill=$(date +%s.%N)
  kill -9 "$victim"
  for _ in $(seq 1 120); do kill -0 $launcher 2>/dev/null || break; sleep 0.25; done
  wait $launcher; code=$?
  t_exit=$(date +%s.%N)
  sleep 2
  left=$(ranks | wc -l); mpis=$(pgrep -c -x mpirun || true); mpis=${mpis:-0}
  note "kill4: kill -9 of rank 2 (pid $victim) under load -> launcher exit $code after $(awk "BEGIN{printf \"%.2f\", $t_exit - $t_kill}") s; rank processes left: $left; mpirun left: $mpis"
  wait $bench
  grep -E "failed requests|Successful|OP tokens" "$out/kill4-bench.log" | head -5
  tail -15 "$out/kill4-serve.log"
fi
printf '\n%s\n' "--- summary ($mode)"; printf '%s\n' "${summary[@]}"
