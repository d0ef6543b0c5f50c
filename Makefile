# Entry points: `make bench` (the main job), `make test` (the whole suite), `make model` (real weights).
BUILD ?= build
JOBS ?= $(shell nproc)
SYNTH_MODEL ?= models/synth-qwen2.5-0.5b
MODEL ?= qwen2.5-0.5b

# ccache, when installed (looked up as the recipe runs, after setup), behind both compilers;
# paths under the clone are hashed relative to it, so a fresh clone elsewhere hits the cache.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
LAUNCHERS = $$(command -v ccache >/dev/null && echo -DCMAKE_C_COMPILER_LAUNCHER=ccache \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

.PHONY: setup configure build programs test bench model tokenizer test-packages synth clean

setup:
	bash scripts/setup.sh

configure:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(LAUNCHERS)

# Everything: the library, the tools, every test and microbenchmark.
build: configure
	cmake --build $(BUILD) -j $(JOBS)

# What the benches run: fornace and fornace-bench only.
programs: configure
	cmake --build $(BUILD) -j $(JOBS) --target fornace fornace-bench

tokenizer: setup
	bash scripts/get-tokenizer.sh

# npm packages that tests run (the independent GGUF reader), from their lock files.
test-packages: setup
	bash scripts/get-test-packages.sh

test: setup build tokenizer test-packages
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

synth: programs tokenizer
	@[ -f $(SYNTH_MODEL)/model.safetensors ] || $(BUILD)/bin/fornace synth --preset qwen2.5-0.5b --out $(SYNTH_MODEL)

# Writes its CSV, Markdown and SVG to runs/ (ignored by git).
bench: setup synth
	bash scripts/bench.sh $(BUILD) $(SYNTH_MODEL)

# Quantized GGUF files of the synthetic model (fornace quantize) against its BF16 checkpoint.
.PHONY: bench-quantized
bench-quantized: synth
	bash scripts/bench-quantized.sh $(BUILD) $(SYNTH_MODEL)

# Long contexts: the 8k, 16k and 32k prompts on fornace-bench and on llama.cpp (node-llama-cpp's CPU
# binaries, flash attention, the same KV cache types), one table; CACHE_TYPES, WEIGHTS, CONTEXTS
# as scripts/bench-context.sh reads them. Takes tens of minutes: run it on an idle machine.
.PHONY: bench-context
bench-context: synth test-packages
	bash scripts/bench-context.sh $(BUILD) $(SYNTH_MODEL)

# fornace serve under 1, 2, 4 and 8 concurrent streams on the synthetic model (bench/load/).
.PHONY: bench-load
bench-load: synth
	node bench/load/load.mjs --fornace $(BUILD)/bin/fornace --model $(SYNTH_MODEL)

model:
	bash scripts/download-model.sh $(MODEL)

clean:
	rm -rf $(BUILD)

# Hostile input (issue 8): the test suite under ASan+UBSan and the fuzz corpora replayed.
.PHONY: test-hostile
test-hostile: setup tokenizer
	bash scripts/test-hostile.sh
