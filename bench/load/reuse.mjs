// Prompt reuse in `fornace serve`: the time to first token of a conversation's second turn after a
// history of about 500 and 2,000 tokens, with the slot's cache reused and with cache_prompt off,
// in alternating rounds on one server; prints medians and ranges and writes a CSV.
//
// node bench/load/reuse.mjs --fornace build/bin/fornace --model models/synth-qwen2.5-0.5b
//   [--history 500,2000] [--rounds 5] [--threads 2] [--out runs]
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { parseOptions, sseChunks, startServer } from './serve_process.mjs';

function parseArgs(argv) {
  const options = parseOptions(argv, {
    fornace: 'build/bin/fornace', model: 'models/synth-qwen2.5-0.5b', history: '500,2000',
    rounds: '5', threads: '2', out: 'runs', text: 'bench/prompts/alice-2048.txt',
  });
  options.history = options.history.split(',').map(Number);
  options.rounds = Number(options.rounds);
  if (options.history.some((n) => !(n >= 16)) || !(options.rounds >= 1)) {
    console.error('error: --history needs token counts >= 16 and --rounds a positive integer');
    process.exit(2);
  }
  return options;
}

const sorted = (values) => [...values].sort((a, b) => a - b);
const median = (values) => sorted(values)[Math.floor((values.length - 1) / 2)];

// One streamed chat completion: the text, the ms to its first text chunk and the usage.
async function chat(url, messages, maxTokens, cachePrompt) {
  const start = performance.now();
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: maxTokens, temperature: 0, seed: 1, stream: true,
      ignore_eos: true, cache_prompt: cachePrompt, stream_options: { include_usage: true } }),
  });
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  let text = '', firstMs = null, usage = null;
  for await (const { chunk, now } of sseChunks(response)) {
    if (chunk.usage) usage = chunk.usage;
    const piece = chunk.choices?.[0]?.delta?.content;
    if (piece) {
      if (firstMs === null) firstMs = now - start;
      text += piece;
    }
  }
  return { text, firstMs, usage };
}

// The words of `text` that make about `tokens` tokens of the served model (counted by a prefill
// of the text alone, through the usage of a 1-token completion).
async function historyOf(url, words, tokens) {
  let low = 1, high = words.length;
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    const { usage } = await chat(url, [{ role: 'user', content: words.slice(0, middle).join(' ') }], 1, false);
    if (usage.prompt_tokens <= tokens) low = middle; else high = middle - 1;
  }
  return words.slice(0, low).join(' ');
}

async function main() {
  const options = parseArgs(process.argv);
  const words = readFileSync(options.text, 'utf8').split(/\s+/).filter(Boolean);
  const server = await startServer(options.fornace, ['--model', options.model, '--threads',
    options.threads, '--parallel', '1', '--ctx-size', '4096']);
  const rows = [];
  try {
    for (const tokens of options.history) {
      const history = await historyOf(server.url, words, tokens);
      const first = [{ role: 'user', content: history }];
      const ttft = { reuse: [], whole: [] };
      let prompt = 0, cached = 0;
      for (let round = 0; round < options.rounds; ++round) {
        for (const reuse of round % 2 === 0 ? [true, false] : [false, true]) {
          // Turn 1 fills the slot's cache; turn 2 adds the answer and a new question.
          const answer = await chat(server.url, first, 32, false);
          const second = [...first, { role: 'assistant', content: answer.text },
            { role: 'user', content: `Question ${round}: who is speaking here, and why?` }];
          const turn = await chat(server.url, second, 8, reuse);
          (reuse ? ttft.reuse : ttft.whole).push(turn.firstMs);
          prompt = turn.usage.prompt_tokens;
          if (reuse) cached = turn.usage.prompt_tokens_details?.cached_tokens ?? 0;
        }
      }
      const row = { history: tokens, prompt, cached,
        reuse: median(ttft.reuse), reuseMin: Math.min(...ttft.reuse), reuseMax: Math.max(...ttft.reuse),
        whole: median(ttft.whole), wholeMin: Math.min(...ttft.whole), wholeMax: Math.max(...ttft.whole) };
      row.ratio = row.whole / row.reuse;
      rows.push(row);
      console.log(`history ~${tokens} tokens: second turn ${prompt} prompt tokens, ${cached} reused; ` +
        `TTFT ${row.reuse.toFixed(1)} ms (${row.reuseMin.toFixed(1)}-${row.reuseMax.toFixed(1)}) with reuse, ` +
        `${row.whole.toFixed(1)} ms (${row.wholeMin.toFixed(1)}-${row.wholeMax.toFixed(1)}) without: ` +
        `${row.ratio.toFixed(1)}x (medians of ${options.rounds})`);
    }
  } finally {
    server.child.kill('SIGTERM');
    await server.exited;
  }
  mkdirSync(options.out, { recursive: true });
  const path = `${options.out}/reuse-${new Date().toISOString().slice(0, 10)}.csv`;
  const columns = ['history', 'prompt', 'cached', 'reuse', 'reuseMin', 'reuseMax', 'whole', 'wholeMin', 'wholeMax', 'ratio'];
  writeFileSync(path, [columns.join(','), ...rows.map((r) => columns.map((c) => r[c]).join(','))].join('\n') + '\n');
  console.log(`wrote ${path}`);
}

main().catch((error) => {
  console.error(`error: ${error.message}`);
  process.exit(1);
});
