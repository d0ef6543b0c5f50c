#!/usr/bin/env bash
# The main job: fornace-bench with the three KV caches on both prompts of the synthetic model.
set -euo pipefail
build=${1:-build}
model=${2:-models/synth-qwen2.5-0.5b}
if [ ! -x "$build/bin/fornace-bench" ]; then
  echo "error: $build/bin/fornace-bench is not built (run make programs, or give the build directory)" >&2
  exit 1
fi
# Two rounds of two recorded runs: the caches take turns, so that the drift of a shared machine's
# memory bandwidth falls on all three alike.
exec "$build/bin/fornace-bench" --model "$model" --kv-cache cat,cat-contiguous,prealloc \
  --prompts bench/prompts/alice-512.txt,bench/prompts/alice-2048.txt --runs 2 --rounds 2
