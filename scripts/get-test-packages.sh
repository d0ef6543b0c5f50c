#!/usr/bin/env bash
# Installs the npm packages that tests run, from their lock files: the independent GGUF reader
# (@huggingface/gguf) under tests/reference/gguf/node_modules. Skips what is already installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/tests/reference/gguf"
stamp="$dir/node_modules/.installed-package-lock.json"

if [ -f "$stamp" ] && cmp -s "$stamp" "$dir/package-lock.json"; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "warning: npm is not installed (run scripts/setup.sh); GgufIndependentReader tests will fail" >&2
  exit 0
fi
if npm ci --prefix "$dir" --silent --no-audit --no-fund >/dev/null 2>&1; then
  cp "$dir/package-lock.json" "$stamp"
  echo "test packages: $dir/node_modules"
else
  # Offline or a registry error: the rest of the suite still runs; the test that needs the
  # package fails and says how to install it.
  echo "warning: could not install the npm packages of tests/reference/gguf (offline?);" \
    "GgufIndependentReader tests will fail until 'npm ci --prefix tests/reference/gguf' succeeds" >&2
fi
