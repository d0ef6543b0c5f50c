// llama.cpp's counterpart of a fornace-bench run at one context: a GGUF file, a prompt of token
// ids and a KV cache type, with flash attention on and 2 threads (node-llama-cpp's prebuilt CPU
// binaries, from tests/reference/llamacpp). Per run: prefill ms (the prompt in batches of 512, up
// to the first token), then decode tok/s over the next tokens (greedy); the process's peak RSS.
// Appends one CSV row per run to --out (the header first when the file is new). One process per
// model, prompt and cache type, so that the peak RSS is that run's own.
//
// node bench/llamacpp/context.mjs --model F.gguf --prompt bench/prompts/alice-8k.ids
//   [--cache-type f16|bf16|q8_0|q4_0] [--tokens 128] [--runs 1] [--warmup 0] [--threads 2]
//   [--out runs/llamacpp-context.csv]
import { appendFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseOptions } from '../load/serve_process.mjs';

// The cache types llama.cpp's CPU flash attention takes, by ggml's type names.
const CACHE_TYPES = { f16: 'F16', bf16: 'BF16', q8_0: 'Q8_0', q4_0: 'Q4_0' };
export const CSV_COLUMNS = [
  'engine', 'model', 'kv_cache_type', 'prompt', 'prompt_tokens', 'run', 'prefill_ms',
  'prefill_tok_s', 'decode_tok_s', 'decode_steps', 'context_size', 'kv_mib', 'peak_mib',
  'start_rss_mib', 'threads', 'flash_attention', 'batch_size', 'llama_prefill_ms',
  'llama_decode_ms_per_token',
];

const fail = (message) => {
  console.error(`error: ${message}`);
  process.exit(1);
};

function parseArgs(argv) {
  const options = parseOptions(argv, {
    model: '', prompt: '', 'cache-type': 'f16', tokens: '128', runs: '1', warmup: '0',
    threads: '2', out: 'runs/llamacpp-context.csv', 'batch-size': '512',
  });
  for (const key of ['tokens', 'runs', 'warmup', 'threads', 'batch-size']) {
    options[key] = Number(options[key]);
  }
  if (!options.model || !options.prompt) {
    fail('--model FILE.gguf and --prompt FILE.ids are required');
  }
  if (!(options['cache-type'] in CACHE_TYPES)) {
    fail(`--cache-type ${options['cache-type']}: one of ${Object.keys(CACHE_TYPES).join(', ')}`);
  }
  if (!(options.tokens >= 2) || !(options.runs >= 1) || !(options.warmup >= 0) ||
      !(options.threads >= 1) || !(options['batch-size'] >= 1)) {
    fail('--tokens (>= 2), --runs (>= 1), --warmup, --threads and --batch-size need integers');
  }
  return options;
}

// "1,2,3\n" as in bench/prompts/*.ids.
function readIds(path) {
  let text;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    fail(`cannot read ${path}: ${error.message}`);
  }
  const ids = text.trim().split(',').map(Number);
  if (ids.length === 0 || ids.some((id) => !Number.isInteger(id) || id < 0)) {
    fail(`${path} is not a comma-separated list of token ids`);
  }
  return ids;
}

// node-llama-cpp resolved from where tests/reference/llamacpp installs it.
async function loadLlama(threads, log) {
  const root = fileURLToPath(new URL('../../tests/reference/llamacpp/', import.meta.url));
  const entry = `${root}node_modules/node-llama-cpp/dist/index.js`;
  if (!existsSync(entry)) {
    fail(`${entry} is missing (run bash scripts/get-test-packages.sh)`);
  }
  const { getLlama, LlamaLogLevel } = await import(entry);
  // Prebuilt CPU binaries only: never build, download or look for a GPU.
  return getLlama({
    build: 'never', gpu: false, progressLogs: false, skipDownload: true, maxThreads: threads,
    logLevel: LlamaLogLevel.info, logger: (level, message) => log.push(message.trimEnd()),
  });
}

const mib = (bytes) => bytes / (1024 * 1024);

