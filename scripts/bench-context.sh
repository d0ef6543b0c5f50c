#!/usr/bin/env bash
# Long contexts: fornace-bench (prealloc) and llama.cpp (bench/llamacpp/context.mjs: flash
# attention, the same KV cache type) on the 8k, 16k and 32k prompts, 2 threads, one process per
# engine, weights, cache type and context (so that each peak RSS is its own); then one table
# (scripts/context-table.py). Writes runs/<date>-<commit>-context/ (or $OUT).
#
#   bash scripts/bench-context.sh [BUILD] [MODEL]
# environment: CONTEXTS (8k,16k,32k), WEIGHTS (bf16; bf16 is the checkpoint for fornace and its
# GGUF for llama.cpp, others GGUF files of fornace quantize for both), CACHE_TYPES (f16,bf16,q8_0,
# q4_0: each passed to fornace-bench's --cache-type and to llama.cpp; unset: fornace's default
# cache, bf16, and llama.cpp's LLAMACPP_CACHE_TYPE, f16 by default: its bf16 flash attention on a
# CPU has no fast path, prefill 3.3x slower at 8k), TOKENS (128), RUNS (1), WARMUP (0),
# THREADS (2), ENGINES (fornace,llama.cpp).
set -euo pipefail
build=${1:-build}
model=${2:-models/synth-qwen2.5-0.5b}
contexts=${CONTEXTS:-8k,16k,32k}
weights_types=${WEIGHTS:-bf16}
cache_types=${CACHE_TYPES:-}
tokens=${TOKENS:-128}
runs=${RUNS:-1}
warmup=${WARMUP:-0}
threads=${THREADS:-2}
engines=${ENGINES:-fornace,llama.cpp}
root=$(cd "$(dirname "$0")/.." && pwd)

for context in ${contexts//,/ }; do
  if [ ! -f "$root/bench/prompts/alice-$context.ids" ]; then
    echo "error: no prompt bench/prompts/alice-$context.ids (CONTEXTS takes 8k, 16k, 32k)" >&2
    exit 1
  fi
done
if [ ! -x "$build/bin/fornace-bench" ]; then
  echo "error: $build/bin/fornace-bench is not built" \
    "(run make programs, or give the build directory)" >&2
  exit 1
fi
if [[ ",$engines," == *",llama.cpp,"* ]] &&
  [ ! -d "$root/tests/reference/llamacpp/node_modules/node-llama-cpp" ]; then
  echo "error: node-llama-cpp is not installed (run bash scripts/get-test-packages.sh)" >&2
  exit 1
fi

commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo nogit)
out=${OUT:-runs/$(date -u +%Y-%m-%d)-$commit-context}
mkdir -p "$out"
manifest="$out/manifest.tsv"
: >"$manifest"

# The GGUF file of a weights type, written once next to the checkpoint.
gguf() {
  local file="$model.$1.gguf"
  [ -f "$file" ] || "$build/bin/fornace" quantize --type "$1" --model "$model" --out "$file" >&2
  echo "$file"
}

failed=0
for weights in ${weights_types//,/ }; do
  if [ "$weights" = bf16 ]; then fornace_model=$model; else fornace_model=$(gguf "$weights"); fi
  llama_model=""
  [[ ",$engines," == *",llama.cpp,"* ]] && llama_model=$(gguf "$weights")
  for context in ${contexts//,/ }; do
    prompt="bench/prompts/alice-$context.ids"
    types=${cache_types:-bf16}
    for type in ${types//,/ }; do
      label="$weights-$context-$type"
      llama_type=$type
      [ -z "$cache_types" ] && llama_type=${LLAMACPP_CACHE_TYPE:-f16}
      if [[ ",$engines," == *",fornace,"* ]]; then
        cache_flag=()
        [ -n "$cache_types" ] && cache_flag=(--cache-type "$type")
        echo "fornace $label" >&2
        start=$SECONDS
        "$build/bin/fornace-bench" --model "$fornace_model" --kv-cache prealloc \
          --prompts "$prompt" --runs "$runs" --warmup "$warmup" --max-new-tokens "$tokens" \
          --threads "$threads" "${cache_flag[@]}" --out "$out/fornace-$label.csv" --quiet \
          >/dev/null || failed=1
        echo "  $((SECONDS - start)) s" >&2
        printf 'fornace\t%s\t%s\t%s\n' "$weights" "$type" "$out/fornace-$label.csv" >>"$manifest"
      fi
      if [ -n "$llama_model" ]; then
        label="$weights-$context-$llama_type"
        echo "llama.cpp $label" >&2
        start=$SECONDS
        node "$root/bench/llamacpp/context.mjs" --model "$llama_model" --prompt "$prompt" \
          --cache-type "$llama_type" --tokens "$tokens" --runs "$runs" --warmup "$warmup" \
          --threads "$threads" --out "$out/llamacpp-$label.csv" || failed=1
        echo "  $((SECONDS - start)) s" >&2
        printf 'llama.cpp\t%s\t%s\t%s\n' "$weights" "$llama_type" "$out/llamacpp-$label.csv" \
          >>"$manifest"
      fi
    done
  done
done
# A failed run leaves its row out (with a warning); the others still make the table.
python3 "$root/scripts/context-table.py" "$manifest" | tee "$out/table.md"
exit "$failed"
