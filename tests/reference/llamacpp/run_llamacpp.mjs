// Loads GGUF files with llama.cpp (node-llama-cpp's prebuilt CPU binaries) and prints what it reports.
// usage: node run_llamacpp.mjs REQUESTS.json
// REQUESTS: a JSON array of {model, texts?, prompt_ids?, forced_ids?, new_tokens?,
//   log_probabilities_out?}.
// Prints a JSON array with one result per request, in order:
//   print_info: llama.cpp's own "print_info: key = value" load report (repeated keys as arrays),
//   description (llama_model_desc), embedding_size, warnings: log lines at warning level or above,
//   tokens: llama.cpp's ids for each text (special tokens parsed, no BOS added),
//   generated_ids: new_tokens greedy tokens after prompt_ids,
//   log_probability_rows: rows written to log_probabilities_out as little-endian float32, n_vocab
//     each: the next-token log-probabilities after the last prompt id, then after each of
//     forced_ids (teacher-forced).
// A model that fails to load gives {error, log}, and the exit status is 1.
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { readFileSync, writeFileSync } from "node:fs";

const THREADS = 2;
if (!process.argv[2]) {
  console.error("usage: node run_llamacpp.mjs REQUESTS.json");
  process.exit(2);
}
const requests = JSON.parse(readFileSync(process.argv[2], "utf8"));
let log = [];
// Prebuilt CPU binaries only: never build, download or look for a GPU.
const llama = await getLlama({
  build: "never",
  gpu: false,
  progressLogs: false,
  skipDownload: true,
  maxThreads: THREADS,
  logLevel: LlamaLogLevel.info,
  logger: (level, message) => log.push({ level, message: message.trimEnd() }),
});

const WARNING_LEVELS = new Set([LlamaLogLevel.warn, LlamaLogLevel.error, LlamaLogLevel.fatal]);

// "print_info: n_layer = 2" lines; a key printed more than once (EOG token) collects an array.
function loadReport(lines) {
  const report = {};
  for (const { message } of lines) {
    const match = /print_info: (.+?)\s*= (.*)$/.exec(message);
    if (!match) continue;
    const [, key, value] = match;
    if (!(key in report)) report[key] = value.trim();
    else report[key] = [].concat(report[key], value.trim());
  }
  return report;
}

// llama.cpp's next-token distribution after the last prompt id and after each forced id, as
// natural-log probabilities (node-llama-cpp 3.21 gives probabilities, not raw logits; their logs
// are the logits less one constant per row).
async function nextTokenLogProbabilities(sequence, promptIds, forcedIds, vocabularySize) {
  const ids = [...promptIds, ...forcedIds];
  const firstRow = promptIds.length - 1;
  const items = ids.map((id, index) =>
    index >= firstRow ? [id, { generateNext: { probabilities: true } }] : id,
  );
  const evaluated = await sequence.controlledEvaluate(items);
  const rows = ids.length - firstRow;
  const logProbabilities = new Float32Array(rows * vocabularySize);
  for (let row = 0; row < rows; ++row) {
    const probabilities = evaluated[firstRow + row]?.next?.probabilities;
    if (!probabilities || probabilities.size !== vocabularySize) {
      throw new Error(`llama.cpp gave no full distribution after position ${firstRow + row}`);
    }
    for (const [token, probability] of probabilities) {
      logProbabilities[row * vocabularySize + token] = Math.log(probability);
    }
  }
  return { rows, logProbabilities };
}

async function greedyTokens(sequence, promptIds, count) {
  const generated = [];
  if (count <= 0) return generated;
  for await (const token of sequence.evaluate(promptIds, { temperature: 0 })) {
    generated.push(token);
    if (generated.length >= count) break;
  }
  return generated;
}

async function run(request) {
  log = [];
  const model = await llama.loadModel({ modelPath: request.model, gpuLayers: 0, checkTensors: true });
  const report = loadReport(log);
  const result = {
    print_info: report,
    description: model.typeDescription,
    embedding_size: model.embeddingVectorSize,
    warnings: log.filter((line) => WARNING_LEVELS.has(line.level)).map((line) => line.message),
    tokens: (request.texts ?? []).map((text) => Array.from(model.tokenize(text, true))),
  };
  const promptIds = request.prompt_ids ?? [];
  if (promptIds.length > 0) {
    const forcedIds = request.forced_ids ?? [];
    const context = await model.createContext({
      contextSize: 256,
      batchSize: 256,
      sequences: 1,
      threads: THREADS,
      flashAttention: false,
      swaFullCache: true,
      // f32 keys and values, as Fornace keeps them for f32 weights: the cache rounds nothing.
      experimentalKvCacheKeyType: "F32",
      experimentalKvCacheValueType: "F32",
    });
    const sequence = context.getSequence();
    if (request.log_probabilities_out) {
      const vocabularySize = Number(report.n_vocab);
      // node-llama-cpp now and then returns a short distribution under heavy load (seen once in
      // a parallel CI run, not reproduced alone): the evaluation runs again on a cleared sequence.
      let distributions;
      for (let attempt = 1; !distributions; ++attempt) {
        try {
          distributions = await nextTokenLogProbabilities(
            sequence, promptIds, forcedIds, vocabularySize);
        } catch (error) {
          await sequence.clearHistory();
          if (attempt === 3) throw error;
        }
      }
      const { rows, logProbabilities } = distributions;
      writeFileSync(request.log_probabilities_out, Buffer.from(logProbabilities.buffer));
      result.log_probability_rows = rows;
      await sequence.clearHistory();
    }
    result.generated_ids = await greedyTokens(sequence, promptIds, request.new_tokens ?? 0);
    await context.dispose();
  }
  await model.dispose();
  return result;
}

const results = [];
let failed = false;
for (const request of requests) {
  try {
    results.push(await run(request));
  } catch (error) {
    failed = true;
    await new Promise((resolve) => setTimeout(resolve, 100));  // Log lines still in flight.
    results.push({ error: String(error?.message ?? error), log: log.map((line) => line.message) });
  }
}
process.stdout.write(JSON.stringify(results) + "\n");
process.exit(failed ? 1 : 0);