// llama.cpp's "llama_kv_cache: size = 96.00 MiB (  8448 cells, ...)" line: the cache it allocated.
function kvCache(log) {
  for (const line of log) {
    const match = /llama_kv_cache\w*: size =\s*([\d.]+) MiB \(\s*(\d+) cells/.exec(line);
    if (match) return { mib: Number(match[1]), cells: Number(match[2]) };
  }
  return { mib: NaN, cells: NaN };
}

// llama_perf's own timings of the last run (it starts them again with each sequence):
// "prompt eval time = X ms / N tokens" and "eval time = X ms / N runs".
function perfTimings(log) {
  const timings = { prefillMs: NaN, decodeMsPerToken: NaN };
  for (const line of log) {
    let match = /prompt eval time =\s*([\d.]+) ms/.exec(line);
    if (match) timings.prefillMs = Number(match[1]);
    match = /: +eval time =\s*([\d.]+) ms \/\s*(\d+) runs/.exec(line);
    if (match && Number(match[2]) > 0) {
      timings.decodeMsPerToken = Number(match[1]) / Number(match[2]);
    }
  }
  return timings;
}

// One greedy generation of `tokens` tokens after `ids`: ms to the first token (the prefill) and
// tok/s over the rest, as fornace-bench counts them.
async function timedGeneration(sequence, ids, tokens) {
  const start = performance.now();
  let first = 0;
  let generated = 0;
  for await (const token of sequence.evaluate(ids, { temperature: 0 })) {
    void token;
    if (++generated === 1) first = performance.now();
    if (generated >= tokens) break;
  }
  const end = performance.now();
  return {
    prefillMs: first - start,
    decodeTokS: (generated - 1) / ((end - first) / 1000),
    decodeSteps: generated - 1,
  };
}

// Numbers to 3 decimals (NaN: empty), text quoted where CSV needs it.
const csvField = (value) => {
  let text = String(value);
  if (typeof value === 'number') text = Number.isFinite(value) ? String(+value.toFixed(3)) : '';
  return /[",\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
};

async function main() {
  const options = parseArgs(process.argv);
  const ids = readIds(options.prompt);
  const startRss = process.memoryUsage().rss;
  const log = [];
  const llama = await loadLlama(options.threads, log);
  const model = await llama.loadModel({ modelPath: options.model, gpuLayers: 0 }).catch((error) =>
    fail(`llama.cpp cannot load ${options.model}: ${error.message}`));
  const type = CACHE_TYPES[options['cache-type']];
  const context = await model.createContext({
    contextSize: ids.length + options.tokens,
    batchSize: options['batch-size'],
    sequences: 1,
    threads: options.threads,
    flashAttention: true,
    performanceTracking: true,
    experimentalKvCacheKeyType: type,
    experimentalKvCacheValueType: type,
  }).catch((error) =>
    fail(`llama.cpp cannot make a ${options['cache-type']} context: ${error.message}`));
  const kv = kvCache(log);
  const sequence = context.getSequence();
  const rows = [];
  for (let index = 0; index < options.warmup + options.runs; ++index) {
    await sequence.clearHistory();
    log.length = 0;
    const run = await timedGeneration(sequence, ids, options.tokens);
    await context.printTimings();
    const perf = perfTimings(log);
    if (index < options.warmup) continue;
    const number = index - options.warmup + 1;
    const row = {
      engine: 'llama.cpp', model: options.model, kv_cache_type: options['cache-type'],
      prompt: options.prompt, prompt_tokens: ids.length, run: number, prefill_ms: run.prefillMs,
      prefill_tok_s: 1000 * ids.length / run.prefillMs, decode_tok_s: run.decodeTokS,
      decode_steps: run.decodeSteps, context_size: kv.cells, kv_mib: kv.mib,
      peak_mib: mib(process.resourceUsage().maxRSS * 1024), start_rss_mib: mib(startRss),
      threads: options.threads, flash_attention: 1, batch_size: options['batch-size'],
      llama_prefill_ms: perf.prefillMs, llama_decode_ms_per_token: perf.decodeMsPerToken,
    };
    rows.push(CSV_COLUMNS.map((column) => csvField(row[column])).join(','));
    console.error(`${options['cache-type']} ${options.prompt}: run ${number}: prefill ` +
      `${row.prefill_tok_s.toFixed(1)} tok/s, decode ${run.decodeTokS.toFixed(2)} tok/s, ` +
      `KV ${kv.mib} MiB, peak ${row.peak_mib.toFixed(0)} MiB`);
  }
  await context.dispose();
  await model.dispose();
  mkdirSync(dirname(options.out), { recursive: true });
  if (!existsSync(options.out)) appendFileSync(options.out, CSV_COLUMNS.join(',') + '\n');
  appendFileSync(options.out, rows.map((row) => row + '\n').join(''));
}

await main();
