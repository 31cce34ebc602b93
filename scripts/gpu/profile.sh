#!/usr/bin/env bash
# Per-kernel GPU time of one prefill chunk and one decode step of the Llama-3-8B shape (dummy weights), through
# Nsight Compute (`ncu`, GPU time of each kernel, clocks left alone), summed by kernel. Expects build-gpu/ (check.sh
# builds it) and writes the tables to $OUT (or ./gpu-out).   usage: scripts/gpu/profile.sh [batches, default 1,256]
# CONFIG=bench/configs/qwen3-30b-a3b profiles another shape; WHAT=decode skips the prefill chunks; BENCH_ARGS adds
# cuda-bench options (e.g. "--quantization fp8"). WHAT=verify profiles a speculative step's check of VERIFY_K (default 4)
# guesses instead, next to the decode step of the same batch. WHAT=decode-lora profiles the decode step with adapters
# (BENCH_ARGS must carry --lora N,R) next to the plain one.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
IFS=, read -ra batches <<<"${1:-1,256}"
for b in "${batches[@]}"; do
  for what in decode prefill verify decode-lora; do
    [[ $what == prefill && $b == 1 ]] && continue
    [[ ( $what == verify || $what == decode-lora ) && ${WHAT:-} != "$what" ]] && continue
    [[ -n ${WHAT:-} && $what != "$WHAT" && ! ( ( $WHAT == verify || $WHAT == decode-lora ) && $what == decode ) ]] && continue
    extra=(); [[ $what == verify ]] && extra=(--verify "${VERIFY_K:-4}")
    log="$out/ncu-$what-b$b.csv"
    timeout 240 ncu --clock-control none --cache-control none --profile-from-start off --graph-profiling node \
      --metrics gpu__time_duration.sum --csv --page raw --print-units base \
      build-gpu/cuda-bench "${CONFIG:-bench/configs/llama-3-8b}" --dummy --batches "$b" --steps 4 --requests 0 --profile "$what" "${extra[@]}" ${BENCH_ARGS:-} \
      >"$log" 2>"$out/ncu-$what-b$b.err" || { echo "ncu $what b$b failed:"; tail -5 "$out/ncu-$what-b$b.err"; continue; }
    python3 scripts/gpu/ncu_table.py "$log" "$what, batch $b"
  done
done
