#!/usr/bin/env bash
# Fetches Qwen/Qwen2.5-0.5B-Instruct from huggingface.co into models/qwen2.5-0.5b-instruct (fails fast offline).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
repository="Qwen/Qwen2.5-0.5B-Instruct"
dest="${1:-$root/models/qwen2.5-0.5b-instruct}"
base="${HF_ENDPOINT:-https://huggingface.co}/$repository/resolve/main"
files=(config.json generation_config.json tokenizer.json tokenizer_config.json model.safetensors)

missing=()
for file in "${files[@]}"; do
  [ -s "$dest/$file" ] || missing+=("$file")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "model: $dest is complete"
  exit 0
fi

# One quick probe so that an offline machine fails in seconds with one clear line.
if ! curl --silent --head --fail --location --connect-timeout 5 --max-time 15 \
    "$base/config.json" >/dev/null 2>&1; then
  echo "error: cannot reach ${base%%/$repository*} to download $repository (offline?); use 'fornace synth --preset qwen2.5-0.5b --out DIR' for a synthetic model with the same shapes" >&2
  exit 1
fi

mkdir -p "$dest"
temporary=""
trap '[ -n "$temporary" ] && rm -f "$temporary"' EXIT
for file in "${missing[@]}"; do
  echo "model: fetching $file"
  temporary="$dest/$file.tmp.$$"
  if ! curl --fail --location --connect-timeout 10 --retry 3 --silent --show-error \
      --output "$temporary" "$base/$file"; then
    rm -f "$temporary"
    echo "error: download of $base/$file failed" >&2
    exit 1
  fi
  mv "$temporary" "$dest/$file"
done
echo "model: $dest"
