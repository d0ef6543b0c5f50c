#!/usr/bin/env bash
# Installs the npm packages that tests run, from their lock files: the independent GGUF reader
# (@huggingface/gguf) under tests/reference/gguf/node_modules, llama.cpp's prebuilt CPU
# binaries (node-llama-cpp) under tests/reference/llamacpp/node_modules, OpenAI's Node client
# (openai) under tests/reference/openai/node_modules, the driver of Debian's Chromium
# (puppeteer-core) under tests/reference/browser/node_modules, and the JSON schema validator (ajv)
# under tests/reference/json_schema/node_modules. Skips what is already installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# install DIR TESTS NPM_CI_OPTIONS...: npm ci in tests/reference/DIR unless its lock file is the
# one installed; TESTS names the tests that fail without it.
install() {
  local name="$1" tests="$2"
  local dir="$root/tests/reference/$name"
  shift 2
  local stamp="$dir/node_modules/.installed-package-lock.json"
  if [ -f "$stamp" ] && cmp -s "$stamp" "$dir/package-lock.json"; then
    return 0
  fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "warning: npm is not installed (run scripts/setup.sh); $tests tests will fail" >&2
    return 0
  fi
  if npm ci --prefix "$dir" --silent --no-audit --no-fund "$@" >/dev/null 2>&1; then
    cp "$dir/package-lock.json" "$stamp"
    echo "test packages: $dir/node_modules"
  else
    # Offline or a registry error: the rest of the suite still runs; the tests that need the
    # package fail and say how to install it.
    echo "warning: could not install the npm packages of tests/reference/$name (offline?);" \
      "$tests tests will fail until 'npm ci --prefix tests/reference/$name${*:+ $*}' succeeds" >&2
  fi
}

install gguf GgufIndependentReader
# No install scripts: node-llama-cpp's would look for a GPU and offer to build llama.cpp. No
# optional packages: those are the other platforms' and the CUDA and Vulkan builds; the CPU one
# for Linux x64 is a dependency of its own.
install llamacpp LlamaCppLoads --ignore-scripts --omit=optional
install openai OpenAIClient.Serve
install browser ChatPage.Browser
install json_schema "OpenAIClient.StructuredOutputs and OpenAIClient.ToolCalls"
