#!/usr/bin/env bash
# Fetches a real checkpoint from huggingface.co into models/<name> (fails fast offline).
#   scripts/download-model.sh [NAME] [DEST]    (make model MODEL=NAME)
# Gated repositories (Llama, Gemma) need HF_TOKEN set to a token that has accepted their licence.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name="${1:-${MODEL:-qwen2.5-0.5b}}"
declare -A repositories=(
  [qwen2.5-0.5b]="Qwen/Qwen2.5-0.5B-Instruct"
  [qwen2.5-1.5b]="Qwen/Qwen2.5-1.5B-Instruct"
  [qwen3-0.6b]="Qwen/Qwen3-0.6B"
  [llama-3.2-1b]="meta-llama/Llama-3.2-1B-Instruct"
  [smollm2-135m]="HuggingFaceTB/SmolLM2-135M-Instruct"
  [smollm2-360m]="HuggingFaceTB/SmolLM2-360M-Instruct"
  [gemma3-270m]="google/gemma-3-270m-it"
  [gemma3-1b]="google/gemma-3-1b-it"
)
if [ -z "${repositories[$name]+set}" ]; then
  echo "error: unknown model '$name' (known: $(printf '%s\n' "${!repositories[@]}" | sort | paste -sd ' '))" >&2
  exit 2
fi
repository="${repositories[$name]}"
dest="${2:-$root/models/$name}"
base="${HF_ENDPOINT:-https://huggingface.co}/$repository/resolve/main"
files=(config.json generation_config.json tokenizer.json tokenizer_config.json model.safetensors)
headers=()
[ -z "${HF_TOKEN:-}" ] || headers=(--header "Authorization: Bearer $HF_TOKEN")

missing=()
for file in "${files[@]}"; do
  [ -s "$dest/$file" ] || missing+=("$file")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "model: $dest is complete"
  exit 0
fi

# One quick probe so that an offline machine fails in seconds with one clear line.
if ! curl --silent --head --fail --location --connect-timeout 5 --max-time 15 "${headers[@]}" \
    "$base/config.json" >/dev/null 2>&1; then
  echo "error: cannot reach ${base%%/$repository*} to download $repository (offline, or a gated repository without HF_TOKEN?); use 'fornace synth --preset $name --out DIR' for a synthetic model with the same shapes" >&2
  exit 1
fi

mkdir -p "$dest"
temporary=""
trap '[ -n "$temporary" ] && rm -f "$temporary"' EXIT
for file in "${missing[@]}"; do
  echo "model: fetching $file"
  temporary="$dest/$file.tmp.$$"
  if ! curl --fail --location --connect-timeout 10 --retry 3 --silent --show-error \
      "${headers[@]}" --output "$temporary" "$base/$file"; then
    rm -f "$temporary"
    echo "error: download of $base/$file failed" >&2
    exit 1
  fi
  mv "$temporary" "$dest/$file"
done
echo "model: $dest"
