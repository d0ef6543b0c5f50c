#!/usr/bin/env bash
# Quantized weights: the synthetic model as GGUF files of each llama.cpp file type (written once
# with fornace quantize), benchmarked beside its BF16 checkpoint in the same run.
set -euo pipefail
build=${1:-build}
model=${2:-models/synth-qwen2.5-0.5b}
types=${TYPES:-q8_0,q4_0,q4_k_m,q5_k_m}
if [ ! -x "$build/bin/fornace-bench" ]; then
  echo "error: $build/bin/fornace-bench is not built (run make programs, or give the build directory)" >&2
  exit 1
fi
models=$model
for type in ${types//,/ }; do
  file="$model.$type.gguf"
  [ -f "$file" ] || "$build/bin/fornace" quantize --type "$type" --model "$model" --out "$file"
  models="$models,$file"
done
# Prealloc only (the cache kinds are finding 0001's subject); two rounds of two recorded runs,
# the models taking turns, so that a drift of the machine's bandwidth falls on all alike.
exec "$build/bin/fornace-bench" --model "$models" --kv-cache prealloc \
  --prompts bench/prompts/alice-512.ids,bench/prompts/alice-2048.ids --runs 2 --rounds 2 "${@:3}"
